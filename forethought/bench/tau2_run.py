"""``forethought bench tau2``: tau2-bench telecom in solo mode through the kernel, scored by tau2's own evaluator.

Each task's ticket is the request (solo mode: no LLM plays the user; the agent calls the user-device tools
itself). Its world is tau2's own environment behind the kernel's environment interface
(:class:`.tau2_env.Tau2Environment`), its registry tau2's tool schemas through our OpenAI importer. Every
committed call becomes the assistant and tool messages tau2 replays; tau2's ``evaluate_simulation``
scores the run (:mod:`.tau2_score`).

Modes, as for BFCL (docs/tau2.md):

- ``kernel``: one kernel turn on the ticket; its committed calls are the answer.
- ``responder``: the kernel's turn runs on a copy of the world; the base model behind ``responder.base_url``
  reads it (docs/responder.md) and answers with the calls to make, which run through the kernel's execution
  path (ToolGate with CVC on) on the real world. Per task, where the answer departs from the trace.
- ``vanilla``: tau2's own solo agent loop on the same endpoint, with no kernel: tau2's solo system prompt
  (its instructions, the domain policy, the ticket), its tools plus ``done``; every call runs, its response
  goes back as a tool message; the run stops on ``done`` (tau2: agent_stop), on a reply with no call
  (agent_error) or after ``max_steps`` model calls (max_steps).

``seeds`` runs every task once per seed (the seed goes to the endpoint's request); tau2's pass^k is reported
for k = 1 .. len(seeds). A backend that did not answer stops that task's trial: it is listed and never
scored, and the command exits 1 unless ``backend_errors=count``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from forethought.errors import UserError, check_output_dir, ensure_output_dir
from forethought.kernel.backends.openai_backend import BackendError
from forethought.kernel.program import Kernel
from forethought.kernel.records import TurnResult, TurnState
from forethought.kernel.registry import Registry
from forethought.kernel.scratchpad import Scratchpad
from forethought.primitives import Cache, Trace
from forethought.primitives.io import atomic_write_jsonl
from forethought.primitives.trace import capped_rows

from . import common, tau2_data, tau2_score
from .answer_execution import answer_record, execute_answer, shown_call
from .responder import Endpoint, parse_tool_call
from .tau2_env import Tau2Environment

MODES = ("kernel", "responder", "vanilla")
ITEMS = "tau2 tasks"  # what the oracle backend finds no annotations in


class Tau2Config(common.RunSettings):
    benchmark: str | None = None  # given positionally: tau2
    domain: str = "telecom"
    split: str = tau2_data.DEFAULT_SPLIT
    mode: list[Literal["kernel", "responder", "vanilla"]] = Field(default_factory=lambda: ["kernel"])
    ids: list[str] = Field(default_factory=list)  # task ids; empty: every task of the split
    count: int | None = Field(None, ge=1)  # the first N tasks (after ids)
    seeds: list[int] = Field(default_factory=lambda: [0])  # one trial per seed; pass^k for k = 1 .. len(seeds)
    max_steps: int = Field(
        50, ge=1
    )  # vanilla: model calls per trial (tau2's orchestrator: 100 steps, agent and environment)
    # output_dir (null: runs/bench/tau2_<domain>_<mode>[+<mode>...]), cvc, backend, responder, record/replay, ...: RunSettings

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return common.mode_list(value, MODES, "a list of them")

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        if value not in tau2_data.DOMAINS:
            raise ValueError(
                f"unknown domain {value!r}; available: {', '.join(tau2_data.DOMAINS)} "
                "(tau2's airline and retail need an LLM playing the user)"
            )
        return value

    @field_validator("split")
    @classmethod
    def _split(cls, value: str) -> str:
        if value not in tau2_data.SPLITS:
            raise ValueError(f"unknown split {value!r}; available: {', '.join(tau2_data.SPLITS)}")
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("name at least one seed")
        if len(set(value)) != len(value):
            raise ValueError(f"seeds listed more than once: {sorted({s for s in value if value.count(s) > 1})}")
        return value

    @property
    def out_dir(self) -> str:
        return self.output_dir or f"runs/bench/tau2_{self.domain}_{'+'.join(self.mode)}"


@dataclass
class TaskRun:
    """One trial of one task in one setting."""

    id: str
    seed: int
    mode: str
    cvc: bool | None
    turn: TurnResult | None = None
    trace: Trace | None = None
    termination: str = "agent_stop"
    messages: list[Any] = field(default_factory=list)  # the trajectory tau2's evaluator replays
    calls: list[str] = field(default_factory=list)  # the committed calls, as call strings
    answer: dict[str, Any] | None = None  # responder / vanilla: what the model answered
    backend_error: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None  # tau2's evaluator; None when not scored


def _kernel_turn(
    task: tau2_data.Task,
    env: Tau2Environment,
    scratchpad: Scratchpad,
    registry: Registry,
    kernel: Kernel,
    backend: Any,
    *,
    trace: str,
    recorder: Any,
    cache: Cache | None,
    replay: str | None,
    where: str,
) -> tuple[TurnResult, Trace]:
    return common.kernel_turn(
        kernel,
        where=f"task {task.id}, {where}",
        replay=replay,
        user=task.ticket,
        env=env,
        scratchpad=scratchpad,
        registry=registry,
        backend=backend,
        turn_context={},
        index=0,
        trace=trace,
        recorder=recorder,
        cache=cache,
    )


def run_kernel_task(
    domain: str,
    task: tau2_data.Task,
    seed: int,
    kernel: Kernel,
    backend: Any,
    *,
    trace: str,
    recorder: Any,
    cache: Cache | None,
    replay: str | None,
) -> TaskRun:
    out = TaskRun(task.id, seed, "kernel", kernel.config.cvc)
    env = Tau2Environment(domain, task)
    out.turn, out.trace = _kernel_turn(
        task,
        env,
        Scratchpad(),
        tau2_data.task_registry(domain),
        kernel,
        backend,
        trace=trace,
        recorder=recorder,
        cache=cache,
        replay=replay,
        where="mode kernel",
    )
    if out.turn.backend_error is not None:
        out.backend_error = {"source": "kernel backend", **out.turn.backend_error}
    out.messages = env.trajectory()
    out.calls = [shown_call(c.tool, c.arguments) for c in out.turn.committed_calls]
    return out


def run_responder_task(
    domain: str,
    task: tau2_data.Task,
    seed: int,
    kernel: Kernel,
    backend: Any,
    endpoint: Endpoint,
    *,
    trace: str,
    recorder: Any,
    cache: Cache | None,
    replay: str | None,
) -> TaskRun:

    out = TaskRun(task.id, seed, "responder", kernel.config.cvc)
    env, scratchpad, registry = Tau2Environment(domain, task), Scratchpad(), tau2_data.task_registry(domain)
    trial_env, trial_s = copy.deepcopy(env), copy.deepcopy(scratchpad)  # the kernel's trial changes nothing real
    out.turn, out.trace = _kernel_turn(
        task,
        trial_env,
        trial_s,
        registry,
        kernel,
        backend,
        trace=trace,
        recorder=recorder,
        cache=cache,
        replay=replay,
        where="mode responder",
    )
    if out.turn.backend_error is not None:
        out.backend_error = {"source": "kernel backend", **out.turn.backend_error}
        return out
    try:
        answer, rendered = endpoint.respond(
            task.ticket, out.turn, out.trace, registry, state=trial_s.snapshot(), extra={"seed": seed}
        )
    except BackendError as exc:
        out.backend_error = {"source": "responder", "message": str(exc)}
        return out
    turn = TurnState(
        config=kernel.config,
        env=env,
        scratchpad=scratchpad,
        registry=registry,
        tool_briefs=[],  # type: ignore[arg-type]
        user=task.ticket,
        turn_context={},
        index=0,
    )
    committed, blocked = execute_answer(answer, turn, "responder0")
    out.calls = committed
    out.messages = env.trajectory()
    out.answer = answer_record(answer, out.turn.committed_calls, committed, blocked, rendered)
    return out


def solo_system_prompt(env: Tau2Environment, task: tau2_data.Task) -> str:
    """tau2's own solo-agent system prompt (``LLMSoloAgent.system_prompt``): its instructions, the policy, the ticket."""
    from tau2.agent.llm_agent import AGENT_SOLO_INSTRUCTION, SYSTEM_PROMPT_SOLO

    instruction = AGENT_SOLO_INSTRUCTION.format(stop_function_name=tau2_data.STOP_TOOL, stop_token=tau2_data.STOP_TOKEN)
    return SYSTEM_PROMPT_SOLO.format(
        agent_instruction=instruction, domain_policy=env.env.get_policy(), ticket=task.ticket
    )


def stop_tool() -> dict[str, Any]:
    """tau2's ``done`` tool as its solo agent offers it (``as_tool(done)``)."""
    from tau2.environment.tool import as_tool

    def done() -> str:
        """Call this function when you are done with the task."""
        return tau2_data.STOP_TOKEN

    return as_tool(done).openai_schema


def run_vanilla_task(domain: str, task: tau2_data.Task, seed: int, endpoint: Endpoint, max_steps: int) -> TaskRun:

    out = TaskRun(task.id, seed, "vanilla", None, termination="max_steps")
    env = Tau2Environment(domain, task)
    tools = tau2_data.tool_schemas(env.env) + [stop_tool()]
    messages: list[dict[str, Any]] = [{"role": "system", "content": solo_system_prompt(env, task)}]
    row: dict[str, Any] = {"steps": [], "parse_errors": [], "errors": 0, "text": ""}
    for step in range(max_steps):
        content, tool_calls, error = common.vanilla_step(
            endpoint, messages, tools, row, step, extra={"tool_choice": "required", "seed": seed}
        )
        if error is not None:
            out.backend_error = {"source": "vanilla", "step": step, "message": error}
            break
        parsed = []
        for k, tc in enumerate(tool_calls):
            try:
                parsed.append((tc, parse_tool_call(tc, k)))
            except ValueError as exc:
                row["parse_errors"].append(f"step {step}: {exc}")
        if any(name == tau2_data.STOP_TOOL for _, (name, _, _) in parsed):
            out.termination = "agent_stop"  # tau2 drops every call of a message that calls done, and stops
            break
        if not parsed:
            out.termination = "agent_error"  # tau2's solo orchestrator: a reply with no tool call ends the run
            break
        messages.append({"role": "assistant", "content": content or None, "tool_calls": [tc for tc, _ in parsed]})
        step_calls = []
        for _tc, (name, args, call_id) in parsed:
            response = env.apply(name, args)  # as tau2's orchestrator runs a model's call: no guard, errors included
            row["errors"] += bool(response.error)
            step_calls.append(shown_call(name, args))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": response.content})
        row["steps"].append(step_calls)
    out.messages = env.trajectory(stopped=out.termination == "agent_stop")
    out.calls = [c for s in row["steps"] for c in s]
    out.answer = row
    return out


def _simulation_row(run: TaskRun) -> dict[str, Any]:
    """The trial as tau2 writes a simulation: its messages (tau2's own models, dumped) with our verdict."""
    return {
        "task_id": run.id,
        "seed": run.seed,
        "termination_reason": run.termination,
        "backend_error": run.backend_error,
        "verdict": run.verdict,
        "calls": run.calls,
        "messages": [m.model_dump(mode="json") for m in run.messages],
    }


def _write_setting(cfg: Tau2Config, folder: Path, runs: list[TaskRun]) -> None:
    atomic_write_jsonl(folder / "simulations.jsonl", [_simulation_row(r) for r in runs])
    if any(r.turn is not None for r in runs):
        atomic_write_jsonl(
            folder / "turns.jsonl", [{"task": r.id, "seed": r.seed, **r.turn.model_dump()} for r in runs if r.turn]
        )
    if any(r.answer is not None for r in runs):
        atomic_write_jsonl(
            folder / "answers.jsonl", [{"task": r.id, "seed": r.seed, **r.answer} for r in runs if r.answer]
        )
    if cfg.trace != "off" and any(r.trace is not None for r in runs):
        rows = [{"task": r.id, "seed": r.seed, **row} for r in runs if r.trace is not None for row in r.trace.to_rows()]
        atomic_write_jsonl(folder / "trace.jsonl", capped_rows(rows, cfg.trace_max_mb * 1024 * 1024))


def run_bench(
    cfg: Tau2Config, backend: Any = None, command: str | None = None, endpoint: Any = None
) -> tuple[Path, dict[str, Any]]:
    """Run the chosen tasks in each mode and seed; score each trial with tau2's evaluator; write report.md.
    ``backend`` replaces the kernel backend (tests record with a scripted one), ``endpoint`` the responder's."""
    from . import tau2_report

    kernel_modes, endpoint = common.preflight(cfg, backend, endpoint, ITEMS)  # before any folder is made
    tau2_data.import_tau2()  # installed, or a located error before anything else
    tasks = tau2_data.select(cfg.domain, cfg.split, cfg.ids, cfg.count)
    if not tasks:
        raise UserError(f"no tasks selected from {cfg.domain}/{cfg.split}", "ids")
    out = Path(cfg.out_dir)
    check_output_dir(out, "output_dir")  # creating nothing: the backend's own refusals come first
    recorder, backend, cache = common.kernel_side(cfg, backend, kernel_modes)
    ensure_output_dir(out, "output_dir")  # before any model call
    summary: dict[str, Any] = {
        "benchmark": "tau2",
        "domain": cfg.domain,
        "split": cfg.split,
        "modes": list(cfg.mode),
        "seeds": list(cfg.seeds),
        "command": common.recorded(command),
        "tau2_version": tau2_data.package_version(),
        "backend": common.backend_label(cfg, backend) if kernel_modes else None,
        "responder": endpoint.label if endpoint is not None else None,
        "settings": {},
    }
    for mode, key, kernel in common.settings(cfg):
        runs: list[TaskRun] = []
        for seed in cfg.seeds:
            for task in tasks:
                if mode == "kernel":
                    run = run_kernel_task(
                        cfg.domain,
                        task,
                        seed,
                        kernel,
                        backend,
                        trace=cfg.trace,
                        recorder=recorder,
                        cache=cache,
                        replay=cfg.replay,
                    )
                elif mode == "responder":
                    run = run_responder_task(
                        cfg.domain,
                        task,
                        seed,
                        kernel,
                        backend,
                        endpoint,
                        trace=cfg.trace,
                        recorder=recorder,
                        cache=cache,
                        replay=cfg.replay,
                    )
                else:
                    run = run_vanilla_task(cfg.domain, task, seed, endpoint, cfg.max_steps)
                if run.backend_error is None:  # a trial nobody answered says nothing about the model
                    run.verdict = tau2_score.evaluate(cfg.domain, task, run.messages, run.termination)
                runs.append(run)
        _write_setting(cfg, out / key, runs)
        summary["settings"][key] = tau2_report.summarise(runs, cfg.seeds)
    common.save_recording(cfg, recorder, out)
    tau2_report.write_report(out, cfg, summary)
    return out, summary


def cli(args: list[str]) -> int:
    """``forethought bench tau2 [key=value ...]`` (conf/bench_tau2.yaml)."""
    from forethought.arguments import load, split_args

    from . import tau2_report

    parsed = split_args(args)
    parsed.positional = [p for p in parsed.positional if p != "tau2"]
    if parsed.positional:
        raise UserError(
            f"unexpected arguments {parsed.positional}: forethought bench tau2 [key=value ...]", "benchmark"
        )
    cfg = load("bench_tau2", parsed, Tau2Config)
    if cfg is None:
        return 0
    out, summary = run_bench(cfg, command=" ".join(["forethought", "bench", *args]))
    print(tau2_report.console_summary(summary))
    print(f"wrote {out / 'report.md'}")
    failed = [(k, e) for k, s in summary["settings"].items() for e in s["backend_errors"]]
    if failed:
        setting, first_error = failed[0]
        return common.exit_on_backend_errors(
            cfg,
            len(failed),
            f"trial{'' if len(failed) == 1 else 's'}",
            f"{first_error['task']} seed {first_error['seed']} ({common.SETTINGS[setting]}): {first_error['message']}",
        )
    return 0
