"""``forethought bench serving``: check that a served deployment applies each primitive's adapter.

vLLM serves the base model, without an error, when a LoRA adapter's keys do not match the model's module
names (docs/serving.md). So before a bench runs against a deployment, this command sends one probe (the
one ``forethought package`` checks adapters with) to the base model (``responder.model``) and to each
primitive's served adapter (``backend.models``, default the primitive's name) at ``backend.base_url``,
greedily, with log-probabilities, and compares them: an adapter whose output and token log-probabilities
equal the base's is reported as not applied (exit 1). It reads the same config as ``bench bfcl``, so the
deployment checked is the one the bench will use.
"""

from __future__ import annotations

from typing import Any

from forethought.errors import RunFailed, UserError
from forethought.kernel.backends.openai_backend import BackendError, OpenAIBackend, resolve_api_key
from forethought.kernel.specs import PRIMITIVE_NAMES

MIN_LOGPROB_DELTA = 1e-3  # below this the served "adapter" is the base, up to numerical noise


def _text(reply: dict[str, Any]) -> str:
    try:
        return str(reply["choices"][0]["message"].get("content") or "")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""


def _logprobs(reply: dict[str, Any]) -> list[tuple[str, float]] | None:
    try:
        content = reply["choices"][0]["logprobs"]["content"]
        return [(str(t["token"]), float(t["logprob"])) for t in content]
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def compare(base: dict[str, Any], adapter: dict[str, Any]) -> dict[str, Any]:
    """How an adapter's reply to the probe differs from the base's: text, and the largest log-probability
    difference over the tokens both chose alike (None when the server sent no log-probabilities)."""
    bt, at = _text(base), _text(adapter)
    bl, al = _logprobs(base), _logprobs(adapter)
    delta = None
    if bl is not None and al is not None:
        delta = 0.0
        for (btok, blp), (atok, alp) in zip(bl, al, strict=False):
            if btok != atok:
                delta = float("inf")  # a different token: the distributions differ
                break
            delta = max(delta, abs(blp - alp))
        if len(bl) != len(al):
            delta = float("inf")
    applies = bt != at or (delta is not None and delta > MIN_LOGPROB_DELTA)
    return {"text_differs": bt != at, "max_logprob_delta": delta, "applies": applies, "text": at[:120]}


def check(
    client: OpenAIBackend, base_model: str, adapters: dict[str, str], max_tokens: int = 16
) -> dict[str, dict[str, Any]]:
    from forethought.training.package import PROBE

    body = {"messages": PROBE, "temperature": 0.0, "max_tokens": max_tokens, "logprobs": True, "top_logprobs": 1}
    base = client.chat({**body, "model": base_model})
    return {p: {"model": name, **compare(base, client.chat({**body, "model": name}))} for p, name in adapters.items()}


def cli(cfg: Any) -> int:
    if cfg.backend.name != "openai":
        raise UserError(
            "bench serving checks a served deployment: give backend=openai backend.base_url=http://HOST:PORT/v1",
            "backend",
        )
    client = OpenAIBackend(
        cfg.backend.base_url, api_key=resolve_api_key(cfg.backend, "backend"), timeout_s=cfg.backend.timeout_s
    )
    adapters = {p: cfg.backend.models.get(p, p) for p in PRIMITIVE_NAMES}
    try:
        rows = check(client, cfg.responder.model, adapters)
    except BackendError as exc:  # a dead, hanging or misbehaving server: the run failed, it is not a bug here
        raise RunFailed(f"the deployment did not answer the probe: {exc.message}", "backend.base_url") from None
    print(f"probe sent to the base model {cfg.responder.model!r} and to each adapter at {client.base_url}:")
    for primitive, probe in rows.items():
        delta = (
            "no logprobs" if probe["max_logprob_delta"] is None else f"max |Δlogprob| {probe['max_logprob_delta']:.3g}"
        )
        verdict = "applies" if probe["applies"] else "SAME AS THE BASE (adapter not applied?)"
        print(f"  {primitive:<20} model {probe['model']!r}: {verdict}; text differs: {probe['text_differs']}; {delta}")
    same = [p for p, r in rows.items() if not r["applies"]]
    if same:
        print(
            f"error: {', '.join(same)}: the served adapter answers the probe exactly as the base model does; vLLM serves "
            "the base silently when an adapter's keys do not match the model (docs/serving.md)",
            flush=True,
        )
        return 1
    return 0
