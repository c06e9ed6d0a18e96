"""``forethought bench bfcl``: BFCL v4 multi-turn entries through the kernel, scored by bfcl's own checker.

Each entry runs turn by turn: the kernel (``Kernel.run_turn``) decomposes the turn's request, matches
functions of the entry's registry (its classes' docs through our BFCL importer) and executes its calls
on bfcl's own class instances (:class:`BfclEnvironment`); S and the world persist across the turns of
an entry. The committed calls of each turn, as call strings, are the candidate that bfcl's
``multi_turn_checker`` scores (``mode=kernel``). ``mode=responder`` gives each kernel turn to a base model
that answers with the calls to make, ``mode=vanilla`` asks that model with no kernel (:mod:`.bfcl_modes`);
``mode=[kernel,responder,vanilla]`` runs them side by side in one report. ``mode=ceiling`` runs the
ground truth through the guards instead (:mod:`.bfcl_ceiling`).

A backend that did not answer (after its retries) stops that entry: it is listed and never scored
as the model's result, and the command exits 1 unless ``backend_errors=count``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from forethought.errors import UserError, check_output_dir, ensure_output_dir
from forethought.kernel.program import Kernel
from forethought.kernel.registry import format_call
from forethought.primitives import Cache
from forethought.primitives.io import atomic_write_jsonl
from forethought.primitives.trace import capped_rows

from . import bfcl_score, common
from .bfcl_data import CATEGORIES, SHORT, Entry
from .bfcl_entry import EntryRun, EntryTurns

MODES = ("kernel", "responder", "vanilla", "ceiling")
ITEMS = "BFCL entries"  # what the oracle backend finds no annotations in


class BenchConfig(common.RunSettings):
    benchmark: str | None = None  # given positionally: bfcl
    # kernel | responder | vanilla | ceiling, or a list of the first three (side by side); run = kernel
    mode: list[Literal["kernel", "responder", "vanilla", "ceiling"]] = Field(default_factory=lambda: ["kernel"])
    categories: list[str] = Field(default_factory=lambda: ["multi_turn_base"])
    ids: list[str] = Field(default_factory=list)  # entry ids (e.g. multi_turn_base_0); empty: every entry
    count: int | None = Field(None, ge=1)  # the first N entries of each category (after ids)
    # output_dir (null: runs/bench/bfcl_<mode>[+<mode>...]), cvc, backend, responder, record/replay, ...: RunSettings

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        # `run`: this command's first name for kernel
        out = common.mode_list(value, MODES, "a list of the first three", aliases={"run": "kernel"})
        if isinstance(out, list) and "ceiling" in out and len(out) > 1:
            raise ValueError("ceiling runs alone (no model): mode=ceiling")
        return out

    @property
    def out_dir(self) -> str:
        return self.output_dir or f"runs/bench/bfcl_{'+'.join(self.mode)}"

    @field_validator("categories")
    @classmethod
    def _categories(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one category")
        unknown = [c for c in value if c not in CATEGORIES and c not in SHORT]
        if unknown:
            raise ValueError(
                f"unknown categories {unknown}; available: {', '.join(CATEGORIES)} (or {', '.join(SHORT)})"
            )
        out = [SHORT.get(c, c) for c in value]
        dup = sorted({c for c in out if out.count(c) > 1})
        if dup:
            raise ValueError(f"categories listed more than once: {dup}")
        return out


def run_entry(
    entry: Entry, kernel: Kernel, backend: Any, *, trace: str, recorder: Any, cache: Cache | None, replay: str | None
) -> EntryRun:
    out = EntryRun(entry.id, entry.category, kernel.config.cvc, mode="kernel")
    turns = EntryTurns(entry)
    for i, request in turns:
        result, tr = common.kernel_turn(
            kernel,
            where=f"entry {entry.id}, turn {i}",
            replay=replay,
            user=request,
            env=turns.env,
            scratchpad=turns.scratchpad,
            registry=turns.registry,
            backend=backend,
            turn_context={},
            index=i,
            trace=trace,
            recorder=recorder,
            cache=cache,
        )
        out.add_turn(request, result, tr)
        out.candidate.append([format_call(c.tool, c.arguments) for c in result.committed_calls])
        if result.backend_error is not None:
            out.backend_error = {"turn": i, **result.backend_error}
            break
        turns.done(request, result)
    return out


def _trace_rows(runs: list[EntryRun]) -> list[dict[str, Any]]:
    return [{"entry": r.id, "turn": i, **row} for r in runs for i, tr in enumerate(r.traces) for row in tr.to_rows()]


def _write_variant(
    cfg: BenchConfig,
    out: Path,
    category: str,
    key: str,
    runs: list[EntryRun],
    model_name: str,
    entries: dict[str, Entry],
) -> None:
    folder = out / key
    bfcl_score.write_result_file(
        folder / f"BFCL_v4_{category}_result.json",
        [
            {
                "id": r.id,
                "result": bfcl_score.candidate_steps(r.candidate),
                "requests": r.requests,
                "backend_error": r.backend_error,
                "halted_turns": [t.index for t in r.turns if t.halted],
            }
            for r in runs
        ],
    )
    scored = {r.id: r.verdict for r in runs if r.verdict is not None}
    bfcl_score.write_score_file(
        folder / f"BFCL_v4_{category}_score.json",
        model_name,
        category,
        scored,  # type: ignore[arg-type]
        {r.id: r.candidate for r in runs},
        entries,
    )
    if any(r.turns for r in runs):
        atomic_write_jsonl(
            folder / f"{category}_turns.jsonl", [{"entry": r.id, **t.model_dump()} for r in runs for t in r.turns]
        )
    if any(r.answers for r in runs):  # responder and vanilla: what the model answered, turn by turn
        atomic_write_jsonl(
            folder / f"{category}_answers.jsonl", [{"entry": r.id, **a} for r in runs for a in r.answers]
        )
    if cfg.trace != "off" and any(r.traces for r in runs):
        atomic_write_jsonl(
            folder / f"{category}_trace.jsonl", capped_rows(_trace_rows(runs), cfg.trace_max_mb * 1024 * 1024)
        )


def _progress():
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )


def run_bench(
    cfg: BenchConfig, backend: Any = None, command: str | None = None, endpoint: Any = None
) -> tuple[Path, dict[str, Any]]:
    """Run (or, with ``mode=ceiling``, run the ground truth of) the chosen entries in each mode; write the
    results and report.md. ``backend`` replaces the configured kernel backend (tests use a scripted one to
    make a recording), ``endpoint`` the responder's; ``command`` is the command line the report names."""
    from . import bfcl_data, bfcl_modes, bfcl_report

    kernel_modes, endpoint = common.preflight(cfg, backend, endpoint, ITEMS)  # before any folder is made
    bfcl_data.bfcl_data_dir()  # installed, or a located error before anything else
    bfcl_data.check_ids(cfg.categories, cfg.ids)
    selected = {c: bfcl_data.select(c, cfg.ids, cfg.count) for c in cfg.categories}
    if not any(selected.values()):
        raise UserError(f"no entries selected from {cfg.categories}", "ids")
    out = Path(cfg.out_dir)
    check_output_dir(out, "output_dir")  # creating nothing: the backend's own refusals come first
    if cfg.mode == ["ceiling"]:
        ensure_output_dir(out, "output_dir")
        return out, _run_ceiling(cfg, out, selected, command)
    recorder, backend, cache = common.kernel_side(cfg, backend, kernel_modes)
    ensure_output_dir(out, "output_dir")  # before any model call
    summary: dict[str, Any] = {
        "mode": "run",
        "modes": list(cfg.mode),
        "command": common.recorded(command),
        "backend": common.backend_label(cfg, backend, bundle=True) if kernel_modes else None,
        "responder": endpoint.label if endpoint is not None else None,
        "categories": {},
    }
    with _progress() as progress:
        for mode, key, kernel in common.settings(cfg):
            for category, entries in selected.items():
                task = progress.add_task(f"{category} {common.SETTINGS[key]}", total=len(entries))
                model_name = bfcl_score.checker_model_name(key)
                runs = []
                try:
                    for entry in entries:
                        if mode == "kernel":
                            run = run_entry(
                                entry,
                                kernel,
                                backend,
                                trace=cfg.trace,
                                recorder=recorder,
                                cache=cache,
                                replay=cfg.replay,
                            )
                        elif mode == "responder":
                            run = bfcl_modes.run_responder_entry(
                                entry,
                                kernel,
                                backend,
                                endpoint,
                                trace=cfg.trace,
                                recorder=recorder,
                                cache=cache,
                                replay=cfg.replay,
                            )
                        else:
                            run = bfcl_modes.run_vanilla_entry(entry, endpoint)
                        if run.backend_error is None:  # a turn nobody answered says nothing about the model
                            run.verdict = bfcl_score.score(entry, run.candidate, model_name)
                        runs.append(run)
                        progress.advance(task)
                finally:
                    bfcl_score.release(model_name)
                _write_variant(cfg, out, category, key, runs, model_name, {e.id: e for e in entries})
                summary["categories"].setdefault(category, {})[key] = bfcl_report.summarise_runs(runs, model_name)
    common.save_recording(cfg, recorder, out)
    bfcl_report.write_run_report(out, cfg, summary)
    return out, summary


def _run_ceiling(cfg: BenchConfig, out: Path, selected: dict[str, list[Entry]], command: str | None) -> dict[str, Any]:
    from . import bfcl_ceiling, bfcl_report

    summary: dict[str, Any] = {
        "mode": "ceiling",
        "command": common.recorded(command),
        "label": bfcl_ceiling.LABEL,
        "categories": {},
    }
    with _progress() as progress:
        for category, entries in selected.items():
            task = progress.add_task(f"{category} ceiling", total=len(entries))
            results, model_name = bfcl_ceiling.run(entries, on_entry=lambda _e, task=task: progress.advance(task))
            folder = out / "ceiling"
            bfcl_score.write_result_file(
                folder / f"BFCL_v4_{category}_result.json",
                [
                    {
                        "id": r.id,
                        "result": bfcl_score.candidate_steps(r.candidate),
                        "blocked": [b.__dict__ for b in r.blocked],
                    }
                    for r in results
                ],
            )
            bfcl_score.write_score_file(
                folder / f"BFCL_v4_{category}_score.json",
                model_name,
                category,
                {r.id: r.verdict for r in results},
                {r.id: r.candidate for r in results},
                {e.id: e for e in entries},
            )
            atomic_write_jsonl(folder / f"{category}_unavailable.jsonl", [u for r in results for u in r.unavailable])
            summary["categories"][category] = bfcl_report.summarise_ceiling(results, model_name)
    bfcl_report.write_ceiling_report(out, cfg, summary)
    return summary


def cli(args: list[str]) -> int:
    """``forethought bench bfcl [key=value ...]`` (``bench`` dispatches on its first positional argument)."""
    from forethought.arguments import load, split_args

    parsed = split_args(args)
    if parsed.positional[:1] == ["tau2"]:  # its own config (conf/bench_tau2.yaml): tasks, seeds, tau2's evaluator
        from . import tau2_run

        return tau2_run.cli(args)
    cfg = load("bench", parsed, BenchConfig)
    if cfg is None:
        return 0
    names = parsed.positional or ([cfg.benchmark] if cfg.benchmark else [])
    if names == ["serving"]:  # the deployment this config names: does each adapter apply? (docs/serving.md)
        from . import serving

        return serving.cli(cfg)
    if names != ["bfcl"]:
        raise UserError(
            f"expected one benchmark, bfcl or tau2; got {names or 'none'}: forethought bench bfcl|tau2 [key=value ...] "
            "(or forethought bench serving backend=openai ... to check a deployment's adapters)",
            "benchmark",
        )
    out, summary = run_bench(cfg, command=" ".join(["forethought", "bench", *args]))
    from . import bfcl_report

    print(bfcl_report.console_summary(summary))
    print(f"wrote {out / 'report.md'}")
    if summary["mode"] == "run":
        failed = [
            (c, v, e) for c, vs in summary["categories"].items() for v, s in vs.items() for e in s["backend_errors"]
        ]
        if failed:
            _c, _v, first_error = failed[0]
            return common.exit_on_backend_errors(
                cfg,
                len(failed),
                f"entr{'y' if len(failed) == 1 else 'ies'}",
                f"{first_error['entry']} turn {first_error['turn']}: {first_error['message']}",
            )
    return 0
