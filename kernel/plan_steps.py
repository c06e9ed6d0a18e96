"""The kernel's turn-level symbolic steps: configuration, decomposition, ordering, matching, finish.

Paper Algorithm 2 lines 1–9 (SP1 Decompose, SP2 Init-Scratchpad, SP3 Get-Order) and the match of
line 25, which the kernel runs for every task of the turn in one batch before the task loop (it
depends only on the task's text and the registry). Each function is one step of the program in
``kernel/program.py`` and has that step's name; it receives the step's typed input and the
:class:`~forethought.kernel.records.TurnState` (see there for what the turn context holds and why).
"""

from __future__ import annotations

from pydantic import BaseModel

from . import unfinished
from .records import Batches, MatchBatch, ScratchpadInit, TaskCursor, TaskList, TurnIn, TurnState, TurnSummary
from .specs import MATCH_FUNC, DecomposeInput, DecomposeOutput, GetOrderInput, MatchFuncInput


def init_scratchpad(turn_in: TurnIn, turn: TurnState) -> ScratchpadInit:
    """Init-Scratchpad (line 5): the turn's configuration C goes into S before anything reads it."""
    for key, value in turn_in.config.items():
        turn.scratchpad.set(key, value, "config")
    return ScratchpadInit(user=turn_in.user, written={key: turn.scratchpad.get(key) for key in turn_in.config})


def config_in_scratchpad(turn_in: TurnIn, written: ScratchpadInit) -> str | None:
    """Contract "config_in_S" on init_scratchpad: every configuration value reads back from S as given."""
    wrong = [k for k, v in turn_in.config.items() if k not in written.written or written.written[k] != v]
    return f"configuration keys not in S as given: {wrong}" if wrong else None


def init_decompose(turn_in: TurnIn, turn: TurnState) -> DecomposeInput:
    """Register(Ω) (line 3): decompose sees the request, τ, the scratchpad view and the tool briefs."""
    turn.decompose_state = turn.scratchpad.snapshot()
    return DecomposeInput(user=turn_in.user, context=dict(turn.turn_context), state=turn.view(), tools=turn.tool_briefs)


def build_dep_graph(decomposition: DecomposeOutput, turn: TurnState) -> Batches:
    """BuildDepGraph (line 7) from the decomposition; CycleDetect (line 8); layers for ordering, leaves first."""
    turn.tasks = {}
    if len(decomposition.tasks) > turn.config.max_tasks:
        # Never truncate: a dropped task could be another's dependency. The turn halts instead
        # (INV-T), the same way a ForEach halts past its declared fan-out.
        raise ValueError(
            f"the decomposition has {len(decomposition.tasks)} tasks, more than the declared fan-out max_tasks={turn.config.max_tasks}"
        )
    for task in decomposition.tasks:
        turn.tasks.setdefault(task.id, task)
    ids = list(turn.tasks)
    depends = {t: [d for d in turn.tasks[t].depends_on if d in turn.tasks and d != t] for t in ids}
    layers, remaining = dependency_layers(ids, depends)
    cycle = find_cycle(remaining, depends) if remaining else None
    if cycle and not turn.config.cvc:
        layers.append(remaining)  # unchecked: run them in the order given
    turn.layers = layers
    batches = [
        GetOrderInput(user=turn.user, tasks=[turn.task_ref(t) for t in layer]) for layer in layers if len(layer) > 1
    ]
    return Batches(batches=batches, cycle=cycle)


def dependency_layers(ids: list[str], depends: dict[str, list[str]]) -> tuple[list[list[str]], list[str]]:
    """(layers, the tasks no layer could take): a task comes in the first layer after all its dependencies, in the
    order of ``ids``; what a cycle blocks is left over. data_gen's verify forms a solution's layers with it too."""
    done: set[str] = set()
    layers: list[list[str]] = []
    remaining = list(ids)
    while remaining:
        ready = [t for t in remaining if all(d in done for d in depends[t])]
        if not ready:
            break
        layers.append(ready)
        done.update(ready)
        remaining = [t for t in remaining if t not in done]
    return layers, remaining


def find_cycle(nodes: list[str], depends: dict[str, list[str]]) -> list[str]:
    """A dependency cycle among ``nodes`` (the tasks no layer could take), for the halt message."""
    node_set = set(nodes)
    for start in nodes:
        path, seen, current = [start], {start}, start
        while True:
            following = next((d for d in depends[current] if d in node_set), None)
            if following is None:
                break
            if following in seen:
                return path[path.index(following) :] + [following]
            path.append(following)
            seen.add(following)
            current = following
    return nodes


def acyclic(decomposition: DecomposeOutput, batches: Batches) -> str | None:
    """Contract "acyclic" on build_dep_graph: a cycle halts the turn (line 8, INV-T)."""
    return "dependency cycle: " + " -> ".join(batches.cycle) if batches.cycle else None


def topo_sort(ordered: BaseModel, turn: TurnState) -> MatchBatch:
    """TopoSort (line 9): concatenate the layers, each in the order get_order chose."""
    results = list(getattr(ordered, "results", []))
    order: list[str] = []
    batch = 0
    for layer in turn.layers:
        if len(layer) > 1:
            answer = results[batch] if batch < len(results) else None
            batch += 1
            if answer is None:  # get_order failed on this batch: keep the decomposition's order
                order.extend(layer)
            elif turn.config.cvc:
                order.extend(answer.ordered_task_ids)
            else:  # unchecked: consume as-is (unknown ids cannot run)
                order.extend(t for t in answer.ordered_task_ids if t in turn.tasks)
        else:
            order.extend(layer)
    turn.order = order[: turn.config.max_tasks]
    unique = list(dict.fromkeys(turn.order))
    # each input with the train decisions nearest to its task when the bundle carries a store (as generate wrote them)
    return MatchBatch(
        items=[MATCH_FUNC.demonstrated(MatchFuncInput(task=turn.task_ref(t), tools=turn.tool_briefs)) for t in unique]
    )


def record_matches(matched: BaseModel, turn: TurnState) -> TaskList:
    """MatchFunc's answers (line 25), one per distinct task; each task cursor carries its match."""
    unique = list(dict.fromkeys(turn.order))
    results = list(getattr(matched, "results", []))
    for task_id, answer in zip(unique, results, strict=False):
        turn.matches[task_id] = answer.tool_name if answer is not None else None
    return TaskList(
        tasks=[
            TaskCursor(task_id=t, matched_tool=turn.matches.get(t), fan_out=turn.tasks[t].for_each is not None)
            for t in turn.order
        ]
    )


def finish(done: BaseModel, turn: TurnState) -> TurnSummary:
    """Every ordered task has an outcome (INV-R); S lost no key over the turn (INV-S)."""
    errors = list(getattr(done, "errors", []))
    for task_id, error in zip(turn.order, errors, strict=False):
        if error is not None and task_id not in turn.outcomes:
            turn.outcome(task_id, "error", reason=error)
    unfinished.record(
        turn
    )  # blocked and missing_param tasks leave their memory in S (docs/kernel.md, "Unfinished tasks")
    turn.check_monotone("turn end")
    missing = [t for t in dict.fromkeys(turn.order) if t not in turn.outcomes]
    if missing:
        turn.violate(f"INV-R: tasks without an outcome: {missing}")
    return TurnSummary(tasks=len(turn.order), executed=sum(o.status == "executed" for o in turn.outcomes.values()))
