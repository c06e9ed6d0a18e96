"""A SIMULATION: the oracle with errors injected at configurable per-primitive rates.

Used by ``forethought evaluate`` to show how the contract-and-control layer
turns primitive error rates into end-to-end accuracy. Each answer is
corrupted independently with the primitive's rate, by an error typical of
that primitive (its spec's ``corrupt`` and ``noise_kinds``, kernel/specs.py);
some are detectable by its contract (malformed JSON, an unregistered tool, an
ungrounded value, a non-permutation), others are not (a wrong but registered
tool, a swapped order). Retries draw new errors independently — an
assumption of the simulation, stated in the report.
"""

from __future__ import annotations

import json
import random
from typing import Any

from forethought.primitives import SLMReply, SLMRequest

from ..specs import PrimitiveSpec, get_spec


def _noisy_spec(primitive: str) -> PrimitiveSpec:
    spec = get_spec(primitive)  # an unknown primitive: KeyError naming the registered ones
    if spec.corrupt is None:
        raise ValueError(
            f"the noisy oracle cannot corrupt {primitive!r}: its spec declares no noise kinds (PrimitiveSpec.corrupt)"
        )
    return spec


class NoisyOracle:
    name = "oracle+noise"

    def __init__(self, inner: Any, rates: dict[str, float], rng: random.Random):
        for primitive, rate in rates.items():
            if rate > 0:
                _noisy_spec(primitive)  # refused now, not at the first injected error
        self.inner = inner
        self.rates = rates
        self.rng = rng
        self.injected: dict[str, int] = {}

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        replies = self.inner.complete(requests)
        out = []
        for request, reply in zip(requests, replies, strict=False):
            if self.rng.random() < self.rates.get(request.primitive, 0.0):
                text, kind = self._corrupt(request, reply.text)
                self.injected[f"{request.primitive}:{kind}"] = self.injected.get(f"{request.primitive}:{kind}", 0) + 1
                out.append(SLMReply(text, {**reply.model, "backend": "oracle+noise", "injected": kind}))
            else:
                out.append(reply)
        return out

    def _tools(self, req: SLMRequest) -> list[str]:
        tools = getattr(req.input, "tools", None)
        if tools is None:
            tool = getattr(req.input, "tool", None)
            tools = [tool] if tool is not None else []
        return [t.name for t in tools]

    def _corrupt(self, req: SLMRequest, text: str) -> tuple[str, str]:
        spec = _noisy_spec(req.primitive)
        rng = self.rng
        if rng.random() < 0.15:
            return text[: max(0, len(text) // 2)], "truncated_json"
        try:
            ans = json.loads(text)
        except json.JSONDecodeError:
            return "", "empty"
        assert spec.corrupt is not None
        kind = spec.corrupt(ans, rng, self._tools(req))
        if kind not in spec.noise_kinds:
            raise ValueError(
                f"{req.primitive}'s corrupt() returned {kind!r}, not one of its noise_kinds {list(spec.noise_kinds)}"
            )
        return json.dumps(ans), kind
