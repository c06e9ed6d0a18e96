"""The kernel's steps for conditional and fan-out tasks (docs/kernel.md, "Conditional and fan-out tasks").

decompose may give a task a ``when`` predicate (it runs only if the predicate holds on S right before it
runs) or a ``for_each`` (it runs once per element of a list an earlier task's call returned). The program
(``kernel/program.py``) routes them with the DSL's operators: Conditional ``if_condition`` past a false
predicate, Conditional ``if_fan_out`` into a ForEach ``instances`` bounded by ``KernelConfig.max_fanout``.
These functions are the symbolic steps of those branches; they evaluate, expand and sum up, never loop.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from . import toolgate
from .records import TaskCursor, TaskList, TurnState
from .registry.model import Sat
from .scenario import instance_id
from .scratchpad import is_truncated
from .specs import UnitTask

_STRING_OPS = ("startswith", "endswith", "contains")
_ABSENT = object()


def holds(op: str, expected: Any, actual: Any) -> bool:
    """A condition's verdict: the prerequisites' Sat ops (``toolgate.sat``), plus three on strings; fails closed."""
    if op in _STRING_OPS:
        if not isinstance(actual, str) or not isinstance(expected, str):
            return False
        return {"startswith": actual.startswith, "endswith": actual.endswith, "contains": actual.__contains__}[op](
            expected
        )
    try:
        return toolgate.sat(Sat(op=op, value=expected), actual)  # type: ignore[arg-type]
    except Exception:  # an op Sat does not know: not satisfied
        return False


def _failed_dependencies(turn: TurnState, unit: UnitTask) -> list[str]:
    """The task's dependencies that did not execute (it is skipped for them, by ``begin_task``'s rule)."""
    return [
        d
        for d in unit.depends_on
        if d in turn.tasks and turn.outcomes.get(d) is not None and turn.outcomes[d].status != "executed"
    ]


def state_value(turn: TurnState, task_id: str, key: str) -> Any:
    """S's value under ``key`` as the task sees it: its dependencies' entries as they wrote them (newest first), then S."""
    for _, entries in turn.fresh(task_id):
        if key in entries:
            return entries[key]
    return turn.scratchpad.get(key) if key in turn.scratchpad else _ABSENT


def check_condition(task: TaskCursor, turn: TurnState) -> TaskCursor:
    """Evaluate the task's ``when`` on S right before it runs, after its dependencies ran. False, or the key absent
    (fail closed): the outcome is ``skipped_condition`` and Conditional ``if_condition`` routes it past everything."""
    unit = turn.tasks[task.task_id]
    if unit.when is None:  # conditions are the plan's semantics: evaluated with CVC off too
        return task
    if _failed_dependencies(turn, unit):
        return task  # begin_task / expand_fan_out report it skipped for its dependency
    cond = unit.when
    value = state_value(turn, task.task_id, cond.key)
    verdict = value is not _ABSENT and not is_truncated(value) and holds(cond.op, cond.value, value)
    shown = None if value is _ABSENT else value
    if verdict:
        turn.pending_condition[task.task_id] = (True, shown)
        return task
    what = f"S has no {cond.key!r}" if value is _ABSENT else f"S[{cond.key!r}] = {json.dumps(shown, default=str)}"
    turn.outcome(
        task.task_id,
        "skipped_condition",
        tool=unit.tool_name,
        condition=False,
        condition_value=shown,
        reason=f"condition {cond.key} {cond.op} {json.dumps(cond.value, default=str)} is false: {what}",
    )
    turn.prerequisites.setdefault(task.task_id, [])
    turn.bindings.setdefault(task.task_id, {})
    return task.model_copy(update={"status": "skipped_condition"})


def record_condition(task: TaskCursor, turn: TurnState) -> TaskCursor:
    """A task whose predicate held: its outcome (set by the steps that ran it) records the verdict too."""
    seen = turn.pending_condition.pop(task.task_id, None)
    outcome = turn.outcomes.get(task.task_id)
    if seen is not None and outcome is not None:
        turn.outcomes[task.task_id] = outcome.model_copy(update={"condition": seen[0], "condition_value": seen[1]})
    return task


def _elements(turn: TurnState, unit: UnitTask) -> tuple[list[Any] | None, str]:
    """The list the fan-out runs over: the result field of its source task's committed call, as that call wrote it."""
    spec = unit.for_each
    assert spec is not None
    calls = [(tool, entries) for tid, tool, entries in turn.commits if tid == spec.task]
    if not calls:
        return None, f"task {spec.task} committed no call to read {spec.field!r} from"
    tool, entries = calls[-1]
    key = toolgate.result_key(tool, spec.field)
    value = entries.get(key, entries.get(spec.field))
    if value is None:
        return None, f"{tool}'s result has no field {spec.field!r}"
    if is_truncated(value) or not isinstance(value, list):
        return None, f"{key} is not a list ({'truncated' if is_truncated(value) else type(value).__name__})"
    return value, key


def _keep(unit: UnitTask, element: Any) -> bool:
    where = unit.for_each.where  # type: ignore[union-attr]
    if where is None:
        return True
    actual = (
        element.get(where.field, _ABSENT)
        if where.field is not None and isinstance(element, dict)
        else (_ABSENT if where.field is not None else element)
    )
    return actual is not _ABSENT and holds(where.op, where.value, actual)


def _bound_value(unit: UnitTask, element: Any) -> Any:
    pick = unit.for_each.item_field  # type: ignore[union-attr]
    if pick is None:
        return element
    return element.get(pick) if isinstance(element, dict) else None


def expand_fan_out(task: TaskCursor, turn: TurnState) -> TaskList:
    """The instances of a fan-out task: one per kept element, up to ``max_fanout`` (the rest are reported in the
    task's outcome). Each instance is a task of its own (``<id>[k]``) whose parameters bind the element to the
    for_each parameter (τ for that instance: INV-L), with the task's match and dependencies."""
    turn.current_fan_out = task
    unit = turn.tasks[task.task_id]
    spec = unit.for_each
    assert spec is not None
    turn.prerequisites.setdefault(task.task_id, [])
    turn.bindings.setdefault(task.task_id, {})
    failed = _failed_dependencies(turn, unit)
    if failed:
        turn.outcome(
            task.task_id,
            "skipped",
            tool=unit.tool_name,
            reason="depends on " + ", ".join(f"{d} ({turn.outcomes[d].status})" for d in failed),
        )
        return TaskList(tasks=[])
    elements, where = _elements(turn, unit)
    if elements is None:
        turn.outcome(
            task.task_id, "missing_param", tool=unit.tool_name, missing=[spec.param], reason=f"for_each: {where}"
        )
        return TaskList(tasks=[])
    values = [_bound_value(unit, e) for e in elements if _keep(unit, e)]
    run, beyond = values[: turn.config.max_fanout], values[turn.config.max_fanout :]
    cursors = []
    for k, value in enumerate(run):
        iid = instance_id(unit.id, k)
        turn.tasks[iid] = UnitTask(
            id=iid,
            text=f"{unit.text} ({spec.param}: {json.dumps(value, default=str)})",
            tool_name=unit.tool_name,
            depends_on=list(unit.depends_on),
            parameters={**unit.parameters, spec.param: value},
        )
        turn.instance_of[iid] = unit.id
        turn.matches[iid] = task.matched_tool
        cursors.append(TaskCursor(task_id=iid, matched_tool=task.matched_tool))
    turn.outcome(
        task.task_id,
        "pending",
        tool=unit.tool_name,
        elements=values,
        instances=[c.task_id for c in cursors],
        beyond_bound=beyond,
        reason=f"for_each over {where}",
    )
    return TaskList(tasks=cursors)


def collect_fan_out(done: BaseModel, turn: TurnState) -> TaskCursor:
    """Sum up the instances (each has its own outcome; a failed one abandoned only itself, INV-R): executed when every
    element ran and executed, skipped_condition when there was no element, partial otherwise."""
    task = turn.current_fan_out
    assert task is not None
    summary = turn.outcomes[task.task_id]
    if summary.status != "pending":  # skipped for a dependency, or no list to run over
        return task.model_copy(update={"status": summary.status})
    errors = list(getattr(done, "errors", []))
    for iid, error in zip(summary.instances, errors, strict=False):
        if error is not None and iid not in turn.outcomes:
            turn.outcome(iid, "error", reason=error)
    statuses = [turn.outcomes[i].status if i in turn.outcomes else "error" for i in summary.instances]
    counts = ", ".join(f"{statuses.count(s)} {s}" for s in dict.fromkeys(statuses))
    if not summary.instances and not summary.beyond_bound:
        status, reason = "skipped_condition", f"{summary.reason}: no element to run it for"
    elif summary.beyond_bound or any(s != "executed" for s in statuses):
        extra = (
            f"; {len(summary.beyond_bound)} elements beyond max_fanout={turn.config.max_fanout} not run: "
            f"{json.dumps(summary.beyond_bound, default=str)}"
            if summary.beyond_bound
            else ""
        )
        status, reason = "partial", f"{summary.reason}: {counts or 'no instance run'}{extra}"
    else:
        status, reason = "executed", f"{summary.reason}: {counts}"
    turn.outcomes[task.task_id] = summary.model_copy(update={"status": status, "reason": reason})
    turn.check_monotone(f"fan-out {task.task_id} end")
    return task.model_copy(update={"status": status})
