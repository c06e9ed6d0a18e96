"""Fuzzing harness for the kernel: random registries, random multi-turn inputs, adversarial SLM outputs.

Shared by the fuzz tests (``tests/test_kernel_fuzz.py``) and the benchmark
scripts. Each case builds a throw-away domain whose tools log their calls,
then runs a few turns against a backend that answers every SLM request with
a seeded mix of plausible and adversarial outputs: malformed JSON, unknown
tool names, hallucinated parameter values, extra or missing keys, cyclic
dependencies and empty outputs.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from kernel.domains.base import Domain, DomainTool
from kernel.environment import Environment
from kernel.kernel import Kernel, TurnResult
from kernel.registry.model import Prerequisite, Sat, ToolSpec
from kernel.scratchpad import Scratchpad
from primitives import SLMReply, SLMRequest

KEYS = ["k1", "k2", "k3", "auth", "token"]
PARAMS = ["name", "count", "flag", "mode", "target", "amount"]
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "red", "blue", "seven", "42", "north"]
TOOL_NAMES = ["open_thing", "close_thing", "send_item", "read_item", "login_svc", "list_items", "move_item", "set_mode"]


class FuzzState(BaseModel):
    log: list[dict[str, Any]] = Field(default_factory=list)
    counter: int = 0


@dataclass
class FuzzCase:
    registry_specs: list[ToolSpec]
    turns: list[tuple[str, dict[str, Any]]]
    config: dict[str, Any]
    failing: dict[str, str] = field(default_factory=dict)  # tool -> "error" | "bad_result"


def _param_schema(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["string", "integer", "boolean", "enum", "number"])
    if kind == "enum":
        return {"type": "string", "enum": rng.sample(WORDS, 3)}
    return {"type": kind}


def random_case(rng: random.Random) -> FuzzCase:
    n = rng.randint(1, 6)
    names = rng.sample(TOOL_NAMES, n)
    specs = []
    for name in names:
        ps = rng.sample(PARAMS, rng.randint(0, 3))
        props = {p: _param_schema(rng) for p in ps}
        req = [p for p in ps if rng.random() < 0.6]
        prereqs = [
            Prerequisite(key=k, sat=Sat(op=rng.choice(["truthy", "not_null", "eq"]), value=True))
            for k in rng.sample(KEYS, rng.randint(0, 2))
        ]
        writes = {k: rng.choice(["const:true", "result.value", "params." + (ps[0] if ps else "x")]) for k in rng.sample(KEYS, rng.randint(0, 2))}
        specs.append(
            ToolSpec(
                name=name,
                description=f"{name.replace('_', ' ')} tool",
                parameters={"type": "object", "properties": props, "required": req},
                output_schema={"type": "object", "required": ["ok"]} if rng.random() < 0.3 else None,
                side_effect=rng.random() < 0.5,
                prerequisites=prereqs,
                writes=writes,
                alternatives=[a for a in rng.sample(names, min(2, n)) if a != name] if rng.random() < 0.3 else [],
            )
        )
    turns = []
    for _ in range(rng.randint(1, 3)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
        ctx = {rng.choice(PARAMS + KEYS): rng.choice(WORDS + [1, 2, True, None]) for _ in range(rng.randint(0, 3))}
        turns.append((text, ctx))
    config = {k: rng.choice([True, False, None, "x"]) for k in rng.sample(KEYS, rng.randint(0, 3))}
    failing = {s.name: rng.choice(["error", "bad_result"]) for s in specs if rng.random() < 0.2}
    return FuzzCase(specs, turns, config, failing)


def build_domain(case: FuzzCase) -> Domain:
    dom = Domain("fuzz", FuzzState, "fuzzing domain")
    for spec in case.registry_specs:
        mode = case.failing.get(spec.name)

        def fn(state: FuzzState, _name: str = spec.name, _mode: str | None = mode, **kw: Any) -> dict[str, Any]:
            state.counter += 1
            state.log.append({"tool": _name, "args": kw})
            if _mode == "error":
                return {"error": "simulated failure"}
            if _mode == "bad_result":
                return {"unexpected": True}
            return {"ok": True, "value": state.counter}

        dom.tools[spec.name] = DomainTool(spec, fn, [], "fuzz")
    return dom


class AdversarialBackend:
    """Answers each request with a seeded mix of plausible and adversarial outputs."""

    name = "adversarial"

    def __init__(self, seed: int, tools: list[str]):
        self.rng = random.Random(seed)
        self.tools = tools
        self.calls = 0

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        self.calls += len(requests)
        return [SLMReply(self._answer(r), {"backend": "adversarial"}) for r in requests]

    def _tool(self) -> str | None:
        r = self.rng.random()
        if r < 0.15:
            return "no_such_tool"
        if r < 0.25:
            return None
        return self.rng.choice(self.tools) if self.tools else None

    def _value(self) -> Any:
        return self.rng.choice(WORDS + [1, 2.5, True, None, "hallucinated-value", [1, 2], {"x": 1}])

    def _answer(self, req: SLMRequest) -> str:
        r = self.rng.random()
        if r < 0.08:
            return self.rng.choice(["", "{", "not json", "null", "[]", "{}", '{"tasks": "x"}', "```json\n{}\n```"])
        inp = req.input
        p = req.primitive
        extra = {"unexpected_key": 1} if self.rng.random() < 0.1 else {}
        if p == "decompose":
            n = self.rng.randint(0, 5)
            ids = [f"t{i}" for i in range(n)] + (["t0"] if self.rng.random() < 0.05 else [])
            tasks = []
            for tid in ids:
                deps = [d for d in ids if d != tid and self.rng.random() < 0.3]
                if self.rng.random() < 0.05:
                    deps.append("ghost")
                params = {self.rng.choice(PARAMS): self._value() for _ in range(self.rng.randint(0, 3))}
                tasks.append({"id": tid, "text": f"do {tid}", "tool_name": self._tool(), "depends_on": deps, "parameters": params})
            return json.dumps({"tasks": tasks, **extra})
        if p == "get_order":
            ids = [t.id for t in inp.tasks]
            self.rng.shuffle(ids)
            if self.rng.random() < 0.15:
                ids = ids[:-1] + ["zz"]
            if self.rng.random() < 0.1:
                ids = ids + ids[:1]
            return json.dumps({"ordered_task_ids": ids, **extra})
        if p == "check_prerequisites":
            if self.rng.random() < 0.3:
                return json.dumps({"task": None})
            return json.dumps({"task": {"tool_name": self._tool() or "x", "parameters": {self.rng.choice(PARAMS): self._value()}}, **extra})
        if p == "match_func":
            return json.dumps({"tool_name": self._tool(), **extra})
        if p == "match_fill":
            keys = list(inp.missing)
            if self.rng.random() < 0.2 and keys:
                keys = keys[:-1]
            if self.rng.random() < 0.2:
                keys.append("bogus")
            return json.dumps({"values": {k: self._value() for k in keys}, **extra})
        return "{}"


@dataclass
class CaseOutcome:
    turns: list[TurnResult]
    problems: list[str]
    slm_calls: int


def run_case(kernel: Kernel, case: FuzzCase, seed: int, trace: str = "off") -> CaseOutcome:
    """Run one case and return every invariant problem found (empty when all hold)."""
    dom = build_domain(case)
    env = Environment([dom])
    registry = env.registry()
    S = Scratchpad(case.config)
    backend = AdversarialBackend(seed, registry.names)
    problems: list[str] = []
    results = []
    for i, (text, ctx) in enumerate(case.turns):
        keys_before = S.keys()
        log_before = len(env.states["fuzz"].log)
        res, _ = kernel.run_turn(user=text, env=env, scratchpad=S, registry=registry, backend=backend, context=ctx, index=i, trace=trace)
        results.append(res)
        problems += [f"turn {i}: {v}" for v in res.invariant_violations]
        if not keys_before <= S.keys():  # INV-S across the whole turn
            problems.append(f"turn {i}: INV-S scratchpad lost keys {sorted(keys_before - S.keys())}")
        if res.slm_calls > kernel.program.max_slm_calls:  # INV-T: bounded model calls
            problems.append(f"turn {i}: {res.slm_calls} SLM calls exceed the static bound {kernel.program.max_slm_calls}")
        executed = env.states["fuzz"].log[log_before:]
        staged = [c for c in res.calls if c.result is not None]
        for c in staged:
            if c.tool not in registry:
                problems.append(f"turn {i}: unregistered tool {c.tool} executed")
            if kernel.config.cvc:
                missing = [m for m in registry[c.tool].required if m not in c.arguments]
                if missing:  # INV-E: no partial call
                    problems.append(f"turn {i}: {c.tool} executed without {missing}")
        committed = [c for c in res.calls if c.committed]
        if [c.tool for c in committed] != [e["tool"] for e in executed]:  # the world changed exactly by the commits
            problems.append(f"turn {i}: committed {[c.tool for c in committed]} but the world logged {[e['tool'] for e in executed]}")
        if res.halted is None:  # INV-R: every ordered task has an outcome
            lacking = [t for t in dict.fromkeys(res.order) if t not in res.outcomes]
            if lacking:
                problems.append(f"turn {i}: INV-R tasks without outcome {lacking}")
        for tid, b in res.bindings.items():  # INV-L
            for m, rec in b.items():
                if rec.consulted[:1] != ["tau"]:
                    problems.append(f"turn {i}: INV-L {tid}.{m} consulted {rec.consulted}")
    return CaseOutcome(results, problems, backend.calls)
