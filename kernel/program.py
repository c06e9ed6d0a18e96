"""The tool-calling execution kernel (paper Algorithm 2) as a program in the DSL, and the Kernel that runs it.

The control flow — decompose, cycle detection and ordering, prerequisite checks with inline
retrieval or blocking, function matching, prioritized parameter lookup, the execution guard and
ToolGate pre/postconditions with candidate fallback — is a tree of DSL operators run by the engine,
so every step is contract-checked, recovered and traced. This module holds only that tree
(:func:`build_program`) and :class:`Kernel`; the symbolic steps are in ``kernel/plan_steps.py``
(turn level) and ``kernel/task_steps.py`` (per task), the data they pass and record in
``kernel/records.py``. The mutable run state (the scratchpad S, the simulated world, the turn's
records) lives in a :class:`~forethought.kernel.records.TurnState` that the symbolic steps receive as
context; SLM steps see only their pure, typed inputs. docs/kernel.md maps every line of
Algorithm 2 to the step that implements it.

Invariants: INV-S (S only grows: Scratchpad has no delete and is checked at task boundaries),
INV-T (every operator is bounded; the static SLM-call bound is computed at construction), INV-E
(the execution guard: a call is issued only with every parameter bound), INV-L (Lookup consults τ
before S, and a contract on the lookup step checks the recorded order), INV-R (a failing task is
caught by ForEach(on_item_error="skip"), so only that task is abandoned).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from forethought.primitives import (
    Backend,
    Check,
    Conditional,
    Contract,
    Engine,
    Fallback,
    ForEach,
    Iterate,
    Primitive,
    Program,
    Recorder,
    Sequence,
    Step,
    Trace,
    symbolic,
)
from forethought.primitives.store import Cache

from . import condition_steps, plan_steps, task_steps
from .environment import Environment
from .records import (
    Batches,
    KernelConfig,
    MatchBatch,
    PrereqCursor,
    PrereqList,
    ScratchpadInit,
    TaskCursor,
    TaskList,
    TurnIn,
    TurnResult,
    TurnState,
    TurnSummary,
)
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
    MatchFillInput,
    MatchFillOutput,
    PrimitiveSpec,
    recording_decisions,
    tool_brief,
)


def _symbolic_step(
    name: str,
    fn: Callable[..., Any],
    input_type: type[BaseModel],
    output_type: type[BaseModel],
    contract: Contract | None = None,
    pure: bool = False,
) -> Step:
    """A step running ``fn(input, turn)``: the TurnState is the engine's run context."""
    return Step(
        symbolic(
            name,
            fn,
            input_type,
            output_type,
            contract if contract is not None else Contract(),
            uses_context=True,
            pure=pure,
        )
    )


def _identity(name: str, value_type: type[BaseModel]) -> Primitive:
    """The primitive of a branch that passes its input on unchanged."""
    return symbolic(name, lambda value: value, value_type, value_type, Contract())


def build_program(cfg: KernelConfig) -> Program:
    """The kernel's operator tree. Step labels are the trace's paths: keep them when editing."""
    primitives: dict[str, Primitive] = {}

    def slm_step(spec: PrimitiveSpec, label: str | None = None) -> Step:
        """A step calling the SLM primitive of ``spec``, with the configured contract retries.

        Works for any PrimitiveSpec; a spec used at two places (check_prerequisites) gets one
        primitive, since the program keys its cache and replay recordings by primitive name."""
        if spec.name not in primitives:
            primitives[spec.name] = spec.primitive(
                max_tasks=cfg.max_tasks
            )  # decompose's schema bounds its list by the fan-out
        return Step(primitives[spec.name], retries=cfg.retries, label=label or spec.name)

    # One primitive per name, used by every branch that keeps its input (labels tell the uses apart).
    keep_prerequisite = _identity("keep_prerequisite", PrereqCursor)
    keep_task = _identity("keep_task", TaskCursor)

    def if_prerequisite(outcome: str, then: Fallback, label: str) -> Conditional:
        return Conditional(
            when=lambda c: c.outcome == outcome, then=then, otherwise=Step(keep_prerequisite), label=label
        )

    # SP4 Check-Prerequisites for one p ∈ GetPrereqs(t) (Algorithm 2 lines 13-22).
    prerequisite = Sequence(
        _symbolic_step("check_prerequisite", task_steps.check_prerequisite, PrereqCursor, PrereqCursor),
        if_prerequisite(
            "absent",
            Fallback(
                Sequence(
                    _symbolic_step(
                        "prepare_retrieval", task_steps.prepare_prerequisite_question, PrereqCursor, CheckPrereqInput
                    ),
                    slm_step(CHECK_PREREQUISITES, "task_to_check"),
                    _symbolic_step("execute_retrieval", task_steps.execute_retrieval, CheckPrereqOutput, PrereqCursor),
                    label="retrieve",
                ),
                _symbolic_step("retrieval_failed", task_steps.retrieval_failed, PrereqCursor, PrereqCursor),
                label="absent",
            ),
            "if_absent",
        ),
        if_prerequisite(
            "not_met",
            Fallback(
                Sequence(
                    _symbolic_step(
                        "prepare_remediation", task_steps.prepare_prerequisite_question, PrereqCursor, CheckPrereqInput
                    ),
                    slm_step(CHECK_PREREQUISITES, "task_to_meet"),
                    _symbolic_step("emit_blocked", task_steps.emit_blocked, CheckPrereqOutput, PrereqCursor),
                    label="remediate",
                ),
                _symbolic_step("block_without_remedy", task_steps.block_without_remedy, PrereqCursor, PrereqCursor),
                label="not_met",
            ),
            "if_not_met",
        ),
        label="prerequisite",
    )

    # SP5 for one candidate tool: Lookup, TaskToGet, the guarded Execute (lines 29-39).
    candidate = Sequence(
        _symbolic_step(
            "lookup_params",
            task_steps.lookup_params,
            TaskCursor,
            TaskCursor,
            Contract(value=[Check("request_before_scratchpad", "value", task_steps.request_before_scratchpad)]),
        ),
        Conditional(
            when=lambda c: bool(c.missing),
            then=Fallback(
                Sequence(
                    _symbolic_step("prepare_fill", task_steps.prepare_fill, TaskCursor, MatchFillInput),
                    slm_step(MATCH_FILL, "task_to_get"),
                    _symbolic_step("apply_fill", task_steps.apply_fill, MatchFillOutput, TaskCursor),
                    label="fill",
                ),
                _symbolic_step("fill_failed", task_steps.fill_failed, TaskCursor, TaskCursor),
                label="missing_values",
            ),
            otherwise=Step(keep_task, label="all_bound"),
            label="if_missing",
        ),
        _symbolic_step("guard_execute", task_steps.guard_execute, TaskCursor, TaskCursor),
        label="candidate",
    )
    # SP5: the matched function (lines 25-28), then its candidates until one executes.
    match_and_execute = Sequence(
        _symbolic_step("resolve_function", task_steps.resolve_function, TaskCursor, TaskCursor),
        Conditional(
            when=lambda c: c.status == "trying",
            then=Iterate(
                candidate, until=lambda c: c.status != "trying", max_iters=cfg.max_candidates, label="candidates"
            ),
            otherwise=Step(keep_task, label="no_function"),
            label="if_matched",
        ),
        label="match_and_execute",
    )
    prerequisites = ForEach(prerequisite, over="prereqs", max_items=cfg.max_prereqs, label="check_prerequisites")
    # The body of "for all t ∈ T" (lines 10-39).
    task = Sequence(
        _symbolic_step("begin_task", task_steps.begin_task, TaskCursor, PrereqList),
        prerequisites,
        _symbolic_step("after_prerequisites", task_steps.after_prerequisites, prerequisites.output_type, TaskCursor),
        Conditional(
            when=lambda c: c.status == "ready",
            then=match_and_execute,
            otherwise=Step(keep_task, label="not_ready"),
            label="if_ready",
        ),
        _symbolic_step("end_task", task_steps.end_task, TaskCursor, TaskCursor),
        label="task",
    )
    get_order = ForEach(
        slm_step(GET_ORDER), over="batches", max_items=cfg.max_tasks, on_item_error="skip", label="get_order"
    )
    match_func = ForEach(
        slm_step(MATCH_FUNC), over="items", max_items=cfg.max_tasks, on_item_error="skip", label="match_func"
    )
    # A fan-out task (decompose's for_each) runs the same task body once per element of an earlier task's list, at
    # most max_fanout times (INV-T: the bound enters the static SLM-call bound); a failing instance is skipped alone (INV-R).
    instances = ForEach(task, over="tasks", max_items=cfg.max_fanout, on_item_error="skip", label="instances")
    fan_out = Sequence(
        _symbolic_step("expand_fan_out", condition_steps.expand_fan_out, TaskCursor, TaskList),
        instances,
        _symbolic_step("collect_fan_out", condition_steps.collect_fan_out, instances.output_type, TaskCursor),
        label="fan_out",
    )
    # A conditional task (decompose's when) is evaluated right before it runs: a false predicate skips it.
    planned_task = Sequence(
        _symbolic_step("check_condition", condition_steps.check_condition, TaskCursor, TaskCursor),
        Conditional(
            when=lambda c: c.status == "skipped_condition",
            then=Step(keep_task, label="condition_false"),
            otherwise=Conditional(when=lambda c: c.fan_out, then=fan_out, otherwise=task, label="if_fan_out"),
            label="if_condition",
        ),
        _symbolic_step("record_condition", condition_steps.record_condition, TaskCursor, TaskCursor),
        label="planned_task",
    )
    tasks = ForEach(planned_task, over="tasks", max_items=cfg.max_tasks, on_item_error="skip", label="tasks")
    root = Sequence(
        _symbolic_step(
            "init_scratchpad",
            plan_steps.init_scratchpad,
            TurnIn,
            ScratchpadInit,
            Contract(value=[Check("config_in_S", "value", plan_steps.config_in_scratchpad)]),
        ),
        _symbolic_step("init_decompose", plan_steps.init_decompose, TurnIn, DecomposeInput),
        slm_step(DECOMPOSE, "decompose"),
        # Cycle detection is symbolic: a cyclic graph halts the turn (INV-T).
        _symbolic_step(
            "build_dep_graph",
            plan_steps.build_dep_graph,
            DecomposeOutput,
            Batches,
            Contract(value=[Check("acyclic", "value", plan_steps.acyclic)]),
        ),
        get_order,
        _symbolic_step("topo_sort", plan_steps.topo_sort, get_order.output_type, MatchBatch),
        match_func,
        _symbolic_step("record_matches", plan_steps.record_matches, match_func.output_type, TaskList),
        tasks,
        _symbolic_step("finish", plan_steps.finish, tasks.output_type, TurnSummary),
        label="kernel",
    )
    return Program(root, name="tool_calling_kernel")


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
        turn_context: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        index: int = 0,
        trace: str = "full",
        recorder: Recorder | None = None,
        cache: Cache | None = None,
    ) -> tuple[TurnResult, Trace]:
        """One turn: ``user`` is the request ι, ``turn_context`` τ, ``config`` the configuration C."""
        turn = TurnState(
            config=self.config,
            env=env,
            scratchpad=scratchpad,
            registry=registry,
            tool_briefs=registry.derived("briefs", lambda r: [tool_brief(t) for t in r]),
            user=user,
            turn_context=dict(turn_context or {}),
            index=index,
        )
        turn.keys_seen = scratchpad.keys()
        checks = self.config.cvc if self.config.check_contracts is None else self.config.check_contracts
        engine = Engine(
            backend,
            check_contracts=checks,
            trace=trace,
            recorder=recorder,
            cache=cache,  # type: ignore[arg-type]
            backend_retries=self.config.backend_retries,
            backend_retry_wait_s=self.config.backend_retry_wait_s,
        )
        # every SLM step built from a spec hands the answers it accepts to turn.decide (TurnResult.decisions)
        with recording_decisions(turn.decide):
            run = engine.run(
                self.program, TurnIn(user=user, config=dict(config or {})), context=turn, run_id=f"turn{index}"
            )
        halted = run.error.to_dict() if run.error is not None else None
        backend_error = run.backend_error.to_dict() if run.backend_error is not None else None
        if halted is not None or backend_error is not None:
            turn.check_monotone("halt")
        result = TurnResult(
            index=index,
            user=user,
            tasks=[t for t in turn.tasks.values() if t.id not in turn.instance_of],  # decompose's tasks
            instances=[t for t in turn.tasks.values() if t.id in turn.instance_of],
            order=turn.order,
            matches=turn.matches,
            prerequisites=turn.prerequisites,
            bindings=turn.bindings,
            outcomes=turn.outcomes,
            calls=turn.calls,
            halted=halted,
            scratchpad=scratchpad.snapshot(),
            invariant_violations=turn.violations,
            slm_calls=run.slm_calls,
            backend_error=backend_error,
            backend_retries=run.backend_retries,
            decisions=turn.decisions,
        )
        return result, run.trace
