"""The kernel's data: its configuration, the records a turn produces, the values its steps pass on,
and the turn context the symbolic steps share.

Three kinds of models live here:

- **Records** (``PrereqRecord``, ``BindingRecord``, ``CallRecord``, ``TaskOutcome``, ``TurnResult``):
  what a turn decided and did. They are what callers, the trace view and the tests read. Every answer an SLM
  primitive gave is also in ``TurnResult.decisions``, per primitive: the map the trace views show any
  registered primitive's decisions from.
- **Step values** (``TurnIn`` … ``TurnSummary``): the typed inputs and outputs of the program's
  symbolic steps (``kernel/plan_steps.py``, ``kernel/task_steps.py``), checked at every composition
  edge by the DSL and recorded in the trace.
- **The turn context** (:class:`TurnState`): the services of one turn and the records under construction;
  see its docstring for what lives there and why.

The paper's symbols are named in comments where a field implements one: S the scratchpad, τ the
turn context, Ω the registry, C the configuration, M = Params(f) the parameters a tool needs,
B the bindings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forethought.primitives import Trace

from .environment import Environment
from .registry import Registry
from .scratchpad import Scratchpad
from .specs import (
    MAX_TASKS,
    GetOrderInput,
    MatchFuncInput,
    PrimitiveSpec,
    ProposedTask,
    TaskRef,
    ToolBrief,
    UnitTask,
)
from .toolgate import RESULT_ENTRY_MAX_CHARS

# The primitives whose decisions the trace views (kernel/trace_html.py, the bench's responder) show from TurnResult's
# own records of them, which say more than the answers: decompose's task graph (tasks), get_order's order,
# check_prerequisites' outcome and recheck per key (prerequisites), match_fill's source of every parameter
# (bindings). Every other primitive's decisions, a new primitive's included, are shown from TurnResult.decisions.
DETAILED_VIEWS = ("decompose", "get_order", "check_prerequisites", "match_fill")

Status = Literal[
    "pending",
    "ready",
    "trying",
    "blocked",
    "missing_function",
    "missing_param",
    "tool_failed",
    "executed",
    "skipped",
    "error",
    "skipped_condition",
    "partial",  # a conditional task whose predicate is false; a fan-out task not every element of which ran
]


# ------------------------------------------------------------------ config
@dataclass(frozen=True)
class KernelConfig:
    cvc: bool = True  # contracts, prerequisite checks, ToolGate gates and recovery
    retries: int = 2  # per SLM step, with the violation fed back
    max_tasks: int = MAX_TASKS  # declared fan-out: tasks per turn (also bounds decompose's decoding schema)
    max_prereqs: int = 4  # prerequisites checked per task
    max_candidates: int = 3  # matched tool + declared alternatives tried
    # Instances of one fan-out task (decompose's for_each): the elements beyond it are reported, not run (INV-T).
    max_fanout: int = 8
    state_view: int = 24  # scratchpad entries shown to primitives (most recent)
    # A result field whose JSON is longer than this enters S as a truncation marker (a preview that is
    # never bound as an argument): a long_context result must not flood every prompt's state view.
    result_entry_max_chars: int = RESULT_ENTRY_MAX_CHARS
    result_view: int = 16  # result entries ("<tool>.<field>") shown to primitives besides state_view's (most recent)
    strict_invariants: bool = False  # raise on an invariant violation (tests) instead of recording it
    # Engine-level output-contract checks; None follows ``cvc``. (cvc=True with
    # check_contracts=False isolates the cost of checking, for the benchmark.)
    check_contracts: bool | None = None
    # A model call that raised (server down, timeout, malformed reply) is repeated this
    # often, waiting backend_retry_wait_s, doubling; separate from the contract retries.
    backend_retries: int = 2
    backend_retry_wait_s: float = 0.5
    # Imported registries (OpenAI, MCP, BFCL): an output-schema mismatch rejects the call instead of
    # being recorded as a warning. Our own domains' schemas are always enforced.
    strict_output_schema: bool = False


class InvariantError(AssertionError):
    pass


# ------------------------------------------------------------------ records
class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PrereqRecord(_Model):
    key: str
    outcome: Literal["met", "not_met", "absent"]
    retrieval: ProposedTask | None = None
    recheck: Literal["met", "not_met"] | None = None
    remediation: ProposedTask | None = None


class BindingRecord(_Model):
    value: Any = None
    # Where the value came from: "request" (the task's parameters, then the turn's context: τ), "scratchpad" (S),
    # "fill" (match_fill).
    # These strings are data (the trace view colours by them), so they keep the paper's letters.
    source: Literal["request", "scratchpad", "fill", "missing"]
    consulted: list[str] = Field(default_factory=list)
    # For a parameter left missing by same-turn binding (docs/kernel.md, "Same-turn binding"): the entry
    # that made it so, a dependency's result field "<tool>.<field>", or the parameter's own key when S's
    # value there is the same tool's earlier argument. match_fill then proposes the value.
    shadowed_by: str | None = None
    # For a value bound from an entry of S other than the parameter's own key: the entry, "unfinished.<tool>"
    # (an earlier turn's unfinished task of the same tool; docs/kernel.md, "Unfinished tasks").
    entry: str | None = None


class CallRecord(_Model):
    task_id: str
    purpose: Literal["task", "retrieval"] = "task"
    tool: str
    arguments: dict[str, Any]
    result: Any = None
    committed: bool = False
    rejected: list[str] = Field(default_factory=list)  # pre/postcondition failures
    # postcondition findings that did not block the commit (an imported registry's output schema)
    warnings: list[str] = Field(default_factory=list)
    # the tool's secret parameters (ToolSpec.secret): their values are masked in every file a run writes
    # (kernel/secret_arguments.py); the record itself keeps them, since verify compares the real calls
    secret: list[str] = Field(default_factory=list)


class TaskOutcome(_Model):
    task_id: str
    status: Status
    tool: str | None = None
    reason: str = ""
    remediation: ProposedTask | None = None
    blocked_key: str | None = None
    missing: list[str] = Field(default_factory=list)
    # A conditional task (decompose's `when`): the predicate's verdict right before it ran, and S's value it tested.
    condition: bool | None = None
    condition_value: Any = None
    # A fan-out task (decompose's `for_each`): the elements it applies to (after the filter), the ids of the instances
    # run for them (in order, each with its own outcome), and the elements beyond KernelConfig.max_fanout, not run.
    elements: list[Any] | None = None
    instances: list[str] = Field(default_factory=list)
    beyond_bound: list[Any] = Field(default_factory=list)


class TurnResult(_Model):
    index: int
    user: str
    tasks: list[UnitTask] = Field(default_factory=list)
    # The instances of fan-out tasks (ids "<task>[k]"), each with its τ: the task's parameters plus the element.
    instances: list[UnitTask] = Field(default_factory=list)
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
    # Every answer an SLM primitive's step accepted this turn: primitive -> decision key -> the output as JSON, in the
    # order they were made. The key is the task the decision is about (the input's task id; check_prerequisites adds
    # the key and outcome: "t2 ticket_status[3] absent"; get_order the batch's ids), else "turn"; a key asked twice
    # (a task's second candidate tool) keeps both, the later as "<key> #2". Filled for any registered primitive
    # whose step runs (kernel/specs/decisions.py); the fields above are the kernel's own records of the five.
    decisions: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)

    @property
    def committed_calls(self) -> list[CallRecord]:
        return [c for c in self.calls if c.committed]


@dataclass
class ScenarioResult:
    solution_id: str
    turns: list[TurnResult]
    traces: list[Trace]
    final_state: dict[str, Any]


# ------------------------------------------------------------- step values
class TurnIn(_Model):
    user: str
    config: dict[str, Any] = Field(default_factory=dict)  # configuration C given with this turn


class ScratchpadInit(_Model):
    user: str
    written: dict[str, Any] = Field(default_factory=dict)  # S's values for C's keys, read back after the write


class Batches(_Model):
    batches: list[GetOrderInput]
    cycle: list[str] | None = None


class MatchBatch(_Model):
    items: list[MatchFuncInput]


class TaskCursor(_Model):
    """One task on its way through prerequisites, matching and execution."""

    task_id: str
    status: Status = "pending"
    matched_tool: str | None = None  # match_func's answer for this task (None: no tool matches)
    candidates: list[str] = Field(default_factory=list)  # the matched tool, then its declared alternatives
    candidate: int = 0  # index into candidates: the tool being tried
    parameters: list[str] = Field(default_factory=list)  # M = Params(f) of the tool being tried
    bindings: dict[str, BindingRecord] = Field(default_factory=dict)  # B: a value (or "missing") per parameter
    missing: list[str] = Field(default_factory=list)
    lookups: dict[str, list[str]] = Field(default_factory=dict)  # param -> sources consulted, in order
    # ToolGate verdicts of the last execution attempt ("tool: pre|post: reason"), so the trace shows
    # why a call was not committed and the next candidate tried.
    toolgate: list[str] = Field(default_factory=list)
    fan_out: bool = False  # decompose gave the task a for_each: it runs as one instance per element


class TaskList(_Model):
    tasks: list[TaskCursor]


class PrereqCursor(_Model):
    task_id: str
    index: int
    key: str
    outcome: Literal["met", "not_met", "absent", "skipped"] | None = None


class PrereqList(_Model):
    prereqs: list[PrereqCursor]


class TurnSummary(_Model):
    tasks: int
    executed: int


# ------------------------------------------------------------ turn context
@dataclass
class TurnState:
    """What the symbolic steps of one turn share (the engine passes it to every step as context).

    Per-task values flow through the steps' inputs and outputs (:class:`TaskCursor`,
    :class:`PrereqCursor`). What lives here, and why:

    - **services**: the configuration, the environment, the scratchpad S, the registry Ω and its tool
      briefs, the user's request and the turn context τ. Every step may use them; S and the world
      are the state the paper's algorithm updates.
    - **the turn's plan**: the tasks decompose produced, the dependency layers and the order. The
      steps after the ``get_order`` and ``match_func`` batches receive only the batches' results,
      so the layers and order those results belong to are kept here.
    - **records**: what the turn decided and did (matches, prerequisite records, bindings, outcomes,
      calls, invariant violations), written as the steps go so that a turn that halts half-way still
      reports everything up to that point. Steps read records back only for decisions across tasks
      or prerequisites: a task's dependencies' outcomes, and whether an earlier prerequisite already
      blocked the task.
    - **cursors held across a step whose output cannot carry them**: an SLM step's input and output
      are fixed by its spec (they are the model's prompt and answer), so the cursor before it is
      kept in ``pending_prerequisite`` / ``pending_task`` for the step after it; a ForEach returns
      only its items' results, so the task cursor before the prerequisite loop is kept in
      ``current_task``.
    - **the INV-S monitor**: the scratchpad keys seen at the last task boundary.
    """

    config: KernelConfig
    env: Environment
    scratchpad: Scratchpad  # S
    registry: Registry  # Ω
    tool_briefs: list[ToolBrief]  # Register(Ω): what the primitives are shown of each tool
    user: str  # the request ι
    turn_context: dict[str, Any]  # τ
    index: int = 0
    # the turn's plan
    tasks: dict[str, UnitTask] = field(default_factory=dict)
    layers: list[list[str]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    # records
    matches: dict[str, str | None] = field(default_factory=dict)
    prerequisites: dict[str, list[PrereqRecord]] = field(default_factory=dict)
    bindings: dict[str, dict[str, BindingRecord]] = field(default_factory=dict)
    outcomes: dict[str, TaskOutcome] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    # cursors held across a step whose output cannot carry them
    current_task: TaskCursor | None = None
    # S as decompose saw it: a decompose value found there (and not in the request) is a copy of S
    # (same-turn binding, docs/kernel.md)
    decompose_state: dict[str, Any] = field(default_factory=dict)
    pending_prerequisite: PrereqCursor | None = None
    pending_task: TaskCursor | None = None
    # fan-out instances of this turn: instance id -> the task it is an instance of (their UnitTasks are in ``tasks``)
    instance_of: dict[str, str] = field(default_factory=dict)
    # the fan-out task whose instances are running (the instances ForEach returns only their results)
    current_fan_out: TaskCursor | None = None
    # a conditional task whose predicate held, until its outcome exists: task id -> (verdict, S's value)
    pending_condition: dict[str, tuple[bool, Any]] = field(default_factory=dict)
    # every answer an SLM primitive's step accepted (TurnResult.decisions)
    decisions: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # INV-S monitor
    keys_seen: set[str] = field(default_factory=set)
    # The S entries each committed call of this turn wrote, in commit order: (task id, tool, entries).
    # Same-turn binding reads a dependency's entries from here, as that call wrote them, even where a
    # later call of the same tool has since overwritten the key in S.
    commits: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    # -- invariants ---------------------------------------------------------
    def violate(self, message: str) -> None:
        self.violations.append(message)
        if self.config.strict_invariants:
            raise InvariantError(message)

    def check_monotone(self, where: str) -> None:
        keys = self.scratchpad.keys()
        lost = self.keys_seen - keys
        if lost:
            self.violate(f"INV-S at {where}: scratchpad keys removed: {sorted(lost)}")
        self.keys_seen = keys

    # -- helpers -------------------------------------------------------------
    def task_context(self, task_id: str) -> dict[str, Any]:
        """τ for one task: the values decompose grounded in the request, then the turn's context."""
        task = self.tasks.get(task_id)
        out = dict(self.turn_context)
        if task is not None:
            # A null from decompose means "not stated": it must not hide the context's value (INV-L).
            out.update({k: v for k, v in task.parameters.items() if v is not None})
        return out

    def dependencies(self, task_id: str) -> set[str]:
        """The tasks of this turn ``task_id`` depends on, directly or through other tasks."""
        out: set[str] = set()
        todo = list(self.tasks[task_id].depends_on) if task_id in self.tasks else []
        while todo:
            dependency = todo.pop()
            if dependency in out or dependency == task_id or dependency not in self.tasks:
                continue
            out.add(dependency)
            todo.extend(self.tasks[dependency].depends_on)
        return out

    def fresh(self, task_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(tool, entries) of the calls this turn's dependencies of ``task_id`` committed, newest first."""
        deps = self.dependencies(task_id)
        return [(tool, entries) for tid, tool, entries in reversed(self.commits) if tid in deps]

    def view(self, task_id: str | None = None) -> dict[str, Any]:
        """The state view a primitive is shown: S's ``state_view`` most recent entries and its
        ``result_view`` most recent result entries. For a task, its dependencies' entries (as they wrote
        them) count as the most recent, so they are in the view and are what it shows under their keys
        even where a later call of the same tool has since written the key again."""
        overlay: dict[str, Any] = {}
        for _, entries in reversed(self.fresh(task_id)) if task_id is not None else []:
            for key, value in entries.items():
                overlay.pop(key, None)
                overlay[key] = value
        return self.scratchpad.view(self.config.state_view, self.config.result_view, overlay)

    def task_ref(self, task_id: str, with_tool: bool = False) -> TaskRef:
        task = self.tasks[task_id]
        return TaskRef(id=task.id, text=task.text, tool_name=task.tool_name if with_tool else None)

    def outcome(self, task_id: str, status: Status, **details: Any) -> None:
        self.outcomes[task_id] = TaskOutcome(task_id=task_id, status=status, **details)

    def decide(self, spec: PrimitiveSpec, inp: BaseModel, output: BaseModel) -> None:
        """Record an answer ``spec``'s step accepted (the recorder Kernel.run_turn installs; kernel/specs/decisions.py)."""
        mine = self.decisions.setdefault(spec.name, {})
        key = base = spec.decision_key(inp)
        repeat = 1
        while key in mine:  # the same question again (another candidate tool): both answers are kept
            repeat += 1
            key = f"{base} #{repeat}"
        mine[key] = output.model_dump(mode="json")

    def record_bindings(self, cursor: TaskCursor) -> None:
        """Record the bindings of the tool being tried (the last candidate's are what the turn reports)."""
        self.bindings[cursor.task_id] = dict(cursor.bindings)
