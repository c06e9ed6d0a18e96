"""``forethought run SCENARIO``: execute a scenario through the kernel with a chosen backend.

Writes, under ``output_dir/<scenario id>/``: ``turns.json`` (every
sub-process decision per turn), ``calls.jsonl`` (the committed calls),
``final_state.json`` (the world), ``trace.jsonl`` (one record per step) and
``trace.html`` (a readable view of each turn, as in the paper's Figure 1).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forethought.errors import UserError
from forethought.primitives import Cache, Recorder, ReplayMissError

from .backends.factory import (
    BackendConfig,
    OracleBackendConfig,
    backend_factory,
    use_recording_rendering,
    write_recording,
)
from .program import Kernel
from .records import KernelConfig
from .runner import build_environment, build_registry, run_solution
from .secret_arguments import secret_values, shown_arguments, write_run_files
from .solution_file import load_solution, warn_format_notes
from .solution_format import key_problems
from .specs import MAX_TASKS


class KernelSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cvc: bool = True
    retries: int = Field(2, ge=0)
    max_tasks: int = Field(MAX_TASKS, ge=1)
    max_prereqs: int = Field(4, ge=1)
    max_candidates: int = Field(3, ge=1)
    state_view: int = Field(24, ge=1)
    result_view: int = Field(16, ge=1)  # result entries ("<tool>.<field>") shown besides state_view's
    result_entry_max_chars: int = Field(600, ge=1)  # a longer result field enters S as a truncation marker
    backend_retries: int = Field(2, ge=0, le=10)  # a model call that raised is repeated (not a contract retry)
    backend_retry_wait_s: float = Field(0.5, ge=0, le=60)  # first wait; doubles per retry
    strict_output_schema: bool = False  # imported registries: an output-schema mismatch rejects the call

    def build(self) -> KernelConfig:
        return KernelConfig(**self.model_dump())


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str | None = None
    output_dir: str = "runs/run"
    trace: str = Field("full", pattern="^(full|steps|off)$")
    kernel: KernelSettings = Field(default_factory=KernelSettings)
    backend: BackendConfig = Field(default_factory=OracleBackendConfig)
    record: bool = False  # write every SLM reply to <output>/recording.jsonl
    replay: str | None = None  # answer SLM requests from this recording.jsonl
    replay_mode: Literal["strict", "replay"] = "strict"  # strict: a request not recorded is an error
    cache: bool = False  # reuse the answer to an identical SLM request within the run
    # fail: a turn whose backend did not answer makes the run exit 1; count: exit 0, the turns are listed
    backend_errors: Literal["fail", "count"] = "fail"
    trace_max_mb: int = Field(64, ge=1)  # trace.jsonl stops here, with a final marker row counting what was left out


class ReplayOnly:
    """The backend of a strict replay: never asked, since a miss raises first."""

    name = "replay"

    def complete(self, requests):  # pragma: no cover - unreachable under strict replay
        raise RuntimeError("strict replay asked the backend")


def make_recorder(cfg: RunConfig) -> Recorder | None:
    if cfg.replay is not None:
        if not Path(cfg.replay).is_file():
            raise UserError(f"no recording at {cfg.replay}", "replay")
        try:
            return Recorder.load(cfg.replay, mode=cfg.replay_mode)
        except UserError as exc:
            raise UserError(f"not a usable recording: {exc.message}", f"replay ({cfg.replay})") from None
    return Recorder("record") if cfg.record else None


def load_scenario(path: str) -> Any:
    """A scenario file read and checked as ``run`` needs it (rendered; its annotations mean what the kernel checks)."""
    sol = load_solution(path).rendered()
    if any(t.annotated for t in sol.turns):  # annotations that cannot mean what the kernel checks: refused, not run
        problems = key_problems(sol, build_registry(sol, build_environment(sol)))
        if problems:
            raise UserError(
                f"{len(problems)} prerequisite key(s) do not name what their tool checks: " + "; ".join(problems[:5]),
                path,
            )
    return sol


def run_scenario_file(cfg: RunConfig, path: str, sol: Any = None) -> tuple[Path, object]:
    if cfg.record and cfg.replay is not None:
        raise UserError("record=true and replay=... exclude each other", "record")
    from forethought.errors import check_output_dir

    # The inputs first (the scenario, the recording), then the output folder: a refusal writes nothing.
    sol = sol if sol is not None else load_scenario(path)
    warn_format_notes(sol)
    recorder = make_recorder(cfg)
    check_output_dir(cfg.output_dir, "output_dir")  # before any model is loaded; created when the artefacts are written
    if cfg.replay is not None and cfg.replay_mode == "strict":
        use_recording_rendering(recorder, cfg.backend)  # prompts as the recorded run rendered them: the lookup keys
        factory = lambda i, turn: ReplayOnly()  # noqa: E731 - every answer comes from the recording
    else:
        factory = backend_factory(cfg.backend, sol)
    kernel = Kernel(cfg.kernel.build())
    try:
        res = run_solution(
            sol, kernel, factory, trace=cfg.trace, recorder=recorder, cache=Cache() if cfg.cache else None
        )
    except ReplayMissError as exc:
        raise UserError(f"{exc} (scenario {path})", str(cfg.replay)) from None
    out = Path(cfg.output_dir) / sol.id
    if cfg.record and recorder is not None:
        write_recording(recorder, out / "recording.jsonl")
    meta = {
        "scenario": path,
        "backend": "replay" if isinstance(factory(0, sol.turns[0]), ReplayOnly) else cfg.backend.name,
        "cvc": cfg.kernel.cvc,
    }
    bundle = getattr(getattr(factory(0, sol.turns[0]), "bundle", None), "path", None)
    if bundle:
        meta["bundle"] = str(bundle)
    write_run_files(
        out,
        res.turns,
        res.traces,
        res.final_state,
        title=f"{sol.id}: {sol.title}",
        meta=meta,
        trace_max_bytes=cfg.trace_max_mb * 1024 * 1024,
    )
    return out, res


def cli(args: list[str]) -> int:
    from forethought.arguments import load, split_args

    parsed = split_args(args)
    cfg = load("run", parsed, RunConfig)
    if cfg is None:
        return 0
    paths = parsed.positional or ([cfg.scenario] if cfg.scenario else [])
    if not paths:
        raise UserError("give a scenario file: forethought run SCENARIO.json [backend=...]", "scenario")
    status = 0
    scenarios = [load_scenario(p) for p in paths]  # every file checked before the first runs: a refusal writes nothing
    for path, sol in zip(paths, scenarios, strict=True):
        out, res = run_scenario_file(cfg, path, sol)
        for turn in res.turns:  # type: ignore[attr-defined]
            if turn.backend_error:
                summary = f"backend error: {turn.backend_error['message']}"
            elif turn.halted:
                summary = f"halted: {turn.halted['reason']}"
            else:
                summary = ", ".join(f"{k}={v.status}" for k, v in turn.outcomes.items())
            print(f"turn {turn.index + 1}: {summary}")
            for call in turn.committed_calls:
                print(f"  {call.tool}({shown_arguments(call, secret_values(res.turns))})")  # type: ignore[attr-defined]
        extra = ", recording.jsonl" if cfg.record else ""
        print(f"wrote {out}/ (turns.json, calls.jsonl, final_state.json, trace.jsonl, trace.html{extra})")
        halted = [t for t in res.turns if t.halted]  # type: ignore[attr-defined]
        if halted:
            # A halted turn did not complete (a cycle, or a step whose recovery was exhausted,
            # e.g. an unreachable backend): say so in the exit status, as a test runner would.
            print(f"{len(halted)} of {len(res.turns)} turn(s) halted")  # type: ignore[attr-defined]
            status = 1
        failed = [t for t in res.turns if t.backend_error]  # type: ignore[attr-defined]
        if failed:
            # The backend did not answer: these turns say nothing about the model.
            print(
                f"error: {path}: {len(failed)} of {len(res.turns)} turn(s) got no answer from the backend "  # type: ignore[attr-defined]
                f"(first: {failed[0].backend_error['message']})"
                + ("" if cfg.backend_errors == "fail" else "; counted (backend_errors=count)"),
                file=sys.stderr,
            )
            if cfg.backend_errors == "fail":
                status = 1
    return status
