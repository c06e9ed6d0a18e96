"""A SIMULATION: the oracle with errors injected at configurable per-primitive rates.

Used by ``forethought evaluate`` to show how the contract-and-control layer
turns primitive error rates into end-to-end accuracy. Each answer is
corrupted independently with the primitive's rate, by an error typical of
that primitive; some are detectable by its contract (malformed JSON, an
unregistered tool, an ungrounded value, a non-permutation), others are not
(a wrong but registered tool, a swapped order). Retries draw new errors
independently — an assumption of the simulation, stated in the report.
"""

from __future__ import annotations

import json
import random
from typing import Any

from forethought.primitives import SLMReply, SLMRequest


class NoisyOracle:
    name = "oracle+noise"

    def __init__(self, inner: Any, rates: dict[str, float], rng: random.Random):
        self.inner = inner
        self.rates = rates
        self.rng = rng
        self.injected: dict[str, int] = {}

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        replies = self.inner.complete(requests)
        out = []
        for r, rep in zip(requests, replies, strict=False):
            if self.rng.random() < self.rates.get(r.primitive, 0.0):
                text, kind = self._corrupt(r, rep.text)
                self.injected[f"{r.primitive}:{kind}"] = self.injected.get(f"{r.primitive}:{kind}", 0) + 1
                out.append(SLMReply(text, {**rep.model, "backend": "oracle+noise", "injected": kind}))
            else:
                out.append(rep)
        return out

    def _tools(self, req: SLMRequest) -> list[str]:
        tools = getattr(req.input, "tools", None)
        if tools is None:
            tool = getattr(req.input, "tool", None)
            tools = [tool] if tool is not None else []
        return [t.name for t in tools]

    def _corrupt(self, req: SLMRequest, text: str) -> tuple[str, str]:
        rng = self.rng
        if rng.random() < 0.15:
            return text[: max(0, len(text) // 2)], "truncated_json"
        try:
            ans = json.loads(text)
        except json.JSONDecodeError:
            return "", "empty"
        p = req.primitive
        tools = self._tools(req)
        if p == "decompose":
            tasks = ans.get("tasks", [])
            kind = rng.choice(["drop_task", "wrong_tool", "hallucinated_value", "cycle"])
            if kind == "drop_task" and tasks:
                tasks.pop(rng.randrange(len(tasks)))
            elif kind == "wrong_tool" and tasks:
                t = rng.choice(tasks)
                t["tool_name"] = rng.choice([x for x in tools if x != t.get("tool_name")] or ["unknown_tool"])
            elif kind == "hallucinated_value" and tasks:
                t = rng.choice(tasks)
                if t.get("parameters"):
                    k = rng.choice(sorted(t["parameters"]))
                    t["parameters"][k] = "hallucinated-" + str(rng.randint(100, 999))
                else:
                    kind = "drop_task"
                    tasks.remove(t)
            elif kind == "cycle" and len(tasks) >= 2:
                tasks[0]["depends_on"] = sorted(set(tasks[0].get("depends_on", [])) | {tasks[-1]["id"]})
                tasks[-1]["depends_on"] = sorted(set(tasks[-1].get("depends_on", [])) | {tasks[0]["id"]})
            return json.dumps(ans), kind
        if p == "get_order":
            ids = ans.get("ordered_task_ids", [])
            if len(ids) >= 2 and rng.random() < 0.5:
                i, j = rng.sample(range(len(ids)), 2)
                ids[i], ids[j] = ids[j], ids[i]
                return json.dumps(ans), "swapped"
            ans["ordered_task_ids"] = ids[:-1]
            return json.dumps(ans), "dropped_id"
        if p == "match_func":
            kind = rng.choice(["wrong_tool", "unregistered_tool", "null"])
            cur = ans.get("tool_name")
            ans["tool_name"] = {
                "wrong_tool": rng.choice([x for x in tools if x != cur] or [None]),
                "unregistered_tool": (cur or "tool") + "_v2",
                "null": None,
            }[kind]
            return json.dumps(ans), kind
        if p == "match_fill":
            vals = ans.get("values", {})
            kind = rng.choice(["hallucinated_value", "null", "extra_key"])
            if kind == "extra_key" or not vals:
                vals["unrequested_param"] = "x"
                kind = "extra_key"
            elif kind == "null":
                vals[rng.choice(sorted(vals))] = None
            else:
                vals[rng.choice(sorted(vals))] = "hallucinated-" + str(rng.randint(100, 999))
            return json.dumps(ans), kind
        if p == "check_prerequisites":
            if ans.get("task") is None or rng.random() < 0.4:
                ans["task"] = {"tool_name": rng.choice(tools or ["x"]), "parameters": {}}
                return json.dumps(ans), "wrong_tool"
            ans["task"] = None
            return json.dumps(ans), "null"
        return "{}", "empty"
