"""``forethought verify``: replay worked solutions through the kernel with the oracle backend.

Every annotated decision is compared with what the kernel actually did, turn
by turn: decomposition (through its contract), order, prerequisite outcomes,
function matches, each parameter's value and source, task outcomes, the
committed call sequence, state assertions, and the end state against a
replay of the reference calls on a fresh world. The first divergence of each
failing solution is reported with its file, turn and step.
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forethought.errors import UserError
from forethought.kernel import condition_steps, plan_steps, toolgate
from forethought.kernel.environment import Environment
from forethought.kernel.grounding import Haystack, canonical
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig, TurnResult
from forethought.kernel.registry.model import fact_of
from forethought.kernel.runner import build_environment, build_registry, oracle_factory, run_solution
from forethought.kernel.scenario import PATTERN_TAGS, Solution, TaskAnn, Turn, instance_id
from forethought.kernel.scratchpad import bindable
from forethought.kernel.solution_file import load_solution, solution_files
from forethought.kernel.solution_format import key_problems
from forethought.kernel.specs import permutation_problem

DEFAULT_SOLUTIONS = Path(__file__).resolve().parent / "solutions"
_MISSING = object()


class Divergence(Exception):
    def __init__(self, turn: int | None, step: str, message: str):
        self.turn, self.step, self.message = turn, step, message
        super().__init__(self.describe())

    def describe(self) -> str:
        where = f"turn {self.turn}, " if self.turn is not None else ""
        return f"{where}{self.step}: {self.message}"


@dataclass
class VerifyResult:
    path: str
    solution: Solution | None
    ok: bool
    error: str = ""
    turns: list[TurnResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # verified, but generate would drop or mislabel its copies


def snapshot_get(snap: Any, path: str) -> Any:
    cur = snap
    for part in [p for p in path.split("/") if p]:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _eq(left: Any, right: Any) -> bool:
    if left == right and type(left) is type(right):  # fast path (1 == 1.0 is fine too; canonical() decides the rest)
        return True
    return canonical(left) == canonical(right)


def static_checks(sol: Solution, *, tags: bool = True) -> None:
    unknown = [t for t in sol.tags if t not in PATTERN_TAGS]
    if unknown:
        raise Divergence(None, "tags", f"unknown pattern tags {unknown}; known: {', '.join(PATTERN_TAGS)}")
    for i, turn in enumerate(sol.turns):
        if not turn.annotated or turn.order is None or turn.calls is None:
            raise Divergence(i, "annotations", "a worked solution needs tasks, order and calls on every turn")
        # Unique ids and known dependencies are checked when the Turn is loaded (kernel/scenario.py); the
        # order of a turn that runs is held to get_order's permutation check (one implementation, kernel/specs/).
        problem = permutation_problem([t.id for t in turn.tasks or []], turn.order) if turn.halt is None else None
        if problem:
            raise Divergence(i, "get_order", f"order {problem}")
    if tags:
        _check_tags(sol)


def _check_tags(sol: Solution) -> None:
    """A tag must be backed by the annotations, so the coverage table is honest.

    ``request_over_scratchpad`` and ``no_side_effect`` need the replay (what S held, what was
    called); they are checked in :func:`_check_replay_tags`.
    """
    turns = sol.turns
    tasks = [t for turn in turns for t in turn.tasks or []]
    prereqs = [p for t in tasks for p in t.prerequisites]
    evidence = {
        "cross_turn_state": len(turns) > 1
        and any(
            b.source in ("scratchpad", "fill")
            for turn in turns[1:]
            for t in turn.tasks or []
            for b in t.bindings.values()
        ),
        "dependency_chain": any(t.depends_on for t in tasks),
        "prereq_absent_retrieve": any(p.outcome == "absent" and p.retrieval is not None for p in prereqs),
        # blocked by a not_met check (at first or on recheck); its remediation (or null: none possible) is annotated
        "prereq_not_met_blocked": any(
            t.outcome == "blocked" and any("not_met" in (p.outcome, p.recheck) for p in t.prerequisites) for t in tasks
        ),
        "setup_call": any(p.retrieval is not None for p in prereqs) or any(t.setup for t in tasks),
        "no_matching_function": any(t.outcome == "missing_function" for t in tasks),
        "missing_parameter": any(t.outcome == "missing_param" for t in tasks),
        "no_side_effect": any(turn.must_not_call for turn in turns),
        "parallel_tasks": any(_has_parallel(turn) for turn in turns),
        "cyclic_dependency": any(turn.halt == "cycle" for turn in turns),
        # the replay's evidence for these two is checked in _check_conditions (it needs the calls)
        "conditional_task": any(t.when is not None for t in tasks),
        "fan_out": any(t.for_each is not None for t in tasks),
    }
    for tag in sol.tags:
        if not evidence.get(tag, True):
            hint = (
                " (name the side-effecting tool the request must not trigger in a turn's must_not_call)"
                if tag == "no_side_effect"
                else ""
            )
            raise Divergence(None, "tags", f"tag {tag!r} is not backed by any annotated decision{hint}")


def _scratchpad_at_lookup(
    start: dict[str, Any], res: TurnResult, tid: str, reg: Any, own_retrievals: bool = True
) -> dict[str, Any]:
    """S when the kernel looked up ``tid``'s parameters: S at the turn's start plus the writes of the calls
    committed before (earlier tasks, and ``tid``'s own prerequisite retrievals; without them, S when the task began)."""
    pos = {t: k for k, t in enumerate(res.order)}
    position = pos.get(tid, len(pos))
    scratchpad = dict(start)
    for call in res.calls:
        before = pos.get(call.task_id.split("[")[0], len(pos)) < position or (
            own_retrievals and call.task_id == tid and call.purpose == "retrieval"
        )
        if call.committed and before and call.tool in reg:
            scratchpad.update(
                toolgate.writes(reg[call.tool], call.arguments, call.result if isinstance(call.result, dict) else {})
            )
    return scratchpad


def _fmt_call(tool: str, args: dict[str, Any]) -> str:
    return f"{tool}({', '.join(f'{a}={v!r}' for a, v in args.items())})"


def describe_scratchpad_entry(
    sol: Solution, earlier: list[TurnResult], res: TurnResult, tid: str, key: str, reg: Any
) -> str:
    """What S[key] held when task ``tid`` was checked, and which write put it there: the last committed call
    whose arguments or declared writes name the key (this turn's calls before the task, its own retrievals, then
    earlier turns), else the configuration, else a fill or a prerequisite recheck (which write no call)."""
    i = len(earlier)
    start = {**(earlier[-1].scratchpad if earlier else dict(sol.config)), **sol.turns[i].config}
    now = _scratchpad_at_lookup(start, res, tid, reg)
    if key not in now:
        return f"S has no {key!r}"
    pos = {t: k for k, t in enumerate(res.order)}
    position = pos.get(tid, len(pos))

    def writer(calls: list[Any], turn: int, before: Any) -> str | None:
        for call in reversed(calls):
            if (
                call.committed
                and before(call)
                and call.tool in reg
                and key
                in toolgate.writes(reg[call.tool], call.arguments, call.result if isinstance(call.result, dict) else {})
            ):
                return f"turn {turn} call {_fmt_call(call.tool, call.arguments)}"
        return None

    # newest first: this turn's calls before the task, this turn's config (written at its start), then earlier turns
    who = writer(
        res.calls,
        i,
        lambda c: pos.get(c.task_id, len(pos)) < position or (c.task_id == tid and c.purpose == "retrieval"),
    )
    if who is None and key in sol.turns[i].config:
        who = f"turn {i} config"
    for j in range(i - 1, -1, -1):
        if who is not None:
            break
        who = writer(earlier[j].calls, j, lambda c: True)
        if who is None and key in sol.turns[j].config:
            who = f"turn {j} config"
    if who is None:
        who = "the solution's config" if key in sol.config else "no committed call (a fill or a prerequisite recheck)"
    return f"S[{key!r}] = {now[key]!r}, written by {who}"


def request_over_scratchpad_conflicts(
    sol: Solution, results: list[TurnResult], reg: Any
) -> list[tuple[int, str, str, Any, Any]]:
    """Every (turn, task, parameter, tau value, S value) where a parameter was bound from tau although S
    already held the same key with a different value (tau wins)."""
    out = []
    scratchpad: dict[str, Any] = dict(sol.config)
    for i, (turn, res) in enumerate(zip(sol.turns, results, strict=False)):
        start = {**scratchpad, **turn.config}
        for tid, binds in res.bindings.items():
            taus = {m: b for m, b in binds.items() if b.source == "request"}
            if not taus:
                continue
            at = _scratchpad_at_lookup(start, res, tid, reg)
            for param, binding in taus.items():
                if at.get(param) is not None and not _eq(at[param], binding.value):
                    out.append((i, tid, param, binding.value, at[param]))
        scratchpad = res.scratchpad
    return out


def per_entity_contrasts(sol: Solution, results: list[TurnResult], reg: Any) -> list[tuple[int, str, str, str, str]]:
    """Every (turn, task, key checked, other entity's key, its outcome) where a per-entity prerequisite was checked
    on one entity's entry (``line_status[L-4096]``) while S, when the task began, held another entity's entry of the
    same fact that the same predicate judges differently (``line_status[L-9009]`` = suspended: not met, against
    an absent or met entry). That is what the entity changes: the plain key would have given the other answer."""
    out = []
    scratchpad: dict[str, Any] = dict(sol.config)
    for i, (turn, res) in enumerate(zip(sol.turns, results, strict=False)):
        start = {**scratchpad, **turn.config}
        tools = {t.id: t.tool for t in turn.tasks or []}
        for tid, recs in res.prerequisites.items():
            spec = reg[tools[tid]] if tools.get(tid) in reg else None
            if spec is None or not recs:
                continue
            at = _scratchpad_at_lookup(start, res, tid, reg, own_retrievals=False)
            for prerequisite, record in zip(spec.prerequisites, recs, strict=False):
                if prerequisite.entity is None or record.key == toolgate.prerequisite_key(prerequisite, None):
                    continue
                for key, value in at.items():
                    if (
                        key == record.key
                        or fact_of(key) != prerequisite.key
                        or key == fact_of(key)
                        or key == toolgate.prerequisite_key(prerequisite, None)
                    ):
                        continue
                    other = "met" if toolgate.sat(prerequisite.sat, value) else "not_met"
                    if other != record.outcome:
                        out.append((i, tid, record.key, key, other))
        scratchpad = res.scratchpad
    return out


def _check_must_not_call(sol: Solution, results: list[TurnResult], reg: Any = None) -> None:
    """Each tool a turn names in must_not_call is not called in it; with the registry, it is also registered and side-effecting."""
    for i, (turn, res) in enumerate(zip(sol.turns, results, strict=False)):
        for name in turn.must_not_call:
            if reg is not None and name not in reg:
                raise Divergence(i, "must_not_call", f"{name!r} is not in the registry")
            if reg is not None and not reg[name].side_effect:
                raise Divergence(
                    i, "must_not_call", f"{name!r} has no side effects (only side-effecting tools can be named)"
                )
            called = [c for c in res.calls if c.tool == name]
            if called:
                raise Divergence(
                    i,
                    "must_not_call",
                    f"{name} was called (task {called[0].task_id}) although the turn says it must not be",
                )


def resumed_arguments(sol: Solution, results: list[TurnResult]) -> list[tuple[int, str, str, str]]:
    """(turn, task, parameter, entry) for every argument of a committed task call that the kernel bound from an
    ``unfinished.<tool>`` entry (docs/kernel.md, "Unfinished tasks") that an earlier turn's annotated task of that
    tool, ending blocked or missing_param, left."""
    out = []
    for i, res in enumerate(results):
        left = {
            f"unfinished.{t.match}"
            for turn in sol.turns[:i]
            for t in turn.tasks or []
            if t.outcome in ("blocked", "missing_param") and t.match is not None
        }
        for call in res.committed_calls:
            if call.purpose != "task":
                continue
            for param, binding in res.bindings.get(call.task_id, {}).items():
                if (
                    binding.entry is not None
                    and binding.entry in left
                    and param in call.arguments
                    and _eq(call.arguments[param], binding.value)
                ):
                    out.append((i, call.task_id, param, binding.entry))
    return out


def _check_conditions(sol: Solution, results: list[TurnResult], reg: Any) -> None:
    """Every conditional task: the replay re-evaluates its predicate on S as it was when the task ran (the turn's
    start plus the writes of the calls committed before) and the kernel agrees; its call is committed iff the
    predicate holds. Every fan-out task: one committed call per executed instance. Then the tags' evidence:
    conditional_task needs such a predicate evaluated, fan_out a fan-out task with at least two instances run."""
    evaluated = fanned = False
    scratchpad: dict[str, Any] = dict(sol.config)
    for i, (turn, res) in enumerate(zip(sol.turns, results, strict=False)):
        start = {**scratchpad, **turn.config}
        scratchpad = res.scratchpad
        if turn.halt is not None:
            continue
        for task in turn.tasks or []:
            out = res.outcomes.get(task.id)
            if out is None:
                continue
            mine = [c for c in res.committed_calls if c.task_id.split("[")[0] == task.id and c.purpose == "task"]
            if task.when is not None and out.status != "skipped":
                at = _scratchpad_at_lookup(start, res, task.id, reg)
                want = task.when.key in at and condition_steps.holds(task.when.op, task.when.value, at[task.when.key])
                if out.condition is not want:
                    raise Divergence(
                        i,
                        f"task {task.id}/when",
                        f"the replay evaluates {task.when.key} {task.when.op} {task.when.value!r} on "
                        f"S[{task.when.key!r}] = {at.get(task.when.key, 'absent')!r} as {want}, the kernel as {out.condition}",
                    )
                if not want and mine:
                    raise Divergence(
                        i, f"task {task.id}/when", f"the predicate is false, yet {mine[0].tool} was called"
                    )
                evaluated |= want == bool(mine)
            if task.for_each is not None:
                for iid in out.instances:
                    calls = [c for c in mine if c.task_id == iid]
                    done = res.outcomes.get(iid)
                    if done is not None and done.status == "executed" and len(calls) != 1:
                        raise Divergence(
                            i,
                            f"task {iid}",
                            f"an executed instance must commit exactly one call, committed {len(calls)}",
                        )
                fanned |= len(out.instances) >= 2 and len(mine) >= 2
    if "conditional_task" in sol.tags and not evaluated:
        raise Divergence(
            None,
            "tags",
            "tag 'conditional_task' needs a task with a when predicate that the replay evaluated "
            "(the task's call committed iff it holds)",
        )
    if "fan_out" in sol.tags and not fanned:
        raise Divergence(
            None,
            "tags",
            "tag 'fan_out' needs a for_each task that ran at least two instances, each committing its call",
        )


def composed_arguments(sol: Solution, results: list[TurnResult], reg: Any) -> list[tuple[int, str, str, str]]:
    """(turn, task, parameter, value) for every string argument of a committed task call that is grounded only as a
    composition of parts (docs/kernel.md, "Grounding") in the request, the turn context and S as the task's Lookup
    saw it: the value as a whole occurs in none of them."""
    out = []
    scratchpad: dict[str, Any] = dict(sol.config)
    for i, (turn, res) in enumerate(zip(sol.turns, results, strict=False)):
        start = {**scratchpad, **turn.config}
        for call in res.committed_calls:
            if call.purpose != "task":
                continue
            spec = reg.get(call.tool) if reg is not None else None
            # a value of the parameter's enum is grounded by the schema, not composed
            strings = {
                m: v
                for m, v in call.arguments.items()
                if isinstance(v, str) and not (spec is not None and v in (spec.param_schema(m).get("enum") or []))
            }
            if not strings:
                continue
            hay = Haystack(
                texts=[turn.user], values=[turn.context, bindable(_scratchpad_at_lookup(start, res, call.task_id, reg))]
            )
            out += [(i, call.task_id, m, v) for m, v in strings.items() if hay.composed_only(v)]
        scratchpad = res.scratchpad
    return out


def _check_replay_tags(sol: Solution, results: list[TurnResult], reg: Any) -> None:
    _check_conditions(sol, results, reg)
    if "composed_value" in sol.tags and not composed_arguments(sol, results, reg):
        raise Divergence(
            None,
            "tags",
            "tag 'composed_value' needs a committed call with a string argument grounded only by its parts (the whole "
            "value occurs in neither the request, the context nor S)",
        )
    if "resume_unfinished_task" in sol.tags and not resumed_arguments(sol, results):
        raise Divergence(
            None,
            "tags",
            "tag 'resume_unfinished_task' needs a committed call with an argument bound from the unfinished entry "
            "(unfinished.<tool>) that an earlier turn's blocked or missing_param task of that tool left",
        )
    if "request_over_scratchpad" in sol.tags and not request_over_scratchpad_conflicts(sol, results, reg):
        raise Divergence(
            None,
            "tags",
            "tag 'request_over_scratchpad' needs a parameter bound from the request while the scratchpad already holds that key with a different value (the request wins)",
        )
    if "per_entity_prerequisite" in sol.tags and not per_entity_contrasts(sol, results, reg):
        raise Divergence(
            None,
            "tags",
            "tag 'per_entity_prerequisite' needs a prerequisite checked on one entity's key (e.g. line_status[L-1]) while S "
            "holds another entity's entry of the same fact that its predicate judges differently",
        )
    if "no_side_effect" in sol.tags:
        ok = [
            i
            for i, (turn, res) in enumerate(zip(sol.turns, results, strict=False))
            if turn.must_not_call
            and res.committed_calls
            and not any(reg[c.tool].side_effect for c in res.committed_calls if c.tool in reg)
        ]
        if not ok:
            raise Divergence(
                None,
                "tags",
                "tag 'no_side_effect' needs a turn whose committed calls are all read-only and that names, in must_not_call, "
                "a side-effecting registry tool it does not call",
            )


def dependency_layers(turn: Turn) -> list[list[str]]:
    """The turn's tasks in layers as ``build_dep_graph`` (kernel/plan_steps.py) forms them: a task comes in the first
    layer after all its dependencies. get_order orders every layer of two or more tasks; a cycle leaves the rest out."""
    ts = turn.tasks or []
    ids = [t.id for t in ts]
    depends = {t.id: [d for d in t.depends_on if d in ids and d != t.id] for t in ts}
    return plan_steps.dependency_layers(ids, depends)[0]


def _has_parallel(turn: Turn) -> bool:
    """Two or more mutually independent tasks ordered by get_order: a layer of at least two tasks, at any depth
    (two tasks that both follow the same mkdir count, as the README defines the tag)."""
    return turn.halt is None and any(len(layer) >= 2 for layer in dependency_layers(turn))


def reference_states(sol: Solution) -> list[dict[str, Any]]:
    """World snapshots after each turn when only the reference calls are executed."""
    env = build_environment(sol)
    out = []
    for i, turn in enumerate(sol.turns):
        for j, call in enumerate(turn.reference_calls()):
            if env.tool(call.tool) is None:
                raise Divergence(
                    i, f"reference call {j + 1}", f"tool {call.tool!r} has no implementation in {sol.domains}"
                )
            # In place, no staged copy: a failing reference call stops verification anyway.
            result = env.apply(call.tool, call.args)
            if isinstance(result, dict) and "error" in result:
                raise Divergence(
                    i, f"reference call {j + 1}", f"{call.tool} fails on the reference state: {result['error']}"
                )
        out.append(env.snapshot())
    return out


def compare_turn(
    i: int,
    turn: Turn,
    res: TurnResult,
    trace: Any,
    env: Environment,
    ref_state: dict[str, Any],
    scratchpad_at: Callable[[str, str], str] | None = None,
) -> None:
    """``scratchpad_at(task_id, key)`` describes S[key] when the task's prerequisites were checked and the write
    that put it there (for the divergence message of a prerequisite)."""
    # Contract violations of annotated decisions (the oracle answered them).
    for rec in trace:
        if rec.kind == "slm" and not rec.contract.get("ok"):
            violation = rec.contract["violations"][0]
            raise Divergence(
                i,
                rec.path,
                f"the annotated {rec.primitive} decision violates its contract: [{violation['constraint']}] {violation['message']}",
            )
    if turn.halt == "cycle":
        if not res.halted or "cycle" not in (res.halted.get("reason") or ""):
            raise Divergence(
                i, "get_order", f"expected the turn to halt on a dependency cycle, got {res.halted or 'no halt'}"
            )
        if res.calls:
            raise Divergence(
                i, "execute", f"a halted turn must execute nothing, executed {[c.tool for c in res.calls]}"
            )
    elif res.halted:
        raise Divergence(i, res.halted.get("step", "kernel"), f"the turn halted: {res.halted.get('reason')}")
    else:
        _compare_decisions(i, turn, res, scratchpad_at)
    # Calls actually committed, in order.
    want = [(c.tool, c.args) for c in turn.reference_calls()]
    got = [(c.tool, c.arguments) for c in res.committed_calls]
    for key in range(max(len(want), len(got))):
        want_call = want[key] if key < len(want) else None
        got_call = got[key] if key < len(got) else None
        if want_call is None or got_call is None or want_call[0] != got_call[0] or not _eq(want_call[1], got_call[1]):
            fmt = lambda c: "nothing" if c is None else f"{c[0]}({', '.join(f'{a}={v!r}' for a, v in c[1].items())})"  # noqa: E731
            raise Divergence(i, f"call {key + 1}", f"expected {fmt(want_call)}, got {fmt(got_call)}")
    snap = env.snapshot()
    for assertion in turn.state:
        violation = snapshot_get(snap, assertion.path)
        if assertion.absent:
            if violation is not _MISSING:
                raise Divergence(i, "state", f"{assertion.path} should not exist, found {violation!r}")
        elif violation is _MISSING or not _eq(violation, assertion.equals):
            raise Divergence(
                i,
                "state",
                f"{assertion.path}: expected {assertion.equals!r}, got {'nothing' if violation is _MISSING else repr(violation)}",
            )
    for key, violation in turn.scratchpad.items():
        if key not in res.scratchpad or not _eq(res.scratchpad[key], violation):
            raise Divergence(
                i, "scratchpad", f"S[{key!r}]: expected {violation!r}, got {res.scratchpad.get(key, 'absent')!r}"
            )
    if not _eq(snap, ref_state):
        diff = first_difference(ref_state, snap)
        raise Divergence(i, "end state", f"world differs from the reference calls' end state at {diff}")


def _compare_decisions(
    i: int, turn: Turn, res: TurnResult, scratchpad_at: Callable[[str, str], str] | None = None
) -> None:
    if res.order != turn.order:
        raise Divergence(i, "get_order", f"expected order {turn.order}, got {res.order}")
    for task in decision_tasks(turn):
        where = f"task {task.id}"
        got_match = res.matches.get(task.id)
        if got_match != task.match:
            raise Divergence(i, f"{where}/match_func", f"expected {task.match!r}, got {got_match!r}")
        if task.for_each is not None:  # its instances follow as tasks of their own
            _compare_fan_out(i, task, res)
            continue
        recs = res.prerequisites.get(task.id, [])
        if len(recs) != len(task.prerequisites):
            raise Divergence(
                i,
                f"{where}/check_prerequisites",
                f"expected checks {[(p.key, p.outcome) for p in task.prerequisites]}, got {[(r.key, r.outcome) for r in recs]}",
            )
        for prerequisite, record in zip(task.prerequisites, recs, strict=False):
            # Every field that differs, named: a key alone differing once read "expected met, got met".
            fields = (
                ("key", repr(prerequisite.key), repr(record.key)),
                ("outcome", prerequisite.outcome, record.outcome),
                ("recheck", prerequisite.recheck or "none", record.recheck or "none"),
            )
            differ = [f"{name}: expected {want}, got {got}" for name, want, got in fields if want != got]
            if differ:
                held = f" ({scratchpad_at(task.id, record.key)})" if scratchpad_at is not None else ""
                raise Divergence(i, f"{where}/check_prerequisites/{prerequisite.key}", "; ".join(differ) + held)
        out = res.outcomes.get(task.id)
        if out is None or out.status != task.outcome:
            why = f" ({out.reason})" if out and out.reason else ""
            raise Divergence(
                i, f"{where}/outcome", f"expected {task.outcome}, got {out.status if out else 'no outcome'}{why}"
            )
        got_b = res.bindings.get(task.id, {})
        if set(got_b) != set(task.bindings):
            raise Divergence(
                i, f"{where}/parameters", f"annotated parameters {sorted(task.bindings)}, kernel bound {sorted(got_b)}"
            )
        for param, binding in task.bindings.items():
            bound = got_b[param]
            if bound.source != binding.source:
                raise Divergence(
                    i,
                    f"{where}/parameter {param}",
                    f"expected source {binding.source}, got {bound.source} (value {bound.value!r})",
                )
            if binding.source != "missing" and not _eq(bound.value, binding.value):
                raise Divergence(
                    i,
                    f"{where}/parameter {param}",
                    f"expected value {binding.value!r}, got {bound.value!r} (from {bound.source})",
                )


def decision_tasks(turn: Turn) -> list[TaskAnn]:
    """The turn's annotated tasks, each fan-out task followed by its instances (ids '<id>[k]') as tasks of their own."""
    return [x for t in turn.tasks or [] for x in [t, *t.instance_tasks()]]


def fan_out_elements(task: TaskAnn, res: TurnResult) -> list[Any] | None:
    """What a fan-out task runs over, recomputed from the replay: the list field of its source task's committed call
    result, filtered by ``where`` and picked by ``item_field`` (None when that call committed no such list)."""
    fan_out = task.for_each
    assert fan_out is not None
    calls = [c for c in res.committed_calls if c.task_id == fan_out.task and c.purpose == "task"]
    result = calls[-1].result if calls else None
    if not isinstance(result, dict) or not isinstance(result.get(fan_out.field), list):
        return None
    out = []
    for element in result[fan_out.field]:
        if fan_out.where is not None:
            actual = (
                (element.get(fan_out.where.field, _MISSING) if isinstance(element, dict) else _MISSING)
                if fan_out.where.field is not None
                else element
            )
            if actual is _MISSING or not condition_steps.holds(fan_out.where.op, fan_out.where.value, actual):
                continue
        out.append(
            element
            if fan_out.item_field is None
            else (element.get(fan_out.item_field) if isinstance(element, dict) else None)
        )
    return out


def _compare_fan_out(i: int, task: TaskAnn, res: TurnResult) -> None:
    """A fan-out task: its summary outcome, one instance per (filtered) element up to the bound, the rest reported."""
    where = f"task {task.id}"
    out = res.outcomes.get(task.id)
    if out is None or out.status != task.outcome:
        why = f" ({out.reason})" if out and out.reason else ""
        raise Divergence(
            i, f"{where}/outcome", f"expected {task.outcome}, got {out.status if out else 'no outcome'}{why}"
        )
    want_ids = [instance_id(task.id, k) for k in range(len(task.instances or []))]
    if out.instances != want_ids:
        raise Divergence(i, f"{where}/for_each", f"expected instances {want_ids}, the kernel ran {out.instances}")
    if out.status in ("skipped",) or out.elements is None:
        return
    elements = fan_out_elements(task, res)
    values = [x.value for x in task.instances or []]
    if elements is None or not _eq(elements, values + list(task.beyond_bound)):
        raise Divergence(
            i,
            f"{where}/for_each",
            f"annotated elements {values + list(task.beyond_bound)}, the replay's list gives {elements}",
        )
    if not _eq(out.elements, elements) or not _eq(out.beyond_bound, list(task.beyond_bound)):
        raise Divergence(
            i,
            f"{where}/for_each",
            f"the kernel ran over {out.elements} (beyond the bound: {out.beyond_bound}), the replay gives {elements}",
        )


def first_difference(expected: Any, actual: Any, path: str = "") -> str:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            if key not in expected or key not in actual:
                return f"{path}/{key}"
            if not _eq(expected[key], actual[key]):
                return first_difference(expected[key], actual[key], f"{path}/{key}")
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for key, (expected_item, actual_item) in enumerate(zip(expected, actual, strict=False)):
            if not _eq(expected_item, actual_item):
                return first_difference(expected_item, actual_item, f"{path}/{key}")
    return path or "/"


def verify_solution(
    sol: Solution,
    kernel: Kernel | None = None,
    *,
    slot_values: dict[str, Any] | None = None,
    wrap_backend: Any = None,
    trace: str = "full",
    paraphrases: bool = True,
    check_tags: bool = True,
) -> list[TurnResult]:
    """Raise Divergence at the first mismatch; return the kernel's turn results otherwise.

    ``wrap_backend(backend) -> backend`` lets a caller observe every SLM request
    (data generation records the oracle's answers this way). ``paraphrases``:
    also replay every turn with each of its paraphrases in place of the request
    (every annotation must still hold). ``check_tags``: require evidence for
    every pattern tag (data generation's varied copies skip it).
    Any expected failure (a divergence, a contract violation, a halt, an
    invalid solution) is a Divergence; anything else is a bug and propagates.
    """
    kernel = kernel or Kernel(KernelConfig())
    try:
        rendered = sol.rendered(slot_values)
    except KeyError as exc:
        raise Divergence(None, "slots", str(exc.args[0])) from None
    except ValidationError as exc:
        raise Divergence(None, "slots", f"the substituted solution is invalid: {exc.errors()[0]['msg']}") from None
    try:
        static_checks(rendered, tags=check_tags)
        problems = key_problems(rendered, build_registry(rendered, build_environment(rendered)))
        if problems:
            raise Divergence(
                None, "annotations", problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            )
        ref_states = reference_states(rendered)
        results = _replay(rendered, kernel, ref_states, wrap_backend=wrap_backend, trace=trace)
        if paraphrases:
            _replay_paraphrases(sol, rendered, kernel, ref_states)
        reg = build_registry(rendered, build_environment(rendered)) if check_tags else None
    except UserError as exc:
        raise Divergence(None, "setup", exc.message) from None
    _check_must_not_call(rendered, results, reg)
    if reg is not None:
        _check_replay_tags(rendered, results, reg)
    return results


def _replay(
    rendered: Solution,
    kernel: Kernel,
    ref_states: list[dict[str, Any]],
    *,
    wrap_backend: Any = None,
    trace: str = "full",
) -> list[TurnResult]:
    results: list[TurnResult] = []

    reg: Any = None

    def scratchpad_at(i: int, res: TurnResult, tid: str, key: str) -> str:
        nonlocal reg
        if reg is None:
            reg = build_registry(rendered, build_environment(rendered))
        return describe_scratchpad_entry(rendered, results, res, tid, key, reg)

    def on_turn(i: int, res: TurnResult, tr: Any, env: Environment) -> None:
        compare_turn(
            i,
            rendered.turns[i],
            res,
            tr,
            env,
            ref_states[i],
            scratchpad_at=lambda tid, key: scratchpad_at(i, res, tid, key),
        )
        results.append(res)

    factory = oracle_factory(rendered)
    if wrap_backend is not None:
        inner = factory
        factory = lambda i, turn: wrap_backend(inner(i, turn))  # noqa: E731
    run_solution(rendered, kernel, factory, on_turn=on_turn, trace=trace)
    return results


def _replay_paraphrases(sol: Solution, rendered: Solution, kernel: Kernel, ref_states: list[dict[str, Any]]) -> None:
    """Replay with paraphrase j in place of every turn's request that has one; each must verify like the request.

    A paraphrase only changes the text the primitives see, so a turn that
    verifies leaves the world and S as the request does: the first divergence
    is the paraphrase of the turn it names.
    """
    n = max((len(t.paraphrases) for t in rendered.turns), default=0)
    for j in range(n):
        turns = [
            t.model_copy(update={"user": t.paraphrases[j]}) if j < len(t.paraphrases) else t for t in rendered.turns
        ]
        try:
            _replay(rendered.model_copy(update={"turns": turns}), kernel, ref_states, trace="violations")
        except Divergence as divergence:
            i = divergence.turn if divergence.turn is not None else 0
            text = (
                rendered.turns[i].paraphrases[j] if j < len(rendered.turns[i].paraphrases) else rendered.turns[i].user
            )
            raise Divergence(
                divergence.turn, f"paraphrases[{j}]", f"{text!r}: {divergence.step}: {divergence.message}"
            ) from None
    # Same slot values: entity substitution must reach the paraphrase too.
    for i, turn in enumerate(sol.turns):
        want = set(_SLOT_REF.findall(turn.user))
        for j, paraphrase in enumerate(turn.paraphrases):
            lost = sorted(want - set(_SLOT_REF.findall(paraphrase)))
            if lost:
                raise Divergence(
                    i,
                    f"paraphrases[{j}]",
                    f"{paraphrase!r} lacks {', '.join('${' + x + '}' for x in lost)} that the request names: a paraphrase must carry the same slot values",
                )


_SLOT_REF = re.compile(r"\$\{(\w+)\}")


def verify_paths(paths: list[str | Path], kernel: Kernel | None = None, *, warnings: bool = True) -> list[VerifyResult]:
    kernel = kernel or Kernel(KernelConfig())
    out: list[VerifyResult] = []
    seen: dict[str, str] = {}
    for path in solution_files(list(paths)):
        try:
            sol = load_solution(path)
        except UserError as exc:
            out.append(VerifyResult(str(path), None, False, exc.message if exc.where == str(path) else str(exc)))
            continue
        if sol.id in seen:
            out.append(
                VerifyResult(str(path), sol, False, f"duplicate solution id {sol.id!r} (also in {seen[sol.id]})")
            )
            continue
        seen[sol.id] = str(path)
        try:
            turns = verify_solution(sol, kernel, trace="violations")
            out.append(
                VerifyResult(
                    str(path),
                    sol,
                    True,
                    turns=turns,
                    warnings=sol.format_notes + (solution_warnings(sol, kernel) if warnings else []),
                )
            )
        except Divergence as divergence:
            out.append(VerifyResult(str(path), sol, False, divergence.describe(), warnings=sol.format_notes))
    return out


def coverage(results: list[VerifyResult]) -> tuple[Counter, Counter]:
    doms: Counter = Counter()
    tags: Counter = Counter()
    for result in results:
        if result.ok and result.solution is not None:
            for domain in result.solution.domains:
                doms[domain] += 1
            for tag in result.solution.tags:
                tags[tag] += 1
    return doms, tags


# --------------------------------------------------------------------- CLI
DEFAULT_MIN_PER_DOMAIN = 30  # the corpus requirement (issue 4): applied by default to the default corpus
DEFAULT_MIN_PER_TAG = 10


class VerifyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paths: list[str] = Field(default_factory=lambda: [str(DEFAULT_SOLUTIONS)])
    # None: 30 / 10 when the paths are the default corpus, 0 (report only) for any other paths.
    min_per_domain: int | None = Field(None, ge=0)
    min_per_tag: int | None = Field(None, ge=0)
    # Warnings (printed, never a failure): literals in a slot type's value pool, and a copy with other slot values
    # that does not verify (generate would drop it). false: skip them, e.g. for a quick check of one file.
    warnings: bool = True


def is_default_corpus(paths: list[str] | list[Path]) -> bool:
    return [Path(p).resolve() for p in paths] == [DEFAULT_SOLUTIONS.resolve()]


def coverage_minimums(cfg: VerifyConfig, paths: list[str] | list[Path]) -> tuple[int, int]:
    """The minimums in force: explicit settings win; otherwise the corpus requirement for the default corpus only."""
    default = is_default_corpus(paths)
    dom = cfg.min_per_domain if cfg.min_per_domain is not None else (DEFAULT_MIN_PER_DOMAIN if default else 0)
    tag = cfg.min_per_tag if cfg.min_per_tag is not None else (DEFAULT_MIN_PER_TAG if default else 0)
    return dom, tag


def print_report(results: list[VerifyResult], elapsed: float, console: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    errors = Console(stderr=True) if console is None else console  # failures go to stderr
    console = console or Console()
    doms, tags = coverage(results)
    table = Table(title="Coverage of verified solutions")
    table.add_column("domain")
    table.add_column("solutions", justify="right")
    for domain, n in sorted(doms.items()):
        table.add_row(domain, str(n))
    console.print(table)
    t2 = Table(title="Pattern tags")
    t2.add_column("pattern")
    t2.add_column("solutions", justify="right")
    for tag in PATTERN_TAGS:
        t2.add_row(tag, str(tags.get(tag, 0)))
    console.print(t2)
    bad = [r for r in results if not r.ok]
    warned = [(r, w) for r in results for w in r.warnings]
    for result, warning in warned:
        errors.print(f"[yellow]WARN[/yellow] {escape(result.path)}: {escape(warning)}", soft_wrap=True)
    for result in bad:
        # escape(): messages quote check names such as [values_grounded], which rich would take for markup
        errors.print(f"[red]FAIL[/red] {escape(result.path)}: {escape(result.error or '')}", soft_wrap=True)
    n_warned = len({r.path for r, _ in warned})
    console.print(
        f"{len(results) - len(bad)}/{len(results)} solutions verified in {elapsed:.1f} s"
        + (f" ({len(warned)} warnings in {n_warned} files)" if warned else "")
    )


def cli(args: list[str]) -> int:
    from forethought.arguments import load, split_args

    parsed = split_args(args)
    cfg = load("verify", parsed, VerifyConfig)
    if cfg is None:
        return 0
    paths = parsed.positional or cfg.paths
    t0 = time.perf_counter()
    results = verify_paths(paths, warnings=cfg.warnings)
    print_report(results, time.perf_counter() - t0)
    if not results:
        raise UserError("no solution files found", ", ".join(map(str, paths)))
    failed = [r for r in results if not r.ok]
    doms, tags = coverage(results)
    min_dom, min_tag = coverage_minimums(cfg, paths)
    short = [f"domain {d}: {n} < {min_dom}" for d, n in sorted(doms.items()) if n < min_dom]
    short += [f"pattern {t}: {tags.get(t, 0)} < {min_tag}" for t in PATTERN_TAGS if tags.get(t, 0) < min_tag]
    for shortfall in short:
        print(f"coverage below the configured minimum: {shortfall}", file=sys.stderr)
    # 2: a file that is not a valid solution (bad input); 1: valid solutions that do not verify, or too few
    if any(r.solution is None for r in failed):
        return 2
    return 1 if failed or short else 0


# ---------------------------------------------------------------- warnings
# Mistakes verify cannot see in the solution as written but that make generate drop its varied copies. They are
# warnings, not failures: the solution is right for its own slot values.
_TEXT_FIELDS = ("user", "paraphrases", "text")
_PROSE = ("title", "description", "notes", "slots")


def _literals(node: Any, path: str, out: list[tuple[str, Any, bool]], text: bool = False) -> None:
    """(path, leaf, is_text) for every leaf of the unrendered solution outside its prose and its slot table; the keys
    of a mapping count too (a file, a user or a booking is often named by its key in ``initial_state``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _PROSE:
                continue
            sub = f"{path}.{key}" if path else str(key)
            out.append((sub, key, False))
            _literals(value, sub, out, text or key in _TEXT_FIELDS)
    elif isinstance(node, list):
        for j, value in enumerate(node):
            _literals(value, f"{path}[{j}]", out, text)
    elif isinstance(node, (str, int, float)) and not isinstance(node, bool):
        out.append((path, node, text))


def slot_pool_collisions(sol: Solution) -> list[str]:
    """Literal strings that are also a value in the pool of one of the solution's slot types.

    Entity substitution may give a slot of that type exactly this value, and then two entities the scenario keeps
    apart become one (a second file of the same name, a receiver that is also the sender): the varied copy no
    longer verifies and generate drops it. Write such a value as a slot, or choose a literal outside the pool.
    """
    from .augment import pool_for

    pools: dict[str, list[str]] = {}
    for name, slot in sol.slots.items():
        for value in pool_for(sol, slot.type):
            if isinstance(value, str) and len(value) >= 3:
                pools.setdefault(value, []).append(f"{slot.type} (slot {name})")
    if not pools:
        return []
    leaves: list[tuple[str, Any, bool]] = []
    _literals(sol.model_dump(mode="json", exclude_defaults=True), "", leaves)
    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    for path, leaf, is_text in leaves:
        if not isinstance(leaf, str):
            continue
        bare = _SLOT_REF.sub(" ", leaf)
        hits = [v for v in pools if (re.search(r"(?<!\w)" + re.escape(v) + r"(?!\w)", bare) if is_text else bare == v)]
        for value in hits:
            if (path.split("[")[0], value) in seen:
                continue
            seen.add((path.split("[")[0], value))
            out.append(
                f"{path}: the literal {value!r} is also in the value pool of {', '.join(sorted(set(pools[value])))}; a varied copy that draws it "
                f"makes two entities one (write it as a slot, or use a value outside data_gen/slot_values)"
            )
    return out


def variant_warnings(sol: Solution, kernel: Kernel | None = None) -> list[str]:
    """Replay one copy of the solution with other slot values, drawn as generate draws them (seeded by the id).

    A solution right for its own values can still be wrong for others: an asserted number derived from a slot
    (a count after adding bags, a balance after a top-up) stays a literal while the slot changes; linked entities
    (a ticker, its company and its price) are drawn apart unless ``initial_state`` ties them. generate drops every
    such copy; this says so before it does."""
    from .augment import substitute_entities

    values = substitute_entities(sol, random.Random(f"verify-variant:{sol.id}"), p=1.0)
    changed = {k: v for k, v in values.items() if v != sol.slots[k].value}
    if not changed:
        return []
    try:
        verify_solution(sol, kernel, slot_values=values, trace="violations", paraphrases=False, check_tags=False)
    except Divergence as divergence:
        drawn = ", ".join(f"${{{k}}}={v!r}" for k, v in changed.items())
        kind = "a copy with other slot values does not verify"
        if (
            divergence.turn is not None
            and divergence.step in ("state", "scratchpad")
            and _asserts_literal_number(sol, divergence.turn, divergence.step)
        ):
            kind = "an asserted number looks derived from a slot (it stays a literal while the slot changes)"
        return [
            f"{kind}: with {drawn}: {divergence.describe()}; generate drops such copies (give the value its own slot, or tie linked "
            "entities through initial_state)"
        ]
    return []


def _asserts_literal_number(sol: Solution, turn: int, step: str) -> bool:
    annotated_turn = sol.turns[turn]
    vals = [a.equals for a in annotated_turn.state] if step == "state" else list(annotated_turn.scratchpad.values())
    return any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)


def solution_warnings(sol: Solution, kernel: Kernel | None = None, *, variants: bool = True) -> list[str]:
    return slot_pool_collisions(sol) + (variant_warnings(sol, kernel) if variants else [])
