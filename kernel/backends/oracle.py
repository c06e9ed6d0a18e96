"""The oracle backend: answers every SLM primitive from a worked solution's annotations.

It is a pure function of the request's input (plus the annotated turn), so
replaying a solution through the kernel with the oracle re-derives every
decision consistently, including values that depend on the scratchpad
(match_fill answers ``S:<key>`` by reading the state in its input).
"""

from __future__ import annotations

import json
from typing import Any

from forethought.primitives import SLMReply, SLMRequest

from ..scenario import TaskAnn, Turn


class OracleBackend:
    name = "oracle"

    def __init__(self, turn: Turn, solution_id: str = ""):
        if not turn.annotated:
            raise ValueError(f"{solution_id}: the oracle needs an annotated turn (tasks, order, calls)")
        self.turn = turn
        self.solution_id = solution_id
        self.tasks: dict[str, TaskAnn] = {t.id: t for t in turn.tasks or []}
        self.model = {"backend": "oracle", "model": f"annotations:{solution_id}"}

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        return [SLMReply(json.dumps(self.answer(r.primitive, r.input), ensure_ascii=False), dict(self.model, adapter=r.adapter)) for r in requests]

    # Each answer mirrors what the primitive would be trained to output.
    def answer(self, primitive: str, inp: Any) -> dict[str, Any]:
        return getattr(self, f"_{primitive}")(inp)

    def _decompose(self, inp: Any) -> dict[str, Any]:
        return {
            "tasks": [
                {"id": t.id, "text": t.text, "tool_name": t.tool, "depends_on": list(t.depends_on), "parameters": dict(t.parameters)}
                for t in self.turn.tasks or []
            ]
        }

    def _get_order(self, inp: Any) -> dict[str, Any]:
        pos = {tid: i for i, tid in enumerate(self.turn.order or [])}
        ids = [t.id for t in inp.tasks]
        return {"ordered_task_ids": sorted(ids, key=lambda t: (pos.get(t, len(pos)), ids.index(t)))}

    def _check_prerequisites(self, inp: Any) -> dict[str, Any]:
        t = self.tasks.get(inp.task.id)
        for p in t.prerequisites if t is not None else []:
            if p.key != inp.key:
                continue
            task = p.retrieval if inp.outcome == "absent" else p.remediation
            return {"task": task.model_dump(mode="json") if task is not None else None}
        return {"task": None}

    def _match_func(self, inp: Any) -> dict[str, Any]:
        t = self.tasks.get(inp.task.id)
        return {"tool_name": t.match if t is not None else None}

    def _match_fill(self, inp: Any) -> dict[str, Any]:
        t = self.tasks.get(inp.task.id)
        values: dict[str, Any] = {}
        for m in inp.missing:
            b = t.bindings.get(m) if t is not None else None
            v = None
            if b is not None and b.source == "fill":
                ff = b.fill_from or "literal"
                if ff.startswith("S:"):
                    v = inp.state.get(ff[2:])
                elif ff.startswith("tau:"):
                    v = inp.context.get(ff[4:])
                else:
                    v = b.value
            values[m] = v
        return {"values": values}
