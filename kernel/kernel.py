"""The tool-calling execution kernel (paper Algorithm 2) as a program in the DSL.

The control flow — decompose, cycle detection and ordering, prerequisite
checks with inline retrieval or blocking, function matching, prioritized
parameter lookup, the execution guard and ToolGate pre/postconditions with
candidate fallback — is a tree of DSL operators run by the engine, so every
step is contract-checked, recovered and traced. The mutable run state (the
scratchpad S, the simulated world, the turn's records) lives in a
:class:`TurnState` that the symbolic steps receive as context; SLM steps see
only their pure, typed inputs.

Invariants: INV-S (S only grows: Scratchpad has no delete and is checked at
task boundaries), INV-T (every operator is bounded; the static SLM-call bound
is computed at construction), INV-E (the execution guard: a call is issued
only with every parameter bound), INV-L (Lookup consults tau before S, and a
contract on the lookup step checks the recorded order), INV-R (a failing task
is caught by ForEach(on_item_error="skip"), so only that task is abandoned).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forethought.primitives import (
    Backend,
    Check,
    Conditional,
    Contract,
    Engine,
    Fallback,
    ForEach,
    Iterate,
    Program,
    Recorder,
    Sequence,
    Step,
    Trace,
    symbolic,
)
from forethought.primitives.store import Cache

from . import toolgate
from .environment import Environment
from .registry import Registry
from .scratchpad import Scratchpad
from .specs import (
    CHECK_PREREQUISITES,
    DECOMPOSE,
    GET_ORDER,
    MATCH_FILL,
    MATCH_FUNC,
    CheckPrereqInput,
    CheckPrereqOutput,
    DecomposeInput,
    DecomposeOutput,
    GetOrderInput,
    MatchFillInput,
    MatchFillOutput,
    MatchFuncInput,
    ProposedTask,
    TaskRef,
    ToolBrief,
    UnitTask,
    tool_brief,
)

Status = Literal[
    "pending", "ready", "trying", "blocked", "missing_function", "missing_param", "tool_failed", "executed", "skipped", "error"
]


# ------------------------------------------------------------------ config
@dataclass(frozen=True)
class KernelConfig:
    cvc: bool = True  # contracts, prerequisite checks, ToolGate gates and recovery
    retries: int = 2  # per SLM step, with the violation fed back
    max_tasks: int = 12  # declared fan-out: tasks per turn
    max_prereqs: int = 4  # prerequisites checked per task
    max_candidates: int = 3  # matched tool + declared alternatives tried
    state_view: int = 24  # scratchpad entries shown to primitives (most recent)
    strict_invariants: bool = False  # raise on an invariant violation (tests) instead of recording it
    # Engine-level output-contract checks; None follows ``cvc``. (cvc=True with
    # check_contracts=False isolates the cost of checking, for the benchmark.)
    check_contracts: bool | None = None
    # A model call that raised (server down, timeout, malformed reply) is repeated this
    # often, waiting backend_retry_wait_s, doubling; separate from the contract retries.
    backend_retries: int = 2
    backend_retry_wait_s: float = 0.5


class InvariantError(AssertionError):
    pass


# ------------------------------------------------------------------ records
class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PrereqRecord(_M):
    key: str
    outcome: Literal["met", "not_met", "absent"]
    retrieval: ProposedTask | None = None
    recheck: Literal["met", "not_met"] | None = None
    remediation: ProposedTask | None = None


class BindingRecord(_M):
    value: Any = None
    source: Literal["tau", "S", "fill", "missing"]
    consulted: list[str] = Field(default_factory=list)


class CallRecord(_M):
    task_id: str
    purpose: Literal["task", "retrieval"] = "task"
    tool: str
    arguments: dict[str, Any]
    result: Any = None
    committed: bool = False
    rejected: list[str] = Field(default_factory=list)  # pre/postcondition failures


class TaskOutcome(_M):
    task_id: str
    status: Status
    tool: str | None = None
    reason: str = ""
    remediation: ProposedTask | None = None
    blocked_key: str | None = None
    missing: list[str] = Field(default_factory=list)


class TurnResult(_M):
    index: int
    user: str
    tasks: list[UnitTask] = Field(default_factory=list)
    order: list[str] = Field(default_factory=list)
    matches: dict[str, str | None] = Field(default_factory=dict)
    prerequisites: dict[str, list[PrereqRecord]] = Field(default_factory=dict)
    bindings: dict[str, dict[str, BindingRecord]] = Field(default_factory=dict)
    outcomes: dict[str, TaskOutcome] = Field(default_factory=dict)
    calls: list[CallRecord] = Field(default_factory=list)
    halted: dict[str, Any] | None = None
    # The backend did not answer (after its retries): the turn stopped there; nothing in it
    # after that point was decided by a model.
    backend_error: dict[str, Any] | None = None
    backend_retries: int = 0
    scratchpad: dict[str, Any] = Field(default_factory=dict)
    invariant_violations: list[str] = Field(default_factory=list)
    slm_calls: int = 0

    @property
    def committed_calls(self) -> list[CallRecord]:
        return [c for c in self.calls if c.committed]


# ------------------------------------------------------- program data types
class TurnIn(_M):
    user: str
    config: dict[str, Any] = Field(default_factory=dict)  # configuration C given with this turn


class ScratchpadInit(_M):
    user: str
    written: dict[str, Any] = Field(default_factory=dict)  # S's values for C's keys, read back after the write


class Batches(_M):
    batches: list[GetOrderInput]
    cycle: list[str] | None = None


class MatchBatch(_M):
    items: list[MatchFuncInput]


class TaskCursor(_M):
    task_id: str
    status: Status = "pending"
    candidate: int = 0
    missing: list[str] = Field(default_factory=list)
    lookups: dict[str, list[str]] = Field(default_factory=dict)  # param -> sources consulted, in order
    # ToolGate verdicts of the last execution attempt ("tool: pre|post: reason"), so the trace shows
    # why a call was not committed and the next candidate tried.
    toolgate: list[str] = Field(default_factory=list)


class TaskList(_M):
    tasks: list[TaskCursor]


class PrereqCursor(_M):
    task_id: str
    index: int
    key: str
    outcome: Literal["met", "not_met", "absent", "skipped"] | None = None


class PrereqList(_M):
    prereqs: list[PrereqCursor]


class TurnSummary(_M):
    tasks: int
    executed: int


# --------------------------------------------------------------- run state
@dataclass
class TurnState:
    """The mutable state of one turn, passed to symbolic steps as context."""

    config: KernelConfig
    env: Environment
    S: Scratchpad
    registry: Registry
    briefs: list[ToolBrief]
    user: str
    tau: dict[str, Any]
    index: int = 0
    tasks: dict[str, UnitTask] = field(default_factory=dict)
    layers: list[list[str]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    matches: dict[str, str | None] = field(default_factory=dict)
    prereqs: dict[str, list[PrereqRecord]] = field(default_factory=dict)
    bindings: dict[str, dict[str, BindingRecord]] = field(default_factory=dict)
    outcomes: dict[str, TaskOutcome] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    candidates: dict[str, list[str]] = field(default_factory=dict)
    required: dict[str, list[str]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    current_prereq: PrereqCursor | None = None
    current_task: str | None = None
    cursor: TaskCursor | None = None
    keys_seen: set[str] = field(default_factory=set)

    # -- invariants ---------------------------------------------------------
    def violate(self, msg: str) -> None:
        self.violations.append(msg)
        if self.config.strict_invariants:
            raise InvariantError(msg)

    def check_monotone(self, where: str) -> None:
        keys = self.S.keys()
        lost = self.keys_seen - keys
        if lost:
            self.violate(f"INV-S at {where}: scratchpad keys removed: {sorted(lost)}")
        self.keys_seen = keys

    # -- helpers -------------------------------------------------------------
    def tau_for(self, tid: str) -> dict[str, Any]:
        """Turn context for one task: the values decompose grounded in the request, then the turn's context."""
        task = self.tasks.get(tid)
        out = dict(self.tau)
        if task is not None:
            # A null from decompose means "not stated": it must not hide the context's value (INV-L).
            out.update({k: v for k, v in task.parameters.items() if v is not None})
        return out

    def view(self) -> dict[str, Any]:
        return self.S.view(self.config.state_view)

    def task_ref(self, tid: str, with_tool: bool = False) -> TaskRef:
        t = self.tasks[tid]
        return TaskRef(id=t.id, text=t.text, tool_name=t.tool_name if with_tool else None)

    def outcome(self, tid: str, status: Status, **kw: Any) -> None:
        self.outcomes[tid] = TaskOutcome(task_id=tid, status=status, **kw)


def _lookup(m: str, tau: dict[str, Any], S: Scratchpad) -> BindingRecord:
    """Lookup(m, tau, S): tau first, then S, else missing (INV-L). None counts as unbound."""
    consulted = ["tau"]
    if tau.get(m) is not None:
        return BindingRecord(value=tau[m], source="tau", consulted=consulted)
    consulted.append("S")
    if S.get(m) is not None:
        return BindingRecord(value=S.get(m), source="S", consulted=consulted)
    return BindingRecord(value=None, source="missing", consulted=consulted)


# ---------------------------------------------------------- symbolic steps
def _init_scratchpad(x: TurnIn, st: TurnState) -> ScratchpadInit:
    """Init-Scratchpad: the turn's configuration C goes into S before anything reads it."""
    for k, v in x.config.items():
        st.S.set(k, v, "config")
    return ScratchpadInit(user=x.user, written={k: st.S.get(k) for k in x.config})


def _config_in_s(x: TurnIn, out: ScratchpadInit) -> str | None:
    wrong = [k for k, v in x.config.items() if k not in out.written or out.written[k] != v]
    return f"configuration keys not in S as given: {wrong}" if wrong else None


def _prep_decompose(x: TurnIn, st: TurnState) -> DecomposeInput:
    return DecomposeInput(user=x.user, context=dict(st.tau), state=st.view(), tools=st.briefs)


def _build_graph(x: DecomposeOutput, st: TurnState) -> Batches:
    """BuildDepGraph from the decomposition; CycleDetect; layer for ordering (leaves first)."""
    st.tasks = {}
    if len(x.tasks) > st.config.max_tasks:
        # Never truncate: a dropped task could be another's dependency. The turn halts instead
        # (INV-T), the same way a ForEach halts past its declared fan-out.
        raise ValueError(
            f"the decomposition has {len(x.tasks)} tasks, more than the declared fan-out max_tasks={st.config.max_tasks}"
        )
    for t in x.tasks:
        st.tasks.setdefault(t.id, t)
    ids = list(st.tasks)
    deps = {t: [d for d in st.tasks[t].depends_on if d in st.tasks and d != t] for t in ids}
    done: set[str] = set()
    layers: list[list[str]] = []
    remaining = list(ids)
    while remaining:
        ready = [t for t in remaining if all(d in done for d in deps[t])]
        if not ready:
            break
        layers.append(ready)
        done.update(ready)
        remaining = [t for t in remaining if t not in done]
    cycle = _find_cycle(remaining, deps) if remaining else None
    if cycle and not st.config.cvc:
        layers.append(remaining)  # unchecked: run them in the order given
    st.layers = layers
    batches = [
        GetOrderInput(user=st.user, tasks=[st.task_ref(t) for t in layer]) for layer in layers if len(layer) > 1
    ]
    return Batches(batches=batches, cycle=cycle)


def _find_cycle(nodes: list[str], deps: dict[str, list[str]]) -> list[str]:
    nodes_set = set(nodes)
    for start in nodes:
        path, seen, cur = [start], {start}, start
        while True:
            nxt = next((d for d in deps[cur] if d in nodes_set), None)
            if nxt is None:
                break
            if nxt in seen:
                return path[path.index(nxt):] + [nxt]
            path.append(nxt)
            seen.add(nxt)
            cur = nxt
    return nodes


def _acyclic(x: DecomposeOutput, out: Batches) -> str | None:
    return "dependency cycle: " + " -> ".join(out.cycle) if out.cycle else None


def _merge_order(x: BaseModel, st: TurnState) -> MatchBatch:
    """TopoSort: concatenate the layers, each in the order get_order chose."""
    results = list(getattr(x, "results", []))
    order: list[str] = []
    bi = 0
    for layer in st.layers:
        if len(layer) > 1:
            res = results[bi] if bi < len(results) else None
            bi += 1
            if res is None:  # get_order failed on this batch: keep the decomposition's order
                order.extend(layer)
            elif st.config.cvc:
                order.extend(res.ordered_task_ids)
            else:  # unchecked: consume as-is (unknown ids cannot run)
                order.extend(t for t in res.ordered_task_ids if t in st.tasks)
        else:
            order.extend(layer)
    st.order = order[: st.config.max_tasks]
    uniq = list(dict.fromkeys(st.order))
    return MatchBatch(items=[MatchFuncInput(task=st.task_ref(t), tools=st.briefs) for t in uniq])


def _record_matches(x: BaseModel, st: TurnState) -> TaskList:
    uniq = list(dict.fromkeys(st.order))
    results = list(getattr(x, "results", []))
    for tid, res in zip(uniq, results, strict=False):
        st.matches[tid] = res.tool_name if res is not None else None
    return TaskList(tasks=[TaskCursor(task_id=t) for t in st.order])


def _begin_task(x: TaskCursor, st: TurnState) -> PrereqList:
    st.check_monotone(f"task {x.task_id} start")
    st.current_task = x.task_id
    st.prereqs.setdefault(x.task_id, [])
    st.bindings.setdefault(x.task_id, {})
    if not st.config.cvc:
        return PrereqList(prereqs=[])
    # A task whose dependency did not execute is skipped: it needs that task's result or effect
    # (deleting "the original" after a failed copy must not happen). Independent tasks go on (INV-R).
    failed = [d for d in st.tasks[x.task_id].depends_on if d in st.tasks and st.outcomes.get(d) is not None
              and st.outcomes[d].status != "executed"]
    if failed:
        st.outcome(x.task_id, "skipped", tool=st.tasks[x.task_id].tool_name,
                   reason="depends on " + ", ".join(f"{d} ({st.outcomes[d].status})" for d in failed))
        return PrereqList(prereqs=[])
    hint = st.tasks[x.task_id].tool_name
    spec = st.registry.get(hint)
    keys = [p.key for p in spec.prerequisites][: st.config.max_prereqs] if spec else []
    return PrereqList(prereqs=[PrereqCursor(task_id=x.task_id, index=i, key=k) for i, k in enumerate(keys)])


def _prereq_spec(st: TurnState, p: PrereqCursor):
    spec = st.registry.get(st.tasks[p.task_id].tool_name)
    return next(q for q in spec.prerequisites if q.key == p.key)  # type: ignore[union-attr]


def _check_p(x: PrereqCursor, st: TurnState) -> PrereqCursor:
    if st.outcomes.get(x.task_id) is not None:  # already blocked by an earlier prerequisite
        return x.model_copy(update={"outcome": "skipped"})
    outcome = toolgate.check(_prereq_spec(st, x), st.S)
    st.prereqs[x.task_id].append(PrereqRecord(key=x.key, outcome=outcome))  # type: ignore[arg-type]
    return x.model_copy(update={"outcome": outcome})


def _prep_prereq_slm(x: PrereqCursor, st: TurnState) -> CheckPrereqInput:
    st.current_prereq = x
    p = _prereq_spec(st, x)
    return CheckPrereqInput(
        task=st.task_ref(x.task_id, with_tool=True),
        key=x.key,
        outcome=x.outcome,  # type: ignore[arg-type]
        current=st.S.get(x.key) if x.outcome == "not_met" else None,
        requirement=toolgate.describe(p),
        context=st.tau_for(x.task_id),
        state=st.view(),
        tools=st.briefs,
    )


def _last_prereq(st: TurnState, p: PrereqCursor) -> PrereqRecord:
    return st.prereqs[p.task_id][-1]


def _execute_retrieval(x: CheckPrereqOutput, st: TurnState) -> PrereqCursor:
    """Execute(TaskToCheck(p)); S <- S + {p -> v}; re-check (fires once per key: INV-T)."""
    p = st.current_prereq
    assert p is not None
    rec = _last_prereq(st, p)
    rec.retrieval = x.task
    if x.task is not None:
        _run_proposed(st, p.task_id, x.task)
    if p.key not in st.S:
        st.S.set(p.key, None, "retrieval")  # write even if nothing was retrieved: Absent fires once
    outcome = toolgate.check(_prereq_spec(st, p), st.S)
    rec.recheck = outcome  # type: ignore[assignment]
    return p.model_copy(update={"outcome": outcome})


def _retrieval_failed(x: PrereqCursor, st: TurnState) -> PrereqCursor:
    rec = _last_prereq(st, x)
    if x.key not in st.S:
        st.S.set(x.key, None, "retrieval")
    outcome = toolgate.check(_prereq_spec(st, x), st.S)
    rec.recheck = outcome  # type: ignore[assignment]
    return x.model_copy(update={"outcome": outcome})


def _emit_blocked(x: CheckPrereqOutput, st: TurnState) -> PrereqCursor:
    p = st.current_prereq
    assert p is not None
    rec = _last_prereq(st, p)
    rec.remediation = x.task
    st.outcome(
        p.task_id,
        "blocked",
        tool=st.tasks[p.task_id].tool_name,
        reason=f"prerequisite {p.key!r} not met",
        remediation=x.task,
        blocked_key=p.key,
    )
    return p.model_copy(update={"outcome": "not_met"})


def _block_without_remedy(x: PrereqCursor, st: TurnState) -> PrereqCursor:
    st.outcome(
        x.task_id,
        "blocked",
        tool=st.tasks[x.task_id].tool_name,
        reason=f"prerequisite {x.key!r} not met; no remediation could be proposed",
        blocked_key=x.key,
    )
    return x


def _after_prereqs(x: BaseModel, st: TurnState) -> TaskCursor:
    tid = st.current_task
    assert tid is not None
    done = st.outcomes.get(tid)  # blocked by a prerequisite, or skipped
    return TaskCursor(task_id=tid, status=done.status if done is not None else "ready")


def _resolve_function(x: TaskCursor, st: TurnState) -> TaskCursor:
    f = st.matches.get(x.task_id)
    if f is None or f not in st.registry:
        why = "no registry tool matches this task" if f is None else f"matched tool {f!r} is not registered"
        st.outcome(x.task_id, "missing_function", reason=why)
        return x.model_copy(update={"status": "missing_function"})
    cands = [f]
    if st.config.cvc:
        cands += [a for a in st.registry[f].alternatives if a in st.registry and a != f]
    st.candidates[x.task_id] = cands[: st.config.max_candidates]
    return x.model_copy(update={"status": "trying", "candidate": 0})


def _lookup_params(x: TaskCursor, st: TurnState) -> TaskCursor:
    """M <- Params(f); for each m: Lookup(m, tau, S) (INV-L)."""
    f = st.candidates[x.task_id][x.candidate]
    spec = st.registry[f]
    task = st.tasks[x.task_id]
    tau = st.tau_for(x.task_id)
    # Required parameters, plus optional ones the decomposition stated explicitly.
    M = list(spec.required) + [p for p in spec.param_names if p not in spec.required and task.parameters.get(p) is not None]
    if not st.config.cvc:  # unchecked: whatever decompose produced is passed on, plus lookups for required ones
        M += [p for p in task.parameters if p not in M]
    st.required[x.task_id] = M
    b: dict[str, BindingRecord] = {}
    for m in M:
        b[m] = _lookup(m, tau, st.S)
    st.bindings[x.task_id] = b
    missing = [m for m, r in b.items() if r.source == "missing"]
    st.cursor = x.model_copy(update={"missing": missing, "lookups": {m: r.consulted for m, r in b.items()}})
    return st.cursor


def _tau_first(x: TaskCursor, out: TaskCursor) -> str | None:
    """INV-L as a contract on the lookup step: every lookup consulted tau before S."""
    bad = {m: c for m, c in out.lookups.items() if c[:1] != ["tau"]}
    return f"tau was not consulted first for {bad}" if bad else None


def _prep_fill(x: TaskCursor, st: TurnState) -> MatchFillInput:
    f = st.candidates[x.task_id][x.candidate]
    st.cursor = x
    b = st.bindings[x.task_id]
    return MatchFillInput(
        task=st.task_ref(x.task_id, with_tool=True),
        tool=st.registry.derived("brief_map", lambda r: {t.name: tool_brief(t) for t in r})[f],
        missing=list(x.missing),
        bound={m: r.value for m, r in b.items() if r.source != "missing"},
        context=st.tau_for(x.task_id),
        state=st.view(),
    )


def _apply_fill(x: MatchFillOutput, st: TurnState) -> TaskCursor:
    assert st.cursor is not None
    tid = st.cursor.task_id
    b = st.bindings[tid]
    still = []
    for m, r in list(b.items()):
        if r.source != "missing":
            continue
        v = x.values.get(m)
        b[m] = BindingRecord(value=v, source="fill" if v is not None else "missing", consulted=r.consulted + ["fill"])
        st.S.set(m, v, "fill")  # written even if unbound (Algorithm 2, INV-S)
        if v is None:
            still.append(m)
    return st.cursor.model_copy(update={"missing": still})


def _fill_failed(x: TaskCursor, st: TurnState) -> TaskCursor:
    b = st.bindings[x.task_id]
    for m in x.missing:
        b[m] = BindingRecord(value=None, source="missing", consulted=b[m].consulted + ["fill"])
    return x


def _guard_execute(x: TaskCursor, st: TurnState) -> TaskCursor:
    """Execute(f, B) iff dom(B) = M (INV-E), through the ToolGate pre/postconditions."""
    tid = x.task_id
    cands = st.candidates[tid]
    f = cands[x.candidate]
    st.registry[f]
    b = st.bindings[tid]
    M = st.required[tid]
    unbound = [m for m in M if b.get(m) is None or b[m].source == "missing"]
    if unbound and st.config.cvc:
        st.outcome(tid, "missing_param", tool=f, reason=f"no value for {unbound}", missing=unbound)
        return x.model_copy(update={"status": "missing_param"})
    args = {m: b[m].value for m in M if m in b and b[m].source != "missing"}
    if st.config.cvc and set(args) != set(M):
        st.violate(f"INV-E: {f} would execute with {sorted(args)} but needs {sorted(M)}")
        st.outcome(tid, "missing_param", tool=f, reason="execution guard", missing=sorted(set(M) - set(args)))
        return x.model_copy(update={"status": "missing_param"})
    n_calls = len(st.calls)
    ok, reasons = _execute(st, tid, "task", f, args)
    if ok:
        st.outcome(tid, "executed", tool=f)
        return x.model_copy(update={"status": "executed", "toolgate": []})
    gate = [f"{f}: {r}" for c in st.calls[n_calls:] for r in c.rejected] or [f"{f}: {r}" for r in reasons]
    if x.candidate + 1 < len(cands):
        return x.model_copy(update={"status": "trying", "candidate": x.candidate + 1, "toolgate": gate})
    st.outcome(tid, "tool_failed", tool=f, reason="; ".join(reasons))
    return x.model_copy(update={"status": "tool_failed", "toolgate": gate})


def _execute(st: TurnState, tid: str, purpose: str, f: str, args: dict[str, Any]) -> tuple[bool, list[str]]:
    spec = st.registry.get(f)
    if spec is None:  # never execute an unregistered tool
        return False, [f"tool {f!r} is not registered"]
    if st.config.cvc:
        pre = toolgate.precondition(spec, args, st.S)
        if pre:
            st.calls.append(CallRecord(task_id=tid, purpose=purpose, tool=f, arguments=args, rejected=["pre: " + e for e in pre]))  # type: ignore[arg-type]
            return False, pre
    result, staged = st.env.stage(f, args)
    rec = CallRecord(task_id=tid, purpose=purpose, tool=f, arguments=args, result=result)  # type: ignore[arg-type]
    st.calls.append(rec)
    if st.config.cvc:
        post = toolgate.postcondition(spec, st.env.tool(f), args, result, staged)
        if post:
            rec.rejected = ["post: " + e for e in post]
            return False, post
    elif isinstance(result, dict) and "error" in result:
        staged = None  # the tool itself failed: nothing happened in the world
    if staged is not None:
        st.env.commit(f, staged)
        rec.committed = True
    res = result if isinstance(result, dict) else {}
    for k, v in toolgate.writes(spec, args, res).items():
        st.S.set(k, v, f"call:{f}")
    return True, []


def _run_proposed(st: TurnState, tid: str, task: ProposedTask) -> None:
    """Execute a retrieval task proposed by check_prerequisites (no further model calls: bounded)."""
    spec = st.registry.get(task.tool_name)
    if spec is None:
        return
    tau = {**st.tau_for(tid), **{k: v for k, v in task.parameters.items() if v is not None}}
    args = {}
    for m in spec.required:
        r = _lookup(m, tau, st.S)
        if r.source == "missing":
            st.calls.append(CallRecord(task_id=tid, purpose="retrieval", tool=spec.name, arguments=args, rejected=[f"pre: no value for {m!r}"]))
            return
        args[m] = r.value
    for m, v in task.parameters.items():
        if m in spec.param_names and m not in args and v is not None:
            args[m] = v
    _execute(st, tid, "retrieval", spec.name, args)


def _end_task(x: TaskCursor, st: TurnState) -> TaskCursor:
    if x.task_id not in st.outcomes:
        st.outcome(x.task_id, x.status if x.status not in ("pending", "ready", "trying") else "error", reason="ended without an outcome")
    st.check_monotone(f"task {x.task_id} end")
    return x


def _finish(x: BaseModel, st: TurnState) -> TurnSummary:
    errors = list(getattr(x, "errors", []))
    for cur, err in zip(st.order, errors, strict=False):
        if err is not None and cur not in st.outcomes:
            st.outcome(cur, "error", reason=err)
    st.check_monotone("turn end")
    missing = [t for t in dict.fromkeys(st.order) if t not in st.outcomes]
    if missing:
        st.violate(f"INV-R: tasks without an outcome: {missing}")
    return TurnSummary(tasks=len(st.order), executed=sum(o.status == "executed" for o in st.outcomes.values()))


# ----------------------------------------------------------------- program
def _sym(name: str, fn: Callable[..., Any], i: type[BaseModel], o: type[BaseModel], contract: Contract | None = None, pure: bool = False):
    return symbolic(name, fn, i, o, contract if contract is not None else Contract(), uses_context=True, pure=pure)


def _identity(name: str, t: type[BaseModel]):
    return symbolic(name, lambda x: x, t, t, Contract())


def build_program(cfg: KernelConfig) -> Program:
    R = cfg.retries
    slm_prims = {s.name: s.primitive() for s in (DECOMPOSE, GET_ORDER, CHECK_PREREQUISITES, MATCH_FUNC, MATCH_FILL)}
    keep_p = _identity("keep_prerequisite", PrereqCursor)
    keep_t = _identity("keep_task", TaskCursor)

    def slm_step(spec, label=None):
        return Step(slm_prims[spec.name], retries=R, label=label or spec.name)

    # Cycle detection is symbolic: a cyclic graph halts the turn (INV-T).
    build_graph = _sym("build_dep_graph", _build_graph, DecomposeOutput, Batches, Contract(value=[Check("acyclic", "value", _acyclic)]))

    prereq_program = Sequence(
        Step(_sym("check_prerequisite", _check_p, PrereqCursor, PrereqCursor)),
        Conditional(
            when=lambda c: c.outcome == "absent",
            then=Fallback(
                Sequence(
                    Step(_sym("prepare_retrieval", _prep_prereq_slm, PrereqCursor, CheckPrereqInput)),
                    slm_step(CHECK_PREREQUISITES, "task_to_check"),
                    Step(_sym("execute_retrieval", _execute_retrieval, CheckPrereqOutput, PrereqCursor)),
                    label="retrieve",
                ),
                Step(_sym("retrieval_failed", _retrieval_failed, PrereqCursor, PrereqCursor)),
                label="absent",
            ),
            otherwise=Step(keep_p),
            label="if_absent",
        ),
        Conditional(
            when=lambda c: c.outcome == "not_met",
            then=Fallback(
                Sequence(
                    Step(_sym("prepare_remediation", _prep_prereq_slm, PrereqCursor, CheckPrereqInput)),
                    slm_step(CHECK_PREREQUISITES, "task_to_meet"),
                    Step(_sym("emit_blocked", _emit_blocked, CheckPrereqOutput, PrereqCursor)),
                    label="remediate",
                ),
                Step(_sym("block_without_remedy", _block_without_remedy, PrereqCursor, PrereqCursor)),
                label="not_met",
            ),
            otherwise=Step(keep_p),
            label="if_not_met",
        ),
        label="prerequisite",
    )

    lookup = _sym("lookup_params", _lookup_params, TaskCursor, TaskCursor, Contract(value=[Check("tau_before_S", "value", _tau_first)]))
    candidate_program = Sequence(
        Step(lookup),
        Conditional(
            when=lambda c: bool(c.missing),
            then=Fallback(
                Sequence(
                    Step(_sym("prepare_fill", _prep_fill, TaskCursor, MatchFillInput)),
                    slm_step(MATCH_FILL, "task_to_get"),
                    Step(_sym("apply_fill", _apply_fill, MatchFillOutput, TaskCursor)),
                    label="fill",
                ),
                Step(_sym("fill_failed", _fill_failed, TaskCursor, TaskCursor)),
                label="missing_values",
            ),
            otherwise=Step(keep_t, label="all_bound"),
            label="if_missing",
        ),
        Step(_sym("guard_execute", _guard_execute, TaskCursor, TaskCursor)),
        label="candidate",
    )
    match_program = Sequence(
        Step(_sym("resolve_function", _resolve_function, TaskCursor, TaskCursor)),
        Conditional(
            when=lambda c: c.status == "trying",
            then=Iterate(candidate_program, until=lambda c: c.status != "trying", max_iters=cfg.max_candidates, label="candidates"),
            otherwise=Step(keep_t, label="no_function"),
            label="if_matched",
        ),
        label="match_and_execute",
    )
    prereqs = ForEach(prereq_program, over="prereqs", max_items=cfg.max_prereqs, label="check_prerequisites")
    task_program = Sequence(
        Step(_sym("begin_task", _begin_task, TaskCursor, PrereqList)),
        prereqs,
        Step(_sym("after_prerequisites", _after_prereqs, prereqs.output_type, TaskCursor)),
        Conditional(
            when=lambda c: c.status == "ready",
            then=match_program,
            otherwise=Step(keep_t, label="not_ready"),
            label="if_ready",
        ),
        Step(_sym("end_task", _end_task, TaskCursor, TaskCursor)),
        label="task",
    )
    get_order = ForEach(slm_step(GET_ORDER), over="batches", max_items=cfg.max_tasks, on_item_error="skip", label="get_order")
    match_func = ForEach(slm_step(MATCH_FUNC), over="items", max_items=cfg.max_tasks, on_item_error="skip", label="match_func")
    tasks = ForEach(task_program, over="tasks", max_items=cfg.max_tasks, on_item_error="skip", label="tasks")
    root = Sequence(
        Step(_sym("init_scratchpad", _init_scratchpad, TurnIn, ScratchpadInit, Contract(value=[Check("config_in_S", "value", _config_in_s)]))),
        Step(_sym("init_decompose", _prep_decompose, TurnIn, DecomposeInput, pure=False)),
        slm_step(DECOMPOSE, "decompose"),
        Step(build_graph),
        get_order,
        Step(_sym("topo_sort", _merge_order, get_order.output_type, MatchBatch)),
        match_func,
        Step(_sym("record_matches", _record_matches, match_func.output_type, TaskList)),
        tasks,
        Step(_sym("finish", _finish, tasks.output_type, TurnSummary)),
        label="kernel",
    )
    return Program(root, name="tool_calling_kernel")


# ------------------------------------------------------------------ kernel
@dataclass
class ScenarioResult:
    solution_id: str
    turns: list[TurnResult]
    traces: list[Trace]
    final_state: dict[str, Any]


class Kernel:
    """Builds the kernel program once; runs turns and scenarios with a backend."""

    def __init__(self, config: KernelConfig | None = None):
        self.config = config or KernelConfig()
        self.program = build_program(self.config)

    def run_turn(
        self,
        *,
        user: str,
        env: Environment,
        scratchpad: Scratchpad,
        registry: Registry,
        backend: Backend,
        context: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        index: int = 0,
        trace: str = "full",
        recorder: Recorder | None = None,
        cache: Cache | None = None,
    ) -> tuple[TurnResult, Trace]:
        st = TurnState(
            config=self.config,
            env=env,
            S=scratchpad,
            registry=registry,
            briefs=registry.derived("briefs", lambda r: [tool_brief(t) for t in r]),
            user=user,
            tau=dict(context or {}),
            index=index,
        )
        st.keys_seen = scratchpad.keys()
        checks = self.config.cvc if self.config.check_contracts is None else self.config.check_contracts
        engine = Engine(backend, check_contracts=checks, trace=trace, recorder=recorder, cache=cache,  # type: ignore[arg-type]
                        backend_retries=self.config.backend_retries, backend_retry_wait_s=self.config.backend_retry_wait_s)
        run = engine.run(self.program, TurnIn(user=user, config=dict(config or {})), context=st, run_id=f"turn{index}")
        halted = run.error.to_dict() if run.error is not None else None
        backend_error = run.backend_error.to_dict() if run.backend_error is not None else None
        if halted is not None or backend_error is not None:
            st.check_monotone("halt")
        res = TurnResult(
            index=index,
            user=user,
            tasks=list(st.tasks.values()),
            order=st.order,
            matches=st.matches,
            prerequisites=st.prereqs,
            bindings=st.bindings,
            outcomes=st.outcomes,
            calls=st.calls,
            halted=halted,
            scratchpad=scratchpad.snapshot(),
            invariant_violations=st.violations,
            slm_calls=run.slm_calls,
            backend_error=backend_error,
            backend_retries=run.backend_retries,
        )
        return res, run.trace
