"""``forethought evaluate``: end-to-end accuracy on held-out worked solutions, with the CVC ablation.

Held-out solutions are those in no training split (the validation solutions
named in the dataset's ``stats.json``). Each is run through the kernel in
several settings and scored per turn and per scenario, BFCL-style: the
committed call sequence must equal the reference calls, and the world state
must equal the state reached by the reference calls alone.

Settings: ``oracle`` (the annotations; a sanity check, 100 % by
construction), ``bundle_cvc`` / ``bundle_no_cvc`` (the trained primitives
with and without the contract-and-control layer — the paper's Table 2
ablation), and ``noise_cvc`` / ``noise_no_cvc``: a SIMULATION in which the
oracle's answers are corrupted at configured per-primitive rates.
"""

from __future__ import annotations

import json
import random
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from forethought.config import LAYOUT, shipped_path
from forethought.data_gen.verify import Divergence, reference_states
from forethought.errors import RunFailed, UserError
from forethought.kernel.backends.factory import BackendConfig, HFBackendConfig, PrimitiveName, make_model_backend
from forethought.kernel.backends.noisy import NoisyOracle
from forethought.kernel.backends.oracle import OracleBackend
from forethought.kernel.grounding import canonical
from forethought.kernel.program import Kernel
from forethought.kernel.run_command import KernelSettings
from forethought.kernel.runner import run_solution
from forethought.kernel.scenario import Solution
from forethought.kernel.solution_file import load_solution, solution_files, warn_format_notes
from forethought.kernel.specs import PRIMITIVE_NAMES
from forethought.primitives.io import atomic_write_figure, atomic_write_json, atomic_write_jsonl, atomic_write_text

SETTINGS = ("oracle", "bundle_cvc", "bundle_no_cvc", "noise_cvc", "noise_no_cvc")
LABELS = {
    "oracle": "oracle primitives (annotations; sanity check)",
    "bundle_cvc": "trained primitives, with CVC",
    "bundle_no_cvc": "trained primitives, without CVC",
    "noise_cvc": "SIMULATION: oracle + injected errors, with CVC",
    "noise_no_cvc": "SIMULATION: oracle + injected errors, without CVC",
}


Rate = Annotated[float, Field(ge=0.0, le=1.0)]
SettingName = Literal["oracle", "bundle_cvc", "bundle_no_cvc", "noise_cvc", "noise_no_cvc"]


class NoiseConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # per-primitive probability in [0, 1] that an oracle answer is corrupted; a primitive not named gets 0
    rates: dict[PrimitiveName, Rate] = Field(default_factory=lambda: {p: 0.2 for p in PRIMITIVE_NAMES})
    seed: int = 0
    # Also sweep a uniform per-primitive rate (with and without CVC), averaging over seeds.
    sweep: list[Rate] = Field(default_factory=lambda: [0.0, 0.05, 0.1, 0.2, 0.3])
    sweep_seeds: int = Field(5, ge=1)


class EvaluateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    solutions: list[str] = Field(default_factory=lambda: [str(shipped_path("data_gen/solutions"))])
    dataset_dir: str = LAYOUT["data"]
    output_dir: str = LAYOUT["evaluate"]
    scenarios: list[str] | None = None  # explicit solution ids; default: the held-out ones from stats.json
    max_scenarios: int | None = Field(None, ge=1)
    settings: list[SettingName] = Field(default_factory=lambda: list(SETTINGS), min_length=1)
    noise: NoiseConfig = Field(default_factory=NoiseConfig)
    kernel: KernelSettings = Field(default_factory=KernelSettings)
    backend: BackendConfig = Field(default_factory=HFBackendConfig)
    # fail: the first turn whose backend did not answer stops the evaluation (exit 1, no figures);
    # count: such turns count as failed turns and the report says how many and which.
    backend_errors: Literal["fail", "count"] = "fail"

    @field_validator("settings")
    @classmethod
    def _unique(cls, settings: list[str]) -> list[str]:
        from forethought.config import reject_duplicates

        return reject_duplicates(settings, "settings")


def held_out(cfg: EvaluateConfig) -> list[Solution]:
    if cfg.scenarios is not None:
        ids = list(cfg.scenarios)
    else:
        stats = Path(cfg.dataset_dir) / "stats.json"
        if not stats.is_file():
            raise UserError(
                "no stats.json: run forethought generate first (it names the held-out solutions)", str(stats)
            )
        from forethought.data_gen.unit import checked_bytes

        try:  # the held-out list must be the one of the dataset the adapters were trained beside
            from forethought.bounded import loads_json

            ids = loads_json(checked_bytes(cfg.dataset_dir, "stats.json"), str(stats))["validation_solutions"]
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, KeyError, TypeError) as exc:
            raise UserError(
                f"no list of held-out solutions (field validation_solutions): {exc!r}", str(stats)
            ) from None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise UserError("field validation_solutions must be a list of solution ids", str(stats))
    by_id = {}
    for path in solution_files(cfg.solutions):
        solution = load_solution(path)
        warn_format_notes(solution)
        by_id[solution.id] = solution
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise UserError(f"held-out solutions not found: {missing[:5]}", ", ".join(cfg.solutions))
    sols = [by_id[i] for i in sorted(ids)]
    return sols[: cfg.max_scenarios] if cfg.max_scenarios else sols


def _backend_error_text(err: dict[str, Any] | None) -> str | None:
    if not err:
        return None
    return f"{err['message']} (primitive {err.get('primitive')}, {err.get('attempts', 1)} attempt(s))"


def score_run(sol: Solution, ref_states: list[dict[str, Any]], res: Any) -> list[dict[str, Any]]:
    from forethought.data_gen.verify import first_difference  # noqa: F401  (kept for debugging output)

    rows = []
    env_states = res.states
    for i, (turn, tr) in enumerate(zip(sol.turns, res.turns, strict=False)):
        want = [(c.tool, canonical(c.args)) for c in turn.reference_calls()]
        got = [(c.tool, canonical(c.arguments)) for c in tr.committed_calls]
        # A turn the backend did not answer matched nothing, even when nothing was expected of it.
        answered = tr.backend_error is None
        rows.append(
            {
                "solution_id": sol.id,
                "turn": i,
                "call_match": answered and want == got,
                "state_match": answered and canonical(env_states[i]) == canonical(ref_states[i]),
                "halted": tr.halted is not None,
                "expected_calls": len(want),
                "committed_calls": len(got),
                "backend_error": _backend_error_text(tr.backend_error),
            }
        )
    return rows


class _StateTap:
    """Collects the world snapshot after every turn."""

    def __init__(self):
        self.states: list[dict[str, Any]] = []

    def __call__(self, i, res, tr, env):
        self.states.append(env.snapshot())


def run_setting(
    setting: str,
    sols: list[Solution],
    refs: dict[str, Any],
    cfg: EvaluateConfig,
    *,
    rates: dict[str, float],
    seed: int,
    model_backend: Any = None,
    progress: Any = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run every scenario in one setting; return the aggregate and the per-turn rows."""
    cvc = not setting.endswith("no_cvc")
    kernel = Kernel(cfg.kernel.model_copy(update={"cvc": cvc}).build())
    rng = random.Random(f"noise:{seed}")
    injected: Counter = Counter()
    violations: Counter = Counter()
    recovered: Counter = Counter()
    slm_calls = backend_retries = 0
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for solution in sols:
        noisy: list[NoisyOracle] = []
        if setting == "oracle":
            factory = lambda i, turn, solution=solution: OracleBackend(turn, solution.id)  # noqa: E731
        elif setting.startswith("noise"):

            def factory(i, turn, solution=solution, noisy=noisy):
                backend = NoisyOracle(OracleBackend(turn, solution.id), rates, rng)
                noisy.append(backend)
                return backend
        else:
            factory = lambda i, turn: model_backend  # noqa: E731
        tap = _StateTap()
        res = run_solution(solution, kernel, factory, trace="steps", on_turn=tap)
        res.states = tap.states  # type: ignore[attr-defined]
        turn_rows = score_run(solution, refs[solution.id], res)
        for row in turn_rows:
            row["setting"] = setting
        failed = [row for row in turn_rows if row["backend_error"]]
        if failed and cfg.backend_errors == "fail":
            row = failed[0]
            raise RunFailed(
                f"setting {setting}, scenario {solution.id}, turn {row['turn']}: {row['backend_error']}. "
                "The evaluation stopped and wrote no figures (a backend failure is not a model answer); "
                "backend_errors=count counts such turns as failed and lists them",
                str(getattr(cfg.backend, "base_url", None) or getattr(cfg.backend, "bundle", None) or cfg.backend.name),
            )
        rows += turn_rows
        backend_retries += sum(t.backend_retries for t in res.turns)
        for tr in res.traces:
            for rec in tr:
                if rec.action == "backend_error":
                    continue  # not a verdict on the model's answer
                if rec.kind == "slm":
                    if not rec.contract.get("ok"):
                        violations[rec.primitive] += 1
                    elif rec.attempt > 0:
                        recovered[rec.primitive] += 1
        slm_calls += sum(t.slm_calls for t in res.turns)
        for backend in noisy:
            injected.update(backend.injected)
        if progress:
            progress(setting, solution.id)
    by_sol: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_sol.setdefault(row["solution_id"], []).append(row)
    n = len(rows)
    out = {
        "label": LABELS[setting],
        "simulation": setting.startswith("noise"),
        "cvc": cvc,
        "scenarios": len(by_sol),
        "turns": n,
        "turn_call_match": sum(r["call_match"] for r in rows) / n,
        "turn_state_match": sum(r["state_match"] for r in rows) / n,
        "scenario_call_match": sum(all(r["call_match"] for r in v) for v in by_sol.values()) / len(by_sol),
        "scenario_state_match": sum(all(r["state_match"] for r in v) for v in by_sol.values()) / len(by_sol),
        "halted_turns": sum(r["halted"] for r in rows),
        "contract_violations": {p: violations.get(p, 0) for p in PRIMITIVE_NAMES},
        "recovered_by_retry": {p: recovered.get(p, 0) for p in PRIMITIVE_NAMES},
        "slm_calls": slm_calls,
        "backend_error_turns": sum(bool(r["backend_error"]) for r in rows),
        "backend_errors": [
            {"solution_id": r["solution_id"], "turn": r["turn"], "message": r["backend_error"]}
            for r in rows
            if r["backend_error"]
        ],
        "backend_retries": backend_retries,
        "elapsed_s": round(time.perf_counter() - t0, 2),
    }
    if setting.startswith("noise"):
        out["injected_errors"] = dict(sorted(injected.items()))
    return out, rows


def noise_sweep(sols: list[Solution], refs: dict[str, Any], cfg: EvaluateConfig) -> list[dict[str, Any]]:
    """SIMULATION: end-to-end call-sequence match vs. a uniform per-primitive error rate, with and without CVC."""
    table = []
    for rate in cfg.noise.sweep:
        rates = {p: rate for p in PRIMITIVE_NAMES}
        row: dict[str, Any] = {"rate": rate}
        for setting in ("noise_cvc", "noise_no_cvc"):
            turn, scen = [], []
            for k in range(cfg.noise.sweep_seeds):
                result, _ = run_setting(setting, sols, refs, cfg, rates=rates, seed=cfg.noise.seed + 1000 + k)
                turn.append(result["turn_call_match"])
                scen.append(result["scenario_call_match"])
            row[setting] = {"turn_call_match": sum(turn) / len(turn), "scenario_call_match": sum(scen) / len(scen)}
        table.append(row)
    return table


def evaluate(cfg: EvaluateConfig, *, progress: Any = None, model_backend: Any = None) -> dict[str, Any]:
    from forethought.errors import check_output_dir

    check_output_dir(cfg.output_dir, "output_dir")  # checked up front, created only when there are figures to write
    sols = [solution.rendered() for solution in held_out(cfg)]
    if not sols:
        raise UserError("no held-out scenarios to evaluate", cfg.dataset_dir)
    refs = {}
    for solution in sols:
        try:
            refs[solution.id] = reference_states(solution)
        except Divergence as divergence:
            raise UserError(
                f"reference calls do not replay: {divergence.describe()}", solution.source_file or solution.id
            ) from None
    needs_model = any(x.startswith("bundle") for x in cfg.settings)
    if needs_model and model_backend is None:
        model_backend = make_model_backend(cfg.backend)
    results: dict[str, Any] = {}
    per_turn: list[dict[str, Any]] = []
    for setting in cfg.settings:
        results[setting], rows = run_setting(
            setting,
            sols,
            refs,
            cfg,
            rates=cfg.noise.rates,
            seed=cfg.noise.seed,
            model_backend=model_backend,
            progress=progress,
        )
        per_turn += rows
    summary = {
        "scenarios": [s.id for s in sols],
        "settings": results,
        "noise": cfg.noise.model_dump(),
        "noise_sweep": noise_sweep(sols, refs, cfg) if cfg.noise.sweep else [],
        "backend": cfg.backend.model_dump() if needs_model else None,
        "kernel": cfg.kernel.model_dump(),
    }
    out = Path(cfg.output_dir)
    atomic_write_json(out / "results.json", summary)
    atomic_write_jsonl(out / "per_turn.jsonl", per_turn)
    atomic_write_text(out / "evaluation.md", evaluation_markdown(summary))
    plot_evaluation(summary, out / "evaluation.png")
    return summary


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def evaluation_markdown(summary: dict[str, Any]) -> str:
    settings = summary["settings"]
    lines = [
        f"Held-out scenarios: {len(summary['scenarios'])} (solutions in no training split).",
        "",
        "| Setting | Turns | Call-sequence match (turn) | State match (turn) | Scenario: all calls | Scenario: all states | Halted turns |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in settings.values():
        lines.append(
            f"| {result['label']} | {result['turns']} | {_pct(result['turn_call_match'])} | {_pct(result['turn_state_match'])} | "
            f"{_pct(result['scenario_call_match'])} | {_pct(result['scenario_state_match'])} | {result['halted_turns']} |"
        )
    lines += [
        "",
        "Contract violations per primitive (which primitive to retrain); in brackets: answers accepted after a retry with feedback.",
        "",
    ]
    lines.append("| Setting | " + " | ".join(PRIMITIVE_NAMES) + " |")
    lines.append("| --- |" + " ---: |" * len(PRIMITIVE_NAMES))
    for result in settings.values():
        cells = [f"{result['contract_violations'][p]} ({result['recovered_by_retry'][p]})" for p in PRIMITIVE_NAMES]
        lines.append(f"| {result['label']} | " + " | ".join(cells) + " |")
    failed = {k: result for k, result in settings.items() if result.get("backend_error_turns")}
    if failed:
        lines += [
            "",
            "**Backend errors.** These turns got no answer from the backend (after its retries); they are "
            "counted as failed turns above, and say nothing about the model:",
            "",
        ]
        for k, result in failed.items():
            lines.append(
                f"- {k}: {result['backend_error_turns']} of {result['turns']} turns ({result['backend_retries']} backend retries)"
            )
            for error in result["backend_errors"][:10]:
                lines.append(f"  - {error['solution_id']} turn {error['turn']}: {error['message']}")
            if len(result["backend_errors"]) > 10:
                lines.append(f"  - ... {len(result['backend_errors']) - 10} more in results.json")
    if any(result["simulation"] for result in settings.values()):
        rates = ", ".join(f"{p} {100 * v:.0f}%" for p, v in summary["noise"]["rates"].items())
        lines += [
            "",
            f"**Simulation.** The `noise_*` rows are not model results: the oracle's answers were corrupted at these "
            f"per-primitive rates: {rates} (seed {summary['noise']['seed']}), each answer independently, retries included. "
            "Some injected errors are detectable by the primitive's contract (truncated JSON, unregistered tools, "
            "ungrounded values, non-permutations); others are not (a wrong but registered tool, swapped independent tasks).",
        ]
        for k, result in settings.items():
            if result["simulation"]:
                lines.append(
                    f"- {k}: injected {sum(result['injected_errors'].values())} errors: "
                    + ", ".join(f"{a} {b}" for a, b in result["injected_errors"].items())
                )
    if summary.get("noise_sweep"):
        n = summary["noise"]["sweep_seeds"]
        lines += [
            "",
            f"**Simulation sweep** (same scenarios; the same error rate for every primitive; mean of {n} seeds): "
            "call-sequence match with and without the contract-and-control layer. At 0 % the run without CVC still "
            "misses what the layer itself does: the inline retrievals of absent prerequisites, and blocking tasks "
            "whose prerequisites are not met.",
            "",
            "| injected error rate per primitive | turns, CVC | turns, no CVC | scenarios, CVC | scenarios, no CVC |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in summary["noise_sweep"]:
            with_cvc, without_cvc = row["noise_cvc"], row["noise_no_cvc"]
            lines.append(
                f"| {100 * row['rate']:.0f}% | {_pct(with_cvc['turn_call_match'])} | {_pct(without_cvc['turn_call_match'])} | "
                f"{_pct(with_cvc['scenario_call_match'])} | {_pct(without_cvc['scenario_call_match'])} |"
            )
    return "\n".join(lines) + "\n"


def plot_evaluation(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = summary["settings"]
    sweep = summary.get("noise_sweep") or []
    fig, axes = plt.subplots(1, 2 if sweep else 1, figsize=(13 if sweep else 8.5, 3.8), squeeze=False)
    ax = axes[0][0]
    names = list(settings)
    positions = range(len(names))
    ax.bar(
        [i - 0.2 for i in positions],
        [100 * settings[n]["turn_call_match"] for n in names],
        width=0.4,
        label="call sequence (turn)",
        color="#1a73e8",
    )
    ax.bar(
        [i + 0.2 for i in positions],
        [100 * settings[n]["turn_state_match"] for n in names],
        width=0.4,
        label="end state (turn)",
        color="#34a853",
    )
    # the settings named as the tables name them (their label, wrapped; "\n" is the only difference)
    ax.set_xticks(list(positions), [textwrap.fill(settings[n]["label"], 17) for n in names], fontsize=7)
    ax.set_ylabel("match (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8)
    ax.set_title(f"End-to-end accuracy on {len(summary['scenarios'])} held-out scenarios")
    if sweep:
        ax2 = axes[0][1]
        rates = [100 * r["rate"] for r in sweep]
        for key, label, color in (("noise_cvc", "with CVC", "#1a73e8"), ("noise_no_cvc", "without CVC", "#d93025")):
            ax2.plot(
                rates,
                [100 * r[key]["turn_call_match"] for r in sweep],
                marker="o",
                color=color,
                label=f"turns, {label}",
            )
            ax2.plot(
                rates,
                [100 * r[key]["scenario_call_match"] for r in sweep],
                marker="s",
                ls="--",
                color=color,
                label=f"scenarios, {label}",
            )
        ax2.set_xlabel("injected error rate per primitive (%)")
        ax2.set_ylabel("call-sequence match (%)")
        ax2.set_ylim(0, 105)
        ax2.legend(fontsize=8)
        ax2.set_title("SIMULATION: oracle with injected errors")
    fig.tight_layout()
    atomic_write_figure(path, fig)


def cli(args: list[str]) -> int:
    from rich.console import Console

    from forethought.arguments import load, split_args

    cfg = load("evaluate", split_args(args), EvaluateConfig)
    if cfg is None:
        return 0
    console = Console(stderr=True)
    with console.status("evaluating...") as st:
        summary = evaluate(cfg, progress=lambda setting, sid: st.update(f"{setting}: {sid}"))
    console.print(evaluation_markdown(summary))
    console.print(f"wrote {cfg.output_dir}/results.json, evaluation.md, evaluation.png")
    return 0
