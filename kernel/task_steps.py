"""The kernel's per-task symbolic steps: prerequisites, function and parameter matching, execution.

Paper Algorithm 2 lines 10–39 (the task loop: SP4 Check-Prerequisites, SP5 Match-Funcs-and-Params
and the guarded Execute). Each public function is one step of the program in ``kernel/program.py``
and has that step's name. A task's values travel on its :class:`TaskCursor` (matched tool,
candidates, the parameters M and bindings B of the tool being tried), a prerequisite's on its
:class:`PrereqCursor`; the :class:`~forethought.kernel.records.TurnState` holds the services, the records
and the cursors an SLM step or a ForEach cannot carry (see its docstring).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from . import toolgate
from .grounding import Haystack
from .records import BindingRecord, CallRecord, PrereqCursor, PrereqList, PrereqRecord, TaskCursor, TurnState
from .registry.model import Prerequisite
from .scratchpad import Scratchpad, is_truncated
from .specs import CheckPrereqInput, CheckPrereqOutput, MatchFillInput, MatchFillOutput, ProposedTask, tool_brief
from .unfinished import key as unfinished_key
from .unfinished import open_arguments


def lookup(
    name: str,
    turn_context: dict[str, Any],
    scratchpad: Scratchpad,
    *,
    fresh: list[tuple[str, dict[str, Any]]] | None = None,
    copied: frozenset[str] = frozenset(),
    tool: str | None = None,
    unfinished: dict[str, Any] | None = None,
) -> BindingRecord:
    """Lookup(m, τ, S) (line 31), with same-turn binding (docs/kernel.md, "Same-turn binding"). None counts
    as unbound, and so does a truncation marker.

    Without ``fresh`` (a task with no dependency in this turn, a retrieval): τ, then S (INV-L). With the
    entries the task's dependencies committed this turn (``fresh``, newest first):

    1. τ(m), unless ``m`` is in ``copied`` (decompose's value for it is not in the request or the turn
       context but is in S: a copy of S, not something the user stated or decompose proposed afresh);
    2. a dependency's entry ``m`` (one of its arguments or declared writes), newest call first, as that
       call wrote it;
    3. a dependency's result has a field ``m`` (entry ``<g>.m``): m is missing, so match_fill decides
       from the view, which shows that entry. A result field is not a curated write: it may be the
       value (a symbol looked up) or what the task changes (the passenger list it corrects);
    4. τ(m) when it was a copy;
    5. S(m), unless its latest write was a call of ``tool`` itself: a task that depends on this turn's
       results does not reuse what the same tool was given before (the message to the first person,
       the buy's symbol); m is missing and match_fill proposes the value from the view.

    ``unfinished`` (the bound arguments of ``tool``'s still-unfinished entry, left by an earlier turn:
    docs/kernel.md, "Unfinished tasks") is consulted just before S, in both cases: the task resumed is
    more specific than a value some other call left under the same name. Source ``S`` (the entry is in S),
    ``entry`` names it, consulted ``... → unfinished``.
    """
    consulted = ["request"]
    stated = turn_context.get(name)
    if stated is not None and name not in copied:
        return BindingRecord(value=stated, source="request", consulted=consulted)
    if fresh:
        consulted.append("dependencies")
        for _, entries in fresh:
            value = entries.get(name)
            if value is not None:
                return BindingRecord(value=value, source="scratchpad", consulted=consulted)
        produced = [
            toolgate.result_key(g, name)
            for g, entries in fresh
            if entries.get(toolgate.result_key(g, name)) is not None
        ]
        if produced:
            return BindingRecord(value=None, source="missing", consulted=consulted, shadowed_by=produced[0])
        if stated is not None:
            consulted.append("request")
            return BindingRecord(value=stated, source="request", consulted=consulted)
    if unfinished:
        consulted.append("unfinished")
        value = unfinished.get(name)
        if value is not None and not is_truncated(value):
            return BindingRecord(
                value=value, source="scratchpad", consulted=consulted, entry=unfinished_key(tool or "")
            )
    consulted.append("scratchpad")
    value = scratchpad.get(name)
    if value is not None and not is_truncated(value):
        if fresh and tool is not None and scratchpad.last_source(name) == f"call:{tool}":
            return BindingRecord(value=None, source="missing", consulted=consulted, shadowed_by=name)
        return BindingRecord(value=value, source="scratchpad", consulted=consulted)
    return BindingRecord(value=None, source="missing", consulted=consulted)


# ------------------------------------------------------------ prerequisites
def begin_task(task: TaskCursor, turn: TurnState) -> PrereqList:
    """GetPrereqs(t) (line 12): the prerequisites of the tool decompose proposed for the task."""
    turn.check_monotone(f"task {task.task_id} start")
    turn.current_task = task  # the prerequisites ForEach returns only its items' results
    turn.prerequisites.setdefault(task.task_id, [])
    turn.bindings.setdefault(task.task_id, {})
    if not turn.config.cvc:
        return PrereqList(prereqs=[])
    # A task whose dependency did not execute is skipped: it needs that task's result or effect
    # (deleting "the original" after a failed copy must not happen). Independent tasks go on (INV-R).
    unit = turn.tasks[task.task_id]
    failed = [
        d
        for d in unit.depends_on
        if d in turn.tasks and turn.outcomes.get(d) is not None and turn.outcomes[d].status != "executed"
    ]
    if failed:
        turn.outcome(
            task.task_id,
            "skipped",
            tool=unit.tool_name,
            reason="depends on " + ", ".join(f"{d} ({turn.outcomes[d].status})" for d in failed),
        )
        return PrereqList(prereqs=[])
    spec = turn.registry.get(unit.tool_name)
    keys = (
        [_entry_checked(turn, task.task_id, p) for p in spec.prerequisites][: turn.config.max_prereqs] if spec else []
    )
    return PrereqList(prereqs=[PrereqCursor(task_id=task.task_id, index=i, key=k) for i, k in enumerate(keys)])


def _entry_checked(turn: TurnState, task_id: str, declared: Prerequisite) -> str:
    """The key of S that Check consults for the prerequisite ``declared`` (docs/kernel.md, "Per-entity
    prerequisites"): the plain key, or for a per-entity prerequisite the entry of the entity the task names, its
    value looked up like a parameter's: τ (the task's parameters as decompose stated them, then the turn context)
    before S (INV-L). No value known: ``key[]``, which is never written, so Check gives Absent and the retrieval
    runs."""
    if declared.entity is None:
        return declared.key
    found = lookup(declared.entity, turn.task_context(task_id), turn.scratchpad)
    return toolgate.prerequisite_key(declared, found.value)


def _prerequisite_spec(turn: TurnState, prerequisite: PrereqCursor) -> Prerequisite:
    spec = turn.registry.get(turn.tasks[prerequisite.task_id].tool_name)
    return spec.prerequisites[prerequisite.index]  # type: ignore[union-attr]  # begin_task numbered them in declared order


def _record_of(turn: TurnState, prerequisite: PrereqCursor) -> PrereqRecord:
    """The record check_prerequisite appended for this prerequisite (the task's latest)."""
    return turn.prerequisites[prerequisite.task_id][-1]


def check_prerequisite(prerequisite: PrereqCursor, turn: TurnState) -> PrereqCursor:
    """r <- Check(p, S) ∈ {Met, ¬Met, Absent} (line 13)."""
    if turn.outcomes.get(prerequisite.task_id) is not None:  # already blocked by an earlier prerequisite
        return prerequisite.model_copy(update={"outcome": "skipped"})
    outcome = toolgate.check(_prerequisite_spec(turn, prerequisite), turn.scratchpad, prerequisite.key)
    turn.prerequisites[prerequisite.task_id].append(PrereqRecord(key=prerequisite.key, outcome=outcome))  # type: ignore[arg-type]
    return prerequisite.model_copy(update={"outcome": outcome})


def prepare_prerequisite_question(prerequisite: PrereqCursor, turn: TurnState) -> CheckPrereqInput:
    """The input of check_prerequisites: TaskToCheck(p) when Absent (line 15), TaskToMeet(p) when ¬Met (line 20).

    Runs as the steps "prepare_retrieval" and "prepare_remediation"."""
    turn.pending_prerequisite = prerequisite  # the model's answer cannot carry the cursor
    requirement = _prerequisite_spec(turn, prerequisite)
    return CheckPrereqInput(
        task=turn.task_ref(prerequisite.task_id, with_tool=True),
        key=prerequisite.key,
        outcome=prerequisite.outcome,  # type: ignore[arg-type]
        current=turn.scratchpad.get(prerequisite.key) if prerequisite.outcome == "not_met" else None,
        requirement=toolgate.describe(requirement),
        context=turn.task_context(prerequisite.task_id),
        state=turn.view(prerequisite.task_id),
        tools=turn.tool_briefs,
    )


def _recheck(turn: TurnState, prerequisite: PrereqCursor, record: PrereqRecord) -> PrereqCursor:
    """S <- S ∪ {p -> v} (line 16; None if nothing was retrieved, so Absent fires once: INV-T); re-check (line 17).

    A per-entity key with no entity known (``key[]``) is not written: it names no entity, so the re-check is not met."""
    if prerequisite.key not in turn.scratchpad and not _names_no_entity(turn, prerequisite):
        turn.scratchpad.set(prerequisite.key, None, "retrieval")
    outcome = toolgate.check(_prerequisite_spec(turn, prerequisite), turn.scratchpad, prerequisite.key)
    if outcome == "absent":  # only a key that names no entity stays absent: fail closed
        outcome = "not_met"
    record.recheck = outcome  # type: ignore[assignment]
    return prerequisite.model_copy(update={"outcome": outcome})


def _names_no_entity(turn: TurnState, prerequisite: PrereqCursor) -> bool:
    declared = _prerequisite_spec(turn, prerequisite)
    return declared.entity is not None and prerequisite.key == toolgate.prerequisite_key(declared, None)


def execute_retrieval(answer: CheckPrereqOutput, turn: TurnState) -> PrereqCursor:
    """v <- Execute(TaskToCheck(p)) (line 15), then write and re-check (lines 16-17)."""
    prerequisite = turn.pending_prerequisite
    assert prerequisite is not None
    record = _record_of(turn, prerequisite)
    record.retrieval = answer.task
    if answer.task is not None:
        _run_proposed(turn, prerequisite.task_id, answer.task)
    return _recheck(turn, prerequisite, record)


def retrieval_failed(prerequisite: PrereqCursor, turn: TurnState) -> PrereqCursor:
    """No retrieval task could be proposed: write and re-check all the same (lines 16-17)."""
    return _recheck(turn, prerequisite, _record_of(turn, prerequisite))


def _block(turn: TurnState, prerequisite: PrereqCursor, reason: str, remediation: ProposedTask | None = None) -> None:
    """Report Blocked for the prerequisite's task (line 21): it is abandoned (INV-R)."""
    turn.outcome(
        prerequisite.task_id,
        "blocked",
        tool=turn.tasks[prerequisite.task_id].tool_name,
        reason=reason,
        remediation=remediation,
        blocked_key=prerequisite.key,
    )


def emit_blocked(answer: CheckPrereqOutput, turn: TurnState) -> PrereqCursor:
    """t' <- TaskToMeet(p); report Blocked(t') (lines 20-21)."""
    prerequisite = turn.pending_prerequisite
    assert prerequisite is not None
    _record_of(turn, prerequisite).remediation = answer.task
    _block(turn, prerequisite, f"prerequisite {prerequisite.key!r} not met", remediation=answer.task)
    return prerequisite.model_copy(update={"outcome": "not_met"})


def block_without_remedy(prerequisite: PrereqCursor, turn: TurnState) -> PrereqCursor:
    """¬Met and no remediation could be proposed: report Blocked all the same (line 21)."""
    _block(turn, prerequisite, f"prerequisite {prerequisite.key!r} not met; no remediation could be proposed")
    return prerequisite


def after_prerequisites(checked: BaseModel, turn: TurnState) -> TaskCursor:
    """The task goes on to matching unless a prerequisite blocked it or a dependency failed."""
    task = turn.current_task
    assert task is not None
    done = turn.outcomes.get(task.task_id)  # blocked by a prerequisite, or skipped
    return task.model_copy(update={"status": done.status if done is not None else "ready"})


# ------------------------------------------------- functions and parameters
def resolve_function(task: TaskCursor, turn: TurnState) -> TaskCursor:
    """f <- MatchFunc(t, Ω) (line 25); f = ⊥ reports MissingFunction (lines 26-27)."""
    tool = task.matched_tool
    if tool is None or tool not in turn.registry:
        why = "no registry tool matches this task" if tool is None else f"matched tool {tool!r} is not registered"
        turn.outcome(task.task_id, "missing_function", reason=why)
        return task.model_copy(update={"status": "missing_function"})
    candidates = [tool]
    if turn.config.cvc:
        candidates += [a for a in turn.registry[tool].alternatives if a in turn.registry and a != tool]
    return task.model_copy(
        update={"status": "trying", "candidate": 0, "candidates": candidates[: turn.config.max_candidates]}
    )


def lookup_params(task: TaskCursor, turn: TurnState) -> TaskCursor:
    """M <- Params(f); B <- ∅ (line 29); for each m ∈ M: Lookup(m, τ, S) (lines 30-31, INV-L)."""
    tool = task.candidates[task.candidate]
    spec = turn.registry[tool]
    unit = turn.tasks[task.task_id]
    task_context = turn.task_context(task.task_id)
    # Required parameters, plus optional ones the decomposition stated explicitly.
    parameters = list(spec.required) + [
        p for p in spec.param_names if p not in spec.required and unit.parameters.get(p) is not None
    ]
    if not turn.config.cvc:  # unchecked: whatever decompose produced is passed on, plus lookups for required ones
        parameters += [p for p in unit.parameters if p not in parameters]
    # A task resumed from an earlier turn's unfinished entry of this tool also binds the optional parameters
    # that task had bound (docs/kernel.md, "Unfinished tasks").
    resumed = open_arguments(turn.scratchpad, tool)
    parameters += [
        p
        for p in spec.param_names
        if p not in parameters and resumed.get(p) is not None and not is_truncated(resumed[p])
    ]
    fresh = turn.fresh(task.task_id)
    copied = _copied_from_state(turn, unit.parameters) if fresh else frozenset()
    if task.task_id in turn.instance_of:  # the element a fan-out instance is for is its τ, never a copy of S
        copied = copied - {turn.tasks[turn.instance_of[task.task_id]].for_each.param}  # type: ignore[union-attr]
    bindings = {
        m: lookup(m, task_context, turn.scratchpad, fresh=fresh, copied=copied, tool=tool, unfinished=resumed)
        for m in parameters
    }
    looked_up = task.model_copy(
        update={
            "parameters": parameters,
            "bindings": bindings,
            "missing": [m for m, r in bindings.items() if r.source == "missing"],
            "lookups": {m: r.consulted for m, r in bindings.items()},
        }
    )
    turn.record_bindings(looked_up)
    return looked_up


def _copied_from_state(turn: TurnState, parameters: dict[str, Any]) -> frozenset[str]:
    """Decompose's parameters whose value the request and the turn context do not contain but the
    scratchpad did when decompose ran: decompose took them from the state view. They are not what the user stated, so a
    dependency's fresh result for the same name wins over them. A value found in neither (an enum value
    of the tool, e.g. permission='storage' after a grant of 'sms'; anything, with CVC off) is decompose's
    own proposal for this task and is kept like a stated one: nothing earlier produced it."""
    stated = Haystack([turn.user], [turn.turn_context])
    in_state = Haystack([], [turn.decompose_state])
    return frozenset(
        m for m, v in parameters.items() if v is not None and not stated.contains(v) and in_state.contains(v)
    )


def request_before_scratchpad(task: TaskCursor, looked_up: TaskCursor) -> str | None:
    """Contract "request_before_scratchpad" on lookup_params (INV-L): every lookup consulted the request (τ) before
    the scratchpad (S)."""
    bad = {m: c for m, c in looked_up.lookups.items() if c[:1] != ["request"]}
    return f"tau was not consulted first for {bad}" if bad else None


def prepare_fill(task: TaskCursor, turn: TurnState) -> MatchFillInput:
    """The input of match_fill: TaskToGet(m) for the parameters still missing (line 33)."""
    tool = task.candidates[task.candidate]
    turn.pending_task = task  # the model's answer cannot carry the cursor
    return MatchFillInput(
        task=turn.task_ref(task.task_id, with_tool=True),
        tool=turn.registry.derived("brief_map", lambda r: {t.name: tool_brief(t) for t in r})[tool],
        missing=list(task.missing),
        bound={m: r.value for m, r in task.bindings.items() if r.source != "missing"},
        context=turn.task_context(task.task_id),
        state=turn.view(task.task_id),
    )


def apply_fill(answer: MatchFillOutput, turn: TurnState) -> TaskCursor:
    """v <- Execute(TaskToGet(m)) (line 33); S <- S ∪ {m -> v}, written even if ⊥ (line 34, INV-S)."""
    task = turn.pending_task
    assert task is not None
    bindings = dict(task.bindings)
    still_missing = []
    for name, record in task.bindings.items():
        if record.source != "missing":
            continue
        value = answer.values.get(name)
        bindings[name] = BindingRecord(
            value=value,
            source="fill" if value is not None else "missing",
            consulted=record.consulted + ["fill"],
            shadowed_by=record.shadowed_by,
        )
        turn.scratchpad.set(name, value, "fill")
        if value is None:
            still_missing.append(name)
    filled = task.model_copy(update={"bindings": bindings, "missing": still_missing})
    turn.record_bindings(filled)
    return filled


def fill_failed(task: TaskCursor, turn: TurnState) -> TaskCursor:
    """match_fill gave no valid answer: the missing parameters stay unbound (line 35 reports them)."""
    bindings = dict(task.bindings)
    for name in task.missing:
        bindings[name] = BindingRecord(
            value=None,
            source="missing",
            consulted=task.bindings[name].consulted + ["fill"],
            shadowed_by=task.bindings[name].shadowed_by,
        )
    unfilled = task.model_copy(update={"bindings": bindings})
    turn.record_bindings(unfilled)
    return unfilled


# ---------------------------------------------------------------- execution
def guard_execute(task: TaskCursor, turn: TurnState) -> TaskCursor:
    """if dom(B) = M then Execute(f, B) (line 39, INV-E), through the ToolGate pre/postconditions.

    An unbound parameter reports MissingParam (line 35); a rejected call tries the next candidate."""
    tid = task.task_id
    tool = task.candidates[task.candidate]
    bindings, parameters = task.bindings, task.parameters
    unbound = [m for m in parameters if bindings.get(m) is None or bindings[m].source == "missing"]
    if unbound and turn.config.cvc:
        turn.outcome(tid, "missing_param", tool=tool, reason=f"no value for {unbound}", missing=unbound)
        return task.model_copy(update={"status": "missing_param"})
    arguments = {m: bindings[m].value for m in parameters if m in bindings and bindings[m].source != "missing"}
    if turn.config.cvc and set(arguments) != set(parameters):
        turn.violate(f"INV-E: {tool} would execute with {sorted(arguments)} but needs {sorted(parameters)}")
        turn.outcome(
            tid, "missing_param", tool=tool, reason="execution guard", missing=sorted(set(parameters) - set(arguments))
        )
        return task.model_copy(update={"status": "missing_param"})
    calls_before = len(turn.calls)
    ok, reasons = execute_call(turn, tid, "task", tool, arguments)
    if ok:
        turn.outcome(tid, "executed", tool=tool)
        return task.model_copy(update={"status": "executed", "toolgate": []})
    gate = [f"{tool}: {r}" for c in turn.calls[calls_before:] for r in c.rejected] or [f"{tool}: {r}" for r in reasons]
    # A live world (a user's functions, an MCP server) cannot be copied: a call that ran has happened, so after one the
    # task halts rather than calling a second tool (a precondition's refusal ran nothing, and may try the next).
    ran_live = getattr(turn.env, "live", False) and any(c.result is not None for c in turn.calls[calls_before:])
    if task.candidate + 1 < len(task.candidates) and not ran_live:
        return task.model_copy(update={"status": "trying", "candidate": task.candidate + 1, "toolgate": gate})
    turn.outcome(tid, "tool_failed", tool=tool, reason="; ".join(reasons))
    return task.model_copy(update={"status": "tool_failed", "toolgate": gate})


def execute_call(
    turn: TurnState, task_id: str, purpose: str, tool: str, arguments: dict[str, Any]
) -> tuple[bool, list[str]]:
    """Precondition, the call on a copy of the world, postcondition; only then commit and write S."""
    spec = turn.registry.get(tool)
    if spec is None:  # never execute an unregistered tool
        return False, [f"tool {tool!r} is not registered"]
    if turn.config.cvc:
        pre = toolgate.precondition(spec, arguments, turn.scratchpad)
        if pre:
            turn.calls.append(
                CallRecord(
                    task_id=task_id,
                    purpose=purpose,
                    tool=tool,
                    arguments=arguments,  # type: ignore[arg-type]
                    rejected=["pre: " + e for e in pre],
                    secret=list(spec.secret),
                )
            )
            return False, pre
    result, staged = turn.env.stage(tool, arguments)
    record = CallRecord(
        task_id=task_id, purpose=purpose, tool=tool, arguments=arguments, result=result, secret=list(spec.secret)
    )  # type: ignore[arg-type]
    turn.calls.append(record)
    if turn.config.cvc:
        post = toolgate.postcondition(
            spec, turn.env.tool(tool), arguments, result, staged, strict_output_schema=turn.config.strict_output_schema
        )
        record.warnings = ["post: " + w for w in post.warnings]
        if post:
            record.rejected = ["post: " + e for e in post]
            return False, list(post)
    elif toolgate.is_error(result):
        staged = None  # the tool itself failed: nothing happened in the world
    if staged is not None:
        turn.env.commit(tool, staged)
        record.committed = True
    entries = toolgate.writes(spec, arguments, toolgate.as_result_object(result), turn.config.result_entry_max_chars)
    results = toolgate.result_entries(spec.name, toolgate.as_result_object(result), turn.config.result_entry_max_chars)
    for key, value in entries.items():
        # a result entry keeps its own source: the view budgets result entries apart (KernelConfig.result_view)
        turn.scratchpad.set(
            key, value, f"result:{tool}" if key in results and results[key] == value else f"call:{tool}"
        )
    if record.committed:  # only a committed call's entries are a dependency's result (CVC off writes S all the same)
        turn.commits.append((task_id, tool, entries))
    return True, []


def _run_proposed(turn: TurnState, task_id: str, proposed: ProposedTask) -> None:
    """Execute a retrieval task proposed by check_prerequisites (no further model calls: bounded)."""
    spec = turn.registry.get(proposed.tool_name)
    if spec is None:
        return
    context = {**turn.task_context(task_id), **{k: v for k, v in proposed.parameters.items() if v is not None}}
    arguments = {}
    for name in spec.required:
        found = lookup(name, context, turn.scratchpad)
        if found.source == "missing":
            turn.calls.append(
                CallRecord(
                    task_id=task_id,
                    purpose="retrieval",
                    tool=spec.name,
                    arguments=arguments,
                    rejected=[f"pre: no value for {name!r}"],
                    secret=list(spec.secret),
                )
            )
            return
        arguments[name] = found.value
    for name, value in proposed.parameters.items():
        if name in spec.param_names and name not in arguments and value is not None:
            arguments[name] = value
    execute_call(turn, task_id, "retrieval", spec.name, arguments)


def end_task(task: TaskCursor, turn: TurnState) -> TaskCursor:
    """Every task ends with an outcome; S lost no key during it (INV-S)."""
    if task.task_id not in turn.outcomes:
        turn.outcome(
            task.task_id,
            task.status if task.status not in ("pending", "ready", "trying") else "error",
            reason="ended without an outcome",
        )
    turn.check_monotone(f"task {task.task_id} end")
    return task
