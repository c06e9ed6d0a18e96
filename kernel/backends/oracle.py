"""The oracle backend: answers every SLM primitive from a worked solution's annotations.

It is a pure function of the request's input (plus the annotated turn), so
replaying a solution through the kernel with the oracle re-derives every
decision consistently, including values that depend on the scratchpad
(match_fill answers ``scratchpad:<key>`` by reading the state in its input). Each
primitive's answer is its spec's ``oracle`` (kernel/specs.py).
"""

from __future__ import annotations

import json
from typing import Any

from forethought.primitives import SLMReply, SLMRequest

from ..scenario import TaskAnn, Turn
from ..specs import Annotation, get_spec


class OracleBackend:
    name = "oracle"

    def __init__(self, turn: Turn, solution_id: str = ""):
        if not turn.annotated:
            raise ValueError(f"{solution_id}: the oracle needs an annotated turn (tasks, order, calls)")
        self.turn = turn
        self.solution_id = solution_id
        self.annotation = Annotation.of(turn)
        self.tasks: dict[str, TaskAnn] = self.annotation.tasks
        self.model = {"backend": "oracle", "model": f"annotations:{solution_id}"}

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        return [
            SLMReply(
                json.dumps(self.answer(r.primitive, r.input), ensure_ascii=False), dict(self.model, adapter=r.adapter)
            )
            for r in requests
        ]

    def answer(self, primitive: str, inp: Any) -> dict[str, Any]:
        """What the primitive would be trained to output here (an unknown primitive is a KeyError naming the registered ones)."""
        return get_spec(primitive).oracle(inp, self.annotation)
