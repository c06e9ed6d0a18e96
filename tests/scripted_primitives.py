"""The kernel backend both benchmark tests script (tests/test_bench_bfcl.py, tests/test_bench_tau2.py): it answers
each primitive's request as a model knowing the run's ground truth would.

A subclass writes ``_decompose(input)`` (the tasks, with each task's function in ``tools`` by its text) and may
replace the others; by default match_func names the function decompose gave the task, get_order keeps the
tasks' order, match_fill fills nothing and check_prerequisites finds no missing step. ``asked`` counts the
requests per primitive.
"""

from __future__ import annotations

import json
from collections import Counter

from forethought.primitives import SLMReply


class ScriptedPrimitives:
    name = "scripted"

    def __init__(self):
        self.tools: dict[str, str | None] = {}  # a task's text -> the function decompose proposed for it
        self.asked: Counter = Counter()

    def complete(self, requests):
        self.asked.update(r.primitive for r in requests)
        return [
            SLMReply(
                json.dumps(getattr(self, "_" + r.primitive)(r.input)), {"backend": "scripted", "adapter": r.adapter}
            )
            for r in requests
        ]

    def _match_func(self, inp):
        return {"tool_name": self.tools.get(inp.task.text)}

    def _get_order(self, inp):
        return {"ordered_task_ids": [t.id for t in inp.tasks]}

    def _match_fill(self, inp):
        return {"values": {m: None for m in inp.missing}}

    def _check_prerequisites(self, inp):
        return {"task": None}
