"""Fuzzing harness for the kernel: random registries, random multi-turn inputs, adversarial SLM outputs.

Shared by the fuzz tests (``tests/test_kernel_fuzz.py``) and the benchmark
scripts. Each case builds a throw-away domain whose tools log their calls (and,
for the harness, the scratchpad as it was at each call), registers only some of
them, then runs a few turns against a backend that answers every SLM request
with a seeded mix of plausible and adversarial outputs: malformed JSON, unknown
and unregistered tool names, hallucinated parameter values, extra or missing
keys, cyclic dependencies and empty outputs. ``run_case`` checks the invariants
on what actually happened (the arguments the tools received, the dependency
outcomes, a replay without a failed task), not on the kernel's description of it.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from forethought.kernel import toolgate
from forethought.kernel.domains.base import Domain, DomainTool
from forethought.kernel.environment import Environment
from forethought.kernel.grounding import Haystack
from forethought.kernel.program import Kernel
from forethought.kernel.records import TurnResult
from forethought.kernel.registry.model import Prerequisite, Sat, ToolSpec
from forethought.kernel.scratchpad import Scratchpad, is_truncated
from forethought.primitives import SLMReply, SLMRequest

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
    # Implemented by the domain but left out of the turn's registry: the adversarial model still names them.
    unregistered: list[str] = field(default_factory=list)


def _param_schema(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["string", "integer", "boolean", "enum", "number"])
    if kind == "enum":
        return {"type": "string", "enum": rng.sample(WORDS, 3)}
    return {"type": kind}


def random_case(rng: random.Random) -> FuzzCase:
    tool_count = rng.randint(1, 6)
    names = rng.sample(TOOL_NAMES, tool_count)
    specs = []
    for name in names:
        ps = rng.sample(PARAMS, rng.randint(0, 3))
        props = {p: _param_schema(rng) for p in ps}
        req = [p for p in ps if rng.random() < 0.6]
        prereqs = [
            Prerequisite(key=k, sat=Sat(op=rng.choice(["truthy", "not_null", "eq"]), value=True))
            for k in rng.sample(KEYS, rng.randint(0, 2))
        ]
        writes = {
            # a tool without parameters gets a result path that never resolves (a write of no parameter is refused)
            k: rng.choice(["const:true", "result.value", "params." + ps[0] if ps else "result.no_such_field"])
            for k in rng.sample(KEYS, rng.randint(0, 2))
        }
        specs.append(
            ToolSpec(
                name=name,
                description=f"{name.replace('_', ' ')} tool",
                parameters={"type": "object", "properties": props, "required": req},
                output_schema={"type": "object", "required": ["ok"]} if rng.random() < 0.3 else None,
                side_effect=rng.random() < 0.5,
                prerequisites=prereqs,
                writes=writes,
                alternatives=[a for a in rng.sample(names, min(2, tool_count)) if a != name]
                if rng.random() < 0.3
                else [],
            )
        )
    turns = []
    for _ in range(rng.randint(1, 3)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
        ctx = {rng.choice(PARAMS + KEYS): rng.choice(WORDS + [1, 2, True, None]) for _ in range(rng.randint(0, 3))}
        turns.append((text, ctx))
    config = {k: rng.choice([True, False, None, "x"]) for k in rng.sample(KEYS, rng.randint(0, 3))}
    failing = {s.name: rng.choice(["error", "bad_result"]) for s in specs if rng.random() < 0.2}
    unregistered = [s.name for s in specs if rng.random() < 0.25]
    return FuzzCase(specs, turns, config, failing, unregistered)


class Probe:
    """Harness-side record of every invocation of a tool implementation, with S as it was at that moment.

    Kept outside the world state (which a rejected call discards) and outside the kernel's own records,
    so the assertions compare what the kernel did with what it reports.
    """

    def __init__(self) -> None:
        self.S: Scratchpad | None = None
        self.invocations: list[dict[str, Any]] = []


def build_domain(case: FuzzCase, probe: Probe | None = None) -> Domain:
    dom = Domain("fuzz", FuzzState, "fuzzing domain")
    for spec in case.registry_specs:
        mode = case.failing.get(spec.name)

        def fn(state: FuzzState, _name: str = spec.name, _mode: str | None = mode, **kw: Any) -> dict[str, Any]:
            if probe is not None:
                probe.invocations.append(
                    {
                        "tool": _name,
                        "args": copy.deepcopy(kw),
                        "S": probe.S.snapshot() if probe.S is not None else {},
                        "sources": {k: probe.S.last_source(k) for k in probe.S} if probe.S is not None else {},
                    }
                )
            state.counter += 1
            state.log.append({"tool": _name, "args": kw})
            if _mode == "error":
                return {"error": "simulated failure"}
            if _mode == "bad_result":
                return {"unexpected": True}
            # result fields named like parameters, so that same-turn binding's shadowing is reached
            # and a list, for decompose's fan-outs (for_each) to run over
            return {
                "ok": True,
                "value": state.counter,
                "name": f"item{state.counter}",
                "target": f"t{state.counter}",
                "items": [f"item{state.counter}", f"t{state.counter}"],
            }

        dom.tools[spec.name] = DomainTool(spec, fn, [], "fuzz")
    return dom


def _grounded_values(*sources: Any) -> list[Any]:
    """Values a primitive could ground in its input: the words of its texts and the leaves of its dicts."""
    out: list[Any] = []
    for src in sources:
        if isinstance(src, str):
            out += src.split()
        elif isinstance(src, dict):
            for value in src.values():
                if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                    out.append(value)
    return out


class AdversarialBackend:
    """Answers each request with a seeded mix of plausible and adversarial outputs.

    Adversarial: malformed JSON, unknown tools and tools left out of the registry, hallucinated values,
    extra or missing keys, unknown or cyclic dependencies, empty outputs. Plausible (about half the
    well-formed replies): registered tools, their own parameters, values grounded in the request, context
    or state, dependencies on earlier tasks (rarely a cycle), so the contracts pass and the execution paths
    are reached too.
    """

    name = "adversarial"

    def __init__(self, seed: int, tools: list[str]):
        self.rng = random.Random(seed)
        self.tools = tools  # every implemented tool, registered or not
        self.calls = 0
        self.decomposed_tools: dict[str, str | None] = {}  # task id -> tool named by the last decomposition

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        self.calls += len(requests)
        return [SLMReply(self._answer(r), {"backend": "adversarial"}) for r in requests]

    def _tool(self) -> str | None:
        draw = self.rng.random()
        if draw < 0.15:
            return "no_such_tool"
        if draw < 0.25:
            return None
        return self.rng.choice(self.tools) if self.tools else None

    def _value(self) -> Any:
        return self.rng.choice(WORDS + [1, 2.5, True, None, "hallucinated-value", [1, 2], {"x": 1}])

    def _answer(self, req: SLMRequest) -> str:
        draw = self.rng.random()
        if draw < 0.08:
            return self.rng.choice(["", "{", "not json", "null", "[]", "{}", '{"tasks": "x"}', "```json\n{}\n```"])
        if draw < 0.54:
            return self._plausible(req)
        inp = req.input
        primitive = req.primitive
        extra = {"unexpected_key": 1} if self.rng.random() < 0.1 else {}
        if primitive == "decompose":
            task_count = self.rng.randint(0, 5)
            ids = [f"t{i}" for i in range(task_count)] + (["t0"] if self.rng.random() < 0.05 else [])
            tasks = []
            for tid in ids:
                deps = [d for d in ids if d != tid and self.rng.random() < 0.3]
                if self.rng.random() < 0.05:
                    deps.append("ghost")
                params = {self.rng.choice(PARAMS): self._value() for _ in range(self.rng.randint(0, 3))}
                tool = self._tool()
                self.decomposed_tools[tid] = tool
                task = {"id": tid, "text": f"do {tid}", "tool_name": tool, "depends_on": deps, "parameters": params}
                if (
                    self.rng.random() < 0.05
                ):  # malformed conditions and fan-outs: unknown keys, tasks, parameters and ops
                    task["when"] = {
                        "key": self.rng.choice(PARAMS),
                        "op": self.rng.choice(["eq", "gt", "bogus"]),
                        "value": self._value(),
                    }
                if self.rng.random() < 0.05:
                    task["for_each"] = {
                        "task": self.rng.choice(ids + ["ghost"]),
                        "field": self.rng.choice(PARAMS),
                        "param": self.rng.choice(PARAMS),
                    }
                tasks.append(task)
            return json.dumps({"tasks": tasks, **extra})
        if primitive == "get_order":
            ids = [t.id for t in inp.tasks]
            self.rng.shuffle(ids)
            if self.rng.random() < 0.15:
                ids = ids[:-1] + ["zz"]
            if self.rng.random() < 0.1:
                ids = ids + ids[:1]
            return json.dumps({"ordered_task_ids": ids, **extra})
        if primitive == "check_prerequisites":
            if self.rng.random() < 0.3:
                return json.dumps({"task": None})
            return json.dumps(
                {
                    "task": {"tool_name": self._tool() or "x", "parameters": {self.rng.choice(PARAMS): self._value()}},
                    **extra,
                }
            )
        if primitive == "match_func":
            return json.dumps({"tool_name": self._tool(), **extra})
        if primitive == "match_fill":
            keys = list(inp.missing)
            if self.rng.random() < 0.2 and keys:
                keys = keys[:-1]
            if self.rng.random() < 0.2:
                keys.append("bogus")
            return json.dumps({"values": {k: self._value() for k in keys}, **extra})
        return "{}"

    def _plausible(self, req: SLMRequest) -> str:
        rng, inp, primitive = self.rng, req.input, req.primitive
        if primitive == "decompose":
            briefs = {t.name: t for t in inp.tools}
            grounded = _grounded_values(inp.user, inp.context, inp.state)
            tasks = []
            for k in range(rng.randint(1, 4)):
                tid = f"t{k}"
                tool = rng.choice(list(briefs)) if briefs and rng.random() < 0.85 else None
                params = {}
                if tool is not None:
                    for param_name in briefs[tool].params:
                        if rng.random() < 0.5:
                            params[param_name] = rng.choice(grounded + [None]) if grounded else None
                deps = [f"t{j}" for j in range(k) if rng.random() < 0.35]
                if k >= 2 and rng.random() < 0.3:  # the same tool again after another task's result (same-turn binding)
                    tool, params, deps = tasks[k - 2]["tool_name"], {}, [f"t{k - 1}"]
                self.decomposed_tools[tid] = tool
                task = {"id": tid, "text": f"do {tid}", "tool_name": tool, "depends_on": deps, "parameters": params}
                if deps and rng.random() < 0.15:  # a conditional task: a predicate on a dependency's result or on S
                    dep_tool = self.decomposed_tools.get(deps[-1]) or "x"
                    key = rng.choice(
                        [f"{dep_tool}.ok", f"{dep_tool}.{rng.choice(PARAMS)}", *list(inp.state)[:3], "nothing_here"]
                    )
                    task["when"] = rng.choice(
                        [
                            {"key": key, "op": "truthy", "value": None},
                            {"key": key, "op": "not_null", "value": None},
                            {"key": key, "op": "eq", "value": rng.choice(grounded or [None])},
                        ]
                    )
                if (
                    deps and tool is not None and briefs[tool].params and rng.random() < 0.3
                ):  # a fan-out over a dependency's result
                    param = rng.choice(list(briefs[tool].params))
                    task["parameters"].pop(param, None)
                    task["for_each"] = {
                        "task": deps[-1],
                        "field": rng.choice(["items"] * 6 + ["value", *PARAMS]),
                        "param": param,
                        "item_field": None,
                        "where": None,
                    }
                tasks.append(task)
            if len(tasks) > 1 and rng.random() < 0.05:  # an otherwise valid decomposition with a cycle
                tasks[0]["depends_on"].append(tasks[-1]["id"])
                tasks[-1]["depends_on"].append(tasks[0]["id"])
            return json.dumps({"tasks": tasks})
        if primitive == "get_order":
            ids = [t.id for t in inp.tasks]
            rng.shuffle(ids)
            return json.dumps({"ordered_task_ids": ids})
        if primitive == "check_prerequisites":
            fits = [t for t in inp.tools if inp.key in t.writes]
            if not fits or rng.random() < 0.2:
                return json.dumps({"task": None})
            tool = rng.choice(fits)
            grounded = _grounded_values(inp.task.text, inp.context, inp.state)
            params = {m: rng.choice(grounded) for m in tool.params if grounded and rng.random() < 0.5}
            return json.dumps({"task": {"tool_name": tool.name, "parameters": params}})
        if primitive == "match_func":
            # Mostly the tool the decomposition named (registered or not), else any implemented tool.
            tool = self.decomposed_tools.get(inp.task.id) if rng.random() < 0.8 else rng.choice(self.tools + [None])
            return json.dumps({"tool_name": tool})
        if primitive == "match_fill":
            grounded = _grounded_values(inp.task.text, inp.context, inp.state)
            return json.dumps({"values": {m: rng.choice(grounded + [None]) if grounded else None for m in inp.missing}})
        return "{}"


def _same(left: Any, right: Any) -> bool:
    """Equal as JSON values (so True != 1 and 1 != 1.0, unlike ==)."""
    return json.dumps(left, sort_keys=True, default=repr) == json.dumps(right, sort_keys=True, default=repr)


def _first_bound(*sources: dict[str, Any], name: str) -> tuple[bool, Any]:
    """The first non-None value of ``name`` in ``sources`` (None counts as unbound)."""
    for src in sources:
        if src.get(name) is not None:
            return True, src[name]
    return False, None


def _request_key(request: SLMRequest) -> tuple[str, str, tuple[str, ...]]:
    return (
        request.primitive,
        json.dumps(request.input.model_dump(mode="json"), sort_keys=True, default=repr),
        tuple(request.feedback),
    )


class RecordingBackend:
    """Passes requests to another backend and keeps every (request, reply) of the current turn."""

    name = "recording"

    def __init__(self, inner: AdversarialBackend):
        self.inner = inner
        self.log: list[tuple[SLMRequest, SLMReply]] = []

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        replies = self.inner.complete(requests)
        self.log.extend(zip(requests, replies, strict=True))
        return replies


class ReplayBackend:
    """Replays a recorded turn with some tasks removed from its decomposition.

    decompose answers the recorded (accepted) decomposition less the removed tasks; get_order answers the
    recorded order restricted to the batch; every other request gets the reply the identical request
    (same primitive, input and feedback) got in the recorded run. A request the recorded run never made
    is logged in ``unmatched`` (the remaining tasks saw something different) and answered with "".
    """

    name = "replay"

    def __init__(self, log: list[tuple[SLMRequest, SLMReply]], tasks: list[dict[str, Any]], order: list[str]):
        self.tasks = tasks
        self.order = list(dict.fromkeys(order))
        self.replies: dict[tuple, deque[str]] = defaultdict(deque)
        for req, rep in log:
            self.replies[_request_key(req)].append(rep.text)
        self.unmatched: list[str] = []

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        out = []
        for request in requests:
            if request.primitive == "decompose":
                text = json.dumps({"tasks": self.tasks})
            elif request.primitive == "get_order":
                ids = {t.id for t in request.input.tasks}
                text = json.dumps({"ordered_task_ids": [t for t in self.order if t in ids]})
            else:
                queued = self.replies.get(_request_key(request))
                if queued:
                    text = queued.popleft()
                else:
                    self.unmatched.append(f"{request.primitive} {_request_key(request)[1][:300]}")
                    text = ""
            out.append(SLMReply(text, {"backend": "replay"}))
        return out


# A failed task with no effect on S or the world: no retrieval (absent prerequisite) and no match_fill ran for it,
# and none of its calls committed. Removing it (and its dependents) must leave every other task exactly as it was.
_NO_EFFECT_FAILURES = ("missing_function", "tool_failed", "blocked")


def _dependents(tasks: dict[str, Any], root: str) -> set[str]:
    out = {root}
    grew = True
    while grew:
        grew = False
        for tid, task in tasks.items():
            if tid not in out and any(d in out for d in task.depends_on):
                out.add(tid)
                grew = True
    return out


@dataclass
class CaseOutcome:
    turns: list[TurnResult]
    problems: list[str]
    slm_calls: int
    stats: Counter = field(default_factory=Counter)


def _fresh_entries(
    res: TurnResult, tasks: dict[str, Any], call: Any, registry: Any
) -> list[tuple[str, dict[str, Any]]]:
    """(tool, entries) of the calls the task's dependencies (transitively) committed before ``call``, newest first."""
    deps: set[str] = set()
    todo = list(tasks[call.task_id].depends_on)
    while todo:
        dep = todo.pop()
        if dep in deps or dep == call.task_id or dep not in tasks:
            continue
        deps.add(dep)
        todo.extend(tasks[dep].depends_on)
    before = res.calls[: next(k for k, c in enumerate(res.calls) if c is call)]
    return [
        (c.tool, toolgate.writes(registry[c.tool], c.arguments, toolgate.as_result_object(c.result)))
        for c in reversed(before)
        if c.committed and c.task_id in deps and c.tool in registry
    ]


def _same_turn_binding(
    param: str,
    task: Any,
    ctx: dict[str, Any],
    user: str,
    fresh: list[tuple[str, dict[str, Any]]],
    scratchpad: dict[str, Any],
    sources: dict[str, Any],
    tool: str,
    S_at_decompose: dict[str, Any],
) -> tuple[bool, Any]:
    """docs/kernel.md "Same-turn binding", restated from the doc: (True, value) where Lookup binds ``param``,
    (False, None) where it leaves it missing."""
    tau = {**ctx, **{k: v for k, v in task.parameters.items() if v is not None}}
    stated = tau.get(param)
    copied = (
        stated is not None
        and param in task.parameters
        and task.parameters[param] is not None
        and fresh
        and not Haystack([user], [ctx]).contains(task.parameters[param])
        and Haystack([], [S_at_decompose]).contains(task.parameters[param])
    )
    if stated is not None and not copied:
        return True, stated
    if fresh:
        for _, entries in fresh:
            if entries.get(param) is not None:
                return True, entries[param]
        if any(entries.get(f"{g}.{param}") is not None for g, entries in fresh):
            return False, None
        if stated is not None:
            return True, stated
    entry = scratchpad.get(
        f"unfinished.{tool}"
    )  # an earlier turn's unfinished task of this tool (docs/kernel.md, "Unfinished tasks")
    if isinstance(entry, dict) and entry.get("outcome") in ("blocked", "missing_param"):
        kept = entry.get("arguments", {}).get(param)
        if kept is not None and not is_truncated(kept):
            return True, kept
    if scratchpad.get(param) is not None and not is_truncated(scratchpad[param]):
        if fresh and sources.get(param) == f"call:{tool}":
            return False, None
        return True, scratchpad[param]
    return False, None


def _check_bindings(
    i: int,
    res: TurnResult,
    ctx: dict[str, Any],
    staged: list[Any],
    probe: Probe,
    registry: Any,
    S_at_decompose: dict[str, Any],
) -> list[str]:
    """INV-L against the values themselves: every argument a call received is tau's value for that name when tau
    binds it (the task's decompose-grounded parameters, then the turn context; None is unbound), else S's value
    at that moment (which includes what match_fill just wrote for a missing parameter)."""
    problems: list[str] = []
    tasks = {t.id: t for t in res.tasks + res.instances}  # a fan-out's instances are tasks of their own
    if len(staged) != len(probe.invocations):
        return [
            f"turn {i}: {len(staged)} calls recorded as run but the tools were invoked {len(probe.invocations)} times"
        ]
    retrievals: dict[str, deque] = {
        tid: deque(r.retrieval for r in recs if r.retrieval is not None and r.retrieval.tool_name in registry)
        for tid, recs in res.prerequisites.items()
    }
    retrieval_calls = [c for c in res.calls if c.purpose == "retrieval"]
    proposed_for: dict[int, Any] = {}
    for call in retrieval_calls:
        proposed = retrievals.get(call.task_id)
        proposed_for[id(call)] = proposed.popleft() if proposed else None
    for call, inv in zip(staged, probe.invocations, strict=True):
        where = f"turn {i}: {call.purpose} call {call.tool} of task {call.task_id}"
        if inv["tool"] != call.tool or not _same(inv["args"], call.arguments):
            problems.append(f"{where}: recorded {call.arguments} but the tool {inv['tool']} received {inv['args']}")
            continue
        task = tasks.get(call.task_id)
        if task is None:
            problems.append(f"{where}: no such task in the decomposition")
            continue
        S_then = inv["S"]
        if call.purpose == "task":
            fresh = _fresh_entries(res, tasks, call, registry)
            for param, value in call.arguments.items():
                found, want = _same_turn_binding(
                    param, task, ctx, res.user, fresh, S_then, inv["sources"], call.tool, S_at_decompose
                )
                if not found:  # missing after Lookup: only match_fill, which writes S before the call, can bind it
                    if inv["sources"].get(param) == "fill" and _same(value, S_then.get(param)):
                        continue
                    problems.append(
                        f"INV-L {where}: argument {param}={value!r} is bound in neither tau, the dependencies' "
                        f"entries nor S, and match_fill did not write it"
                    )
                elif not _same(value, want):
                    problems.append(
                        f"INV-L {where}: argument {param}={value!r} but tau/S give {want!r} "
                        f"(task parameters {task.parameters}, context {ctx}, S {S_then})"
                    )
        else:
            prop = proposed_for.get(id(call))
            if prop is None:
                problems.append(f"{where}: a retrieval call with no recorded retrieval task")
                continue
            spec = registry[call.tool]
            for param, value in call.arguments.items():
                if param in spec.required:  # looked up: the proposed task's values are its tau, before the task's
                    found, want = _first_bound(prop.parameters, task.parameters, ctx, S_then, name=param)
                else:  # optional: only what the proposed task stated
                    found, want = prop.parameters.get(param) is not None, prop.parameters.get(param)
                if not found or not _same(value, want):
                    problems.append(
                        f"INV-L {where}: argument {param}={value!r} but tau/S give {want!r} "
                        f"(proposed {prop.parameters}, task parameters {task.parameters}, context {ctx}, S {S_then})"
                    )
    return problems


def _check_dependencies(i: int, res: TurnResult, cvc: bool) -> list[str]:
    """INV-R refined: a skipped task has a dependency that did not execute; with CVC, a task whose dependency did
    not execute is skipped, and a task executes only after all its dependencies executed before it."""
    problems: list[str] = []
    tasks = {t.id: t for t in res.tasks + res.instances}  # a fan-out's instances are tasks of their own
    status = {tid: o.status for tid, o in res.outcomes.items()}
    position = {tid: n for n, tid in reversed(list(enumerate(res.order)))}  # first position in the order
    position.update(
        {iid: position[o.task_id] for o in res.outcomes.values() for iid in o.instances if o.task_id in position}
    )  # an instance runs at its task's
    for tid, outcome in res.outcomes.items():
        task = tasks.get(tid)
        deps = [d for d in (task.depends_on if task else []) if d in tasks and d != tid]
        failed_deps = [d for d in deps if status.get(d) != "executed"]
        if outcome.status == "skipped" and not failed_deps:
            problems.append(
                f"turn {i}: INV-R task {tid} skipped but its dependencies {deps} all executed ({outcome.reason})"
            )
        if cvc and failed_deps and outcome.status != "skipped":
            problems.append(
                f"turn {i}: INV-R task {tid} is {outcome.status} although its dependencies {failed_deps} did not execute"
            )
        if cvc and outcome.status == "executed":
            late = [d for d in deps if position.get(d, len(res.order)) > position.get(tid, -1)]
            if late:
                problems.append(f"turn {i}: task {tid} executed before its dependencies {late} (order {res.order})")
    return problems


def _counterfactual(
    kernel: Kernel,
    case: FuzzCase,
    i: int,
    text: str,
    ctx: dict[str, Any],
    res: TurnResult,
    log: list[tuple[SLMRequest, SLMReply]],
    S_before: Scratchpad,
    world_before: FuzzState,
    world_after: FuzzState,
    stats: Counter,
    trace: str,
) -> list[str]:
    """INV-R by comparison: rerun the turn without one failed, effect-free task (and its dependents)."""
    if res.halted is not None:
        return []
    tasks = {t.id: t for t in res.tasks + res.instances}  # a fan-out's instances are tasks of their own
    by_task: dict[str, list[SLMRequest]] = defaultdict(list)
    for req, _ in log:
        task = getattr(req.input, "task", None)
        if task is not None and hasattr(task, "id"):
            by_task[task.id].append(req)
    victim = None
    for tid in dict.fromkeys(res.order):
        outcome = res.outcomes.get(tid)
        if outcome is None or outcome.status not in _NO_EFFECT_FAILURES:
            continue
        if any(
            r.primitive == "match_fill" or (r.primitive == "check_prerequisites" and r.input.outcome == "absent")
            for r in by_task[tid]
        ):
            continue
        if any(c.committed for c in res.calls if c.task_id == tid):
            continue
        victim = tid
        break
    if victim is None:
        return []
    removed = _dependents(tasks, victim)
    kept = [t for t in res.tasks if t.id not in removed]
    if not kept:
        return []
    stats["counterfactual_runs"] += 1
    S2 = S_before.copy()  # with each key's latest source: same-turn binding reads it
    env2 = Environment([build_domain(case)])
    env2.states["fuzz"] = world_before.model_copy(deep=True)
    registry2 = env2.registry(exclude=case.unregistered)
    replay = ReplayBackend(log, [t.model_dump(mode="json") for t in kept], res.order)
    res2, _ = kernel.run_turn(
        user=text, env=env2, scratchpad=S2, registry=registry2, backend=replay, turn_context=ctx, index=i, trace=trace
    )
    where = (
        f"turn {i}: INV-R without the failed task {victim} ({res.outcomes[victim].status}; removed {sorted(removed)})"
    )
    problems = []
    if replay.unmatched:
        problems.append(f"{where}: the other tasks made requests the full run did not: {replay.unmatched[:3]}")
    if res2.halted is not None:
        problems.append(f"{where}: the turn halted: {res2.halted}")
    keep_ids = {t.id for t in kept}
    o1 = {k: v.model_dump() for k, v in res.outcomes.items() if k in keep_ids}
    o2 = {k: v.model_dump() for k, v in res2.outcomes.items()}
    if o1 != o2:
        problems.append(f"{where}: outcomes of the other tasks changed: {o1} vs {o2}")
    c1 = [c.model_dump() for c in res.calls if c.task_id in keep_ids]
    c2 = [c.model_dump() for c in res2.calls]
    if c1 != c2:
        problems.append(f"{where}: calls of the other tasks changed: {c1} vs {c2}")
    # A blocked victim leaves its memory (docs/kernel.md, "Unfinished tasks"), written when the turn ends, so that no
    # other task of the turn saw it: S must be the same apart from the victim's entry unfinished.<tool>.
    memory = {f"unfinished.{res.outcomes[victim].tool}"} if res.outcomes[victim].status == "blocked" else set()
    if memory and not memory <= set(res.scratchpad):
        problems.append(f"{where}: the blocked task left no {sorted(memory)[0]} entry")
    s1 = {k: v for k, v in res.scratchpad.items() if k not in memory}
    s2 = {k: v for k, v in res2.scratchpad.items() if k not in memory}
    if not _same(s1, s2):
        problems.append(f"{where}: final scratchpad changed: {res.scratchpad} vs {res2.scratchpad}")
    if not _same(env2.states["fuzz"].model_dump(), world_after.model_dump()):
        problems.append(
            f"{where}: final world changed: {world_after.model_dump()} vs {env2.states['fuzz'].model_dump()}"
        )
    return problems


def run_case(
    kernel: Kernel, case: FuzzCase, seed: int, trace: str = "off", counterfactual: bool = False
) -> CaseOutcome:
    """Run one case and return every invariant problem found (empty when all hold).

    With ``counterfactual``, every (CVC) turn that has a failed task without effects is rerun without
    that task, and the other tasks must come out exactly the same (INV-R).
    """
    probe = Probe()
    dom = build_domain(case, probe)
    env = Environment([dom])
    registry = env.registry(exclude=case.unregistered)
    scratchpad = Scratchpad(case.config)
    probe.S = scratchpad
    adversary = AdversarialBackend(seed, [s.name for s in case.registry_specs])
    backend = RecordingBackend(adversary)
    problems: list[str] = []
    stats: Counter = Counter()
    results = []
    for i, (text, ctx) in enumerate(case.turns):
        keys_before = scratchpad.keys()
        S_before = scratchpad.copy()
        world_before = env.states["fuzz"].model_copy(deep=True)
        log_before = len(env.states["fuzz"].log)
        probe.invocations = []
        backend.log = []
        res, _ = kernel.run_turn(
            user=text,
            env=env,
            scratchpad=scratchpad,
            registry=registry,
            backend=backend,
            turn_context=ctx,
            index=i,
            trace=trace,
        )
        results.append(res)
        problems += [f"turn {i}: {v}" for v in res.invariant_violations]
        if not keys_before <= scratchpad.keys():  # INV-S across the whole turn
            problems.append(f"turn {i}: INV-S scratchpad lost keys {sorted(keys_before - scratchpad.keys())}")
        if res.slm_calls > kernel.program.max_slm_calls:  # INV-T: bounded model calls
            problems.append(
                f"turn {i}: {res.slm_calls} SLM calls exceed the static bound {kernel.program.max_slm_calls}"
            )
        executed = env.states["fuzz"].log[log_before:]
        staged = [c for c in res.calls if c.result is not None]
        for call in res.calls:  # never an unregistered tool: not even attempted
            if call.tool not in registry:
                problems.append(
                    f"turn {i}: call to unregistered tool {call.tool} ({'ran' if call.result is not None else 'rejected'})"
                )
        for inv in probe.invocations:  # ... and no implementation outside the registry ever ran
            if inv["tool"] not in registry:
                problems.append(f"turn {i}: the implementation of unregistered tool {inv['tool']} was invoked")
        for call in staged:
            if kernel.config.cvc and call.tool in registry:
                missing = [m for m in registry[call.tool].required if m not in call.arguments]
                if missing:  # INV-E: no partial call
                    problems.append(f"turn {i}: {call.tool} executed without {missing}")
        committed = [c for c in res.calls if c.committed]
        if [c.tool for c in committed] != [e["tool"] for e in executed]:  # the world changed exactly by the commits
            problems.append(
                f"turn {i}: committed {[c.tool for c in committed]} but the world logged {[e['tool'] for e in executed]}"
            )
        if res.halted is None:  # INV-R: every ordered task has an outcome
            lacking = [t for t in dict.fromkeys(res.order) if t not in res.outcomes]
            if lacking:
                problems.append(f"turn {i}: INV-R tasks without outcome {lacking}")
        problems += _check_bindings(
            i, res, ctx, staged, probe, registry, S_before.snapshot()
        )  # INV-L (the turns carry no config)
        problems += _check_dependencies(i, res, kernel.config.cvc)  # INV-R
        if counterfactual and kernel.config.cvc:
            problems += _counterfactual(
                kernel, case, i, text, ctx, res, backend.log, S_before, world_before, env.states["fuzz"], stats, trace
            )
        stats["unregistered_named"] += sum(
            1
            for o in res.outcomes.values()
            if o.status == "missing_function" and any(repr(u) in o.reason for u in case.unregistered)
        )
        stats["calls_checked"] += len(staged)
        for binds in res.bindings.values():  # same-turn binding was reached (docs/kernel.md)
            stats["bound_from_dependencies"] += sum(
                1 for b in binds.values() if b.source == "scratchpad" and "dependencies" in b.consulted
            )
            stats["shadowed_by_a_result_field"] += sum(
                1 for b in binds.values() if b.shadowed_by and "." in b.shadowed_by
            )
            stats["shadowed_as_same_tool_argument"] += sum(
                1 for b in binds.values() if b.shadowed_by and "." not in b.shadowed_by
            )
            stats["bound_from_unfinished"] += sum(
                1 for b in binds.values() if b.entry is not None and b.entry.startswith("unfinished.")
            )
        stats["unregistered_proposed"] += sum(
            1 for _, rep in backend.log if any(f'"{u}"' in rep.text for u in case.unregistered)
        )
    return CaseOutcome(results, problems, adversary.calls, stats)
