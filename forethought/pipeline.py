"""``forethought pipeline``: verify → generate → train → validate → package → evaluate → report.

One run folder holds every stage's output and ``report.md``. Each stage is
skipped when its inputs have not changed: a fingerprint of the stage's
resolved config, the content of its input files, the source code it runs and
the versions of the libraries it depends on (torch, transformers, peft, trl)
is stored after it succeeds, and compared on the next run. The digests of its
outputs (for train: every adapter's files) are stored too; a missing or
changed output makes the stage run again. A skipped stage is reported with
its stored record (when it ran and how long it took).

Every stage's config is composed (``conf/<stage>.yaml`` + the profile's
overrides) and validated before anything runs, and all errors are reported
at once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forethought.bounded import read_json_object
from forethought.config import RUN_DIR, ConfigError, compose_config, recorded_command, shipped_path, validate
from forethought.errors import UserError
from forethought.primitives.io import atomic_write_figure, atomic_write_json, atomic_write_text
from forethought.training.config import BUILT_HERE

STAGES = ("verify", "generate", "base", "train", "validate", "package", "evaluate")
StageName = Literal["verify", "generate", "base", "train", "validate", "package", "evaluate"]
# Libraries whose version is part of a stage's fingerprint (an upgrade can change what the stage produces).
TRAIN_LIBS = ("torch", "transformers", "peft", "trl")
MODEL_LIBS = ("torch", "transformers", "peft")
# The code a model stage's output depends on (its fingerprint covers these files).
MODEL_CODE = ["training", "forethought/bundle", "data_gen/row.py", "kernel/specs"]


class PipelineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile: Literal["tiny", "small", "converge", "paper"] = "tiny"  # set by the profile group (conf/profile/*.yaml)
    run_dir: str = RUN_DIR
    force: bool = False
    stages: list[StageName] = Field(default_factory=lambda: list(STAGES), min_length=1)
    model_path: str | None = None  # Gemma-3-12B local folder for profile=paper
    overrides: dict[StageName, list[str]] = Field(default_factory=dict)


# ------------------------------------------------------------- fingerprints
def _file_digest(path: Path, big: int = 64 * 1024 * 1024) -> str:
    st = path.stat()
    if st.st_size > big:  # large weights: size and mtime stand in for content
        return f"size:{st.st_size}:mtime:{st.st_mtime_ns}"
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# Not inputs of a later stage: logs written asynchronously (wandb), resume state, Hydra's run folders.
_NOT_INPUTS = {"wandb", "checkpoints", "hydra", "multirun"}


def _lib_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "<not installed>"


def input_manifest(inputs: list[Path], code: list[str], libs: tuple[str, ...] | list[str] = ()) -> dict[str, str]:
    """path -> digest of every input file and every source file the stage runs (hidden folders, logs and checkpoints
    skipped), plus ``python-package:<name>`` -> version of every library the stage's results depend on."""
    out: dict[str, str] = {}
    for input_path in inputs:
        if not input_path.exists():
            out[str(input_path)] = "<missing>"
        elif input_path.is_file():
            out[str(input_path)] = _file_digest(input_path)
        else:
            for path in sorted(input_path.rglob("*")):
                parts = path.relative_to(input_path).parts
                if path.is_file() and not any(part.startswith(".") or part in _NOT_INPUTS for part in parts):
                    out[str(path)] = _file_digest(path)
    for pkg in code:
        # Found through the installed package (a wheel or the source tree), named as in the source tree.
        src = shipped_path(pkg)
        for path in sorted(src.rglob("*.py")) if src.is_dir() else [src]:
            out[f"{pkg}/{path.relative_to(src).as_posix()}" if src.is_dir() else pkg] = _file_digest(path)
    for lib in libs:
        out[f"python-package:{lib}"] = _lib_version(lib)
    return out


def fingerprint(config: Any, manifest: dict[str, str]) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps(config, sort_keys=True, default=str).encode())
    digest.update(json.dumps(manifest, sort_keys=True).encode())
    return digest.hexdigest()


def why_changed(prev: dict[str, Any], config: Any, manifest: dict[str, str]) -> str:
    if prev.get("config") != json.loads(json.dumps(config, default=str)):
        return "its config changed"
    old = prev.get("inputs", {})
    for k in sorted(set(old) | set(manifest)):
        if old.get(k) != manifest.get(k):
            what = "added" if k not in old else ("removed" if k not in manifest else "changed")
            return f"{k} {what}"
    return "its inputs changed"


@dataclass
class Stage:
    name: str
    config: Any  # validated pydantic config
    inputs: list[Path]
    outputs: list[Path]
    code: list[str]
    run: Callable[[], Any]
    libs: tuple[str, ...] = ()
    # Run again after an interruption, keeping what the interrupted run finished (training: its checkpoints).
    resume: Callable[[], Any] | None = None
    status: str = "pending"
    seconds: float = 0.0
    note: str = ""
    result: Any = None
    record: dict[str, Any] | None = None  # the stored record of the run a skipped stage reuses


@dataclass
class PipelineRun:
    cfg: PipelineConfig
    run_dir: Path
    stages: dict[str, Stage] = field(default_factory=dict)


# ------------------------------------------------------------ stage configs
def _stage_overrides(cfg: PipelineConfig, run: Path) -> dict[str, list[str]]:
    run_dir = str(run)
    paths = {
        "verify": [],
        "generate": [f"data.output_dir={run_dir}/data"],
        # The pipeline owns its run folder: a stage that reruns (its inputs changed) replaces the old runs.
        # The base stage pretrains the base (built-here profiles) or records the checkpoint (gemma3_12b);
        # the train stage reuses it and trains the five adapters.
        "base": [
            f"dataset_dir={run_dir}/data",
            f"output_dir={run_dir}/train",
            "primitive=base",
            "train.overwrite=true",
        ],
        "train": [
            f"dataset_dir={run_dir}/data",
            f"output_dir={run_dir}/train",
            "primitive=all",
            "train.overwrite=true",
        ],
        "validate": [f"train_dir={run_dir}/train", f"dataset_dir={run_dir}/data", f"output_dir={run_dir}/validate"],
        "package": [
            f"train_dir={run_dir}/train",
            f"validate_dir={run_dir}/validate",
            f"dataset_dir={run_dir}/data",
            f"output_dir={run_dir}/bundle",
        ],
        "evaluate": [
            f"dataset_dir={run_dir}/data",
            f"output_dir={run_dir}/evaluate",
            "backend=hf",
            f"backend.bundle={run_dir}/bundle",
        ],
    }
    out = {}
    for stage in STAGES:
        # The base stage is a run of `forethought train` (primitive=base) with the train stage's settings.
        ov = list(cfg.overrides.get("train" if stage == "base" else stage, []))
        if stage in ("base", "train") and cfg.model_path:
            ov.append(f"model.path={cfg.model_path}")
        # The profile's overrides may choose groups; the pipeline's paths come last and win.
        out[stage] = ov + paths[stage]
    return out


def _schemas() -> dict[str, type[BaseModel]]:
    from forethought.data_gen.generate import GenerateConfig
    from forethought.data_gen.verify import VerifyConfig
    from forethought.evaluation import EvaluateConfig
    from forethought.training.config import TrainConfig
    from forethought.training.package import PackageConfig
    from forethought.training.validate import ValidateConfig

    return {
        "verify": VerifyConfig,
        "generate": GenerateConfig,
        "base": TrainConfig,
        "train": TrainConfig,
        "validate": ValidateConfig,
        "package": PackageConfig,
        "evaluate": EvaluateConfig,
    }


def build(cfg: PipelineConfig) -> PipelineRun:
    run = Path(cfg.run_dir)
    ovs = _stage_overrides(cfg, run)
    schemas = _schemas()
    configs: dict[str, Any] = {}
    errors: list[str] = []
    for stage in STAGES:  # validate every stage's config up front; report all errors together
        try:
            name = "train" if stage == "base" else stage  # the base stage is `forethought train primitive=base`
            configs[stage] = validate(compose_config(name, ovs[stage]), schemas[stage], f"conf/{name}.yaml")
        except ConfigError as exc:
            errors += [f"{stage}: {e}" for e in exc.errors]
    if "train" in cfg.stages and "train" in configs and configs["train"].model.profile not in BUILT_HERE:
        # A real base model must be on disk before verify and generate spend any time.
        from forethought.training.models import require_local_path

        try:
            require_local_path(configs["train"].model)
        except UserError as exc:
            errors.append(f"train: {exc} (give it as model_path=...)")
    demos = configs["generate"].data.demonstrations if "generate" in configs else None
    if demos is not None and "train" in configs and configs["train"].train.dev_fraction > 0:
        # the store leaves out the dev split train will carve: the same split, or selection reads shown neighbours
        carved = (configs["train"].train.dev_fraction, configs["train"].seed)
        if (demos.dev_fraction, demos.dev_seed) != carved:
            errors.append(
                f"generate: data.demonstrations leaves out the dev split dev_fraction={demos.dev_fraction} "
                f"dev_seed={demos.dev_seed}, but train carves dev_fraction={carved[0]} seed={carved[1]}: make them equal"
            )
    if errors:
        raise ConfigError(f"pipeline (profile {cfg.profile})", errors)
    pr = PipelineRun(cfg, run)
    sol = [Path(p) for p in configs["verify"].paths]
    code_kernel = ["primitives", "kernel"]
    data_cfg = configs["generate"].data
    train_out = run / "train"
    # Every adapter's files, not only base.json: a deleted or modified adapter makes the stage rerun.
    train_outputs = [train_out / "base.json"] + [
        train_out / p / f for p in configs["train"].primitives() for f in ("adapter", "metrics.json", "run_state.json")
    ]
    built_here = configs["base"].model.profile in BUILT_HERE
    # The pretrained base (built-here profiles) is the base stage's output and the train stage's input.
    base_outputs = [train_out / "base.json"] + (
        [train_out / "base", train_out / "base_run" / "metrics.json"] if built_here else []
    )
    # The hf backend loads the bundle, its base and tokenizer with forethought/bundle (the training stages use it too).
    bundle_code = ["forethought/bundle"]
    eval_libs = MODEL_LIBS if any(x.startswith("bundle") for x in configs["evaluate"].settings) else ()
    pr.stages = {
        "verify": Stage(
            "verify",
            configs["verify"],
            sol,
            [],
            code_kernel + ["data_gen/verify.py"],
            lambda: _verify(configs["verify"]),
        ),
        "generate": Stage(
            "generate",
            configs["generate"],
            [Path(p) for p in data_cfg.solutions]
            + [shipped_path("data_gen/slot_values")]
            + ([Path(data_cfg.held_out)] if data_cfg.held_out else []),
            [run / "data" / "stats.json"],
            code_kernel + ["data_gen"],
            lambda: _generate(configs["generate"]),
        ),
        "base": Stage(
            "base",
            configs["base"],
            [run / "data"],
            base_outputs,
            MODEL_CODE,
            lambda: _train(configs["base"]),
            libs=TRAIN_LIBS,
            resume=lambda: _train(_resuming(configs["base"])),
        ),
        "train": Stage(
            "train",
            configs["train"],
            [run / "data", *base_outputs[1:2]],
            train_outputs,
            MODEL_CODE,
            lambda: _train(configs["train"]),
            libs=TRAIN_LIBS,
            resume=lambda: _train(_resuming(configs["train"])),
        ),
        "validate": Stage(
            "validate",
            configs["validate"],
            [run / "train", run / "data"],
            [run / "validate" / "gates.json"],
            [*MODEL_CODE, "kernel/backends/hf.py", "kernel/backends/constrained.py"],
            lambda: _validate(configs["validate"]),
            libs=MODEL_LIBS,
        ),
        "package": Stage(
            "package",
            configs["package"],
            [run / "train", run / "validate" / "gates.json", run / "data" / "stats.json"],
            [run / "bundle" / "manifest.json"],
            MODEL_CODE,
            lambda: _package(configs["package"]),
            libs=MODEL_LIBS,
        ),
        "evaluate": Stage(
            "evaluate",
            configs["evaluate"],
            [run / "bundle", run / "data" / "stats.json"] + sol,
            [run / "evaluate" / "results.json"],
            code_kernel + ["forethought/evaluation.py", "data_gen/verify.py"] + bundle_code,
            lambda: _evaluate(configs["evaluate"]),
            libs=eval_libs,
        ),
    }
    return pr


# --------------------------------------------------------------- stage runs
def _verify(cfg: Any) -> Any:
    from forethought.data_gen.verify import PATTERN_TAGS, coverage, coverage_minimums, verify_paths

    res = verify_paths(cfg.paths)
    bad = [r for r in res if not r.ok]
    if bad:
        raise UserError(f"{len(bad)} solution(s) do not verify; first: {bad[0].error}", bad[0].path)
    doms, tags = coverage(res)
    min_dom, min_tag = coverage_minimums(cfg, cfg.paths)  # as `forethought verify` applies them
    short = [f"domain {d}: {n} < {min_dom}" for d, n in sorted(doms.items()) if n < min_dom]
    short += [f"pattern {t}: {tags.get(t, 0)} < {min_tag}" for t in PATTERN_TAGS if tags.get(t, 0) < min_tag]
    if short:
        raise UserError("coverage below the minimum: " + "; ".join(short), ", ".join(map(str, cfg.paths)))
    return {"solutions": len(res), "domains": dict(sorted(doms.items())), "tags": dict(sorted(tags.items()))}


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _generate(cfg: Any) -> Any:
    from forethought.data_gen.generate import generate

    with _console().status("generate: round 0") as st:
        return generate(
            cfg.data,
            progress=lambda r, counts: st.update(
                f"generate: round {r}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
            ),
        )


def _resuming(cfg: Any) -> Any:
    """The stage's train config continuing its interrupted run (its checkpoints, its finished adapters) instead of
    replacing it: the same inputs, so what it finished is still right."""
    return cfg.model_copy(update={"train": cfg.train.model_copy(update={"overwrite": False, "resume": True})})


def _train(cfg: Any) -> Any:
    from forethought.training.train import run as train_run

    results = train_run(cfg)  # prints its own per-step progress
    return {p: r.metrics for p, r in results.items()}


def _validate(cfg: Any) -> Any:
    from forethought.training.validate import validate_with_progress

    return validate_with_progress(cfg, _console())


def _package(cfg: Any) -> Any:
    from forethought.training.package import package

    return str(package(cfg))


def _evaluate(cfg: Any) -> Any:
    from forethought.evaluation import evaluate

    with _console().status("evaluate") as st:
        return evaluate(cfg, progress=lambda setting, sid: st.update(f"evaluate: {setting}: {sid}"))


# -------------------------------------------------------------------- run
def execute(pr: PipelineRun, console: Any) -> None:
    state_dir = pr.run_dir / ".stages"
    for name in STAGES:
        st = pr.stages[name]
        if name not in pr.cfg.stages:
            st.status, st.note = "not selected", ""
            continue
        config = st.config.model_dump(mode="json")
        manifest = input_manifest(st.inputs, st.code, st.libs)
        fp = fingerprint(config, manifest)
        rec_path = state_dir / f"{name}.json"
        prev = read_json_object(rec_path) if rec_path.is_file() else None
        out_problem = _outputs_problem(st, prev) if prev else None
        if not pr.cfg.force and prev and prev.get("fingerprint") == fp and out_problem is None:
            st.status, st.seconds, st.record = "skipped", 0.0, prev
            st.note = f"unchanged since {prev.get('finished')}; ran in {prev.get('seconds')} s"
            st.result = prev.get("result")
            console.print(f"[dim]{name:<9} skipped: inputs unchanged since {prev.get('finished')}[/dim]")
            continue
        reason = (
            "forced"
            if pr.cfg.force
            else (
                "first run"
                if prev is None
                else (out_problem if prev.get("fingerprint") == fp else why_changed(prev, config, manifest))
            )
        )
        # A stage that started with these very inputs and did not finish (killed) continues where it stopped.
        started_path = state_dir / f"{name}.started.json"
        started = read_json_object(started_path) if started_path.is_file() else None
        resume = st.resume is not None and not pr.cfg.force and started is not None and started.get("fingerprint") == fp
        if resume:
            reason = f"resuming the run interrupted after {started.get('started')}"
        console.rule(f"[bold]{name}[/bold] ({reason})")
        atomic_write_json(
            started_path,
            {
                "fingerprint": fp,
                "started": (started or {}).get("started")
                if resume
                else dt.datetime.now().isoformat(timespec="seconds"),
            },
        )
        t0 = time.perf_counter()
        st.result = st.resume() if resume and st.resume is not None else st.run()
        st.seconds = time.perf_counter() - t0
        st.status = "ran"
        summary = _summarise(name, st.result)
        atomic_write_json(
            rec_path,
            {
                "fingerprint": fp,
                "finished": dt.datetime.now().isoformat(timespec="seconds"),
                "seconds": round(st.seconds, 1),
                "config": config,
                "inputs": manifest,
                "outputs": input_manifest(st.outputs, []),
                "result": summary,
            },
        )
        started_path.unlink(missing_ok=True)
        st.result = summary
        console.print(f"{name:<9} done in {st.seconds:.1f} s")


def _outputs_problem(st: Stage, prev: dict[str, Any]) -> str | None:
    """Why the stage's stored outputs cannot be reused (one missing, or changed since the stage wrote it), or None."""
    missing = [o for o in st.outputs if not o.exists()]
    if missing:
        return f"an output is missing: {missing[0]}"
    recorded = prev.get("outputs")
    if recorded is None:  # a record from before output digests were kept
        return None
    now = input_manifest(st.outputs, [])
    for k in sorted(set(recorded) | set(now)):
        if recorded.get(k) != now.get(k):
            what = "added" if k not in recorded else ("missing" if k not in now or now[k] == "<missing>" else "changed")
            return f"an output is {what}: {k}"
    return None


def _summarise(name: str, result: Any) -> Any:
    """What the report needs from a stage, JSON-safe (stored so a skipped stage can still be reported)."""
    try:
        json.dumps(result, default=str)
        return json.loads(json.dumps(result, default=str))
    except Exception:
        return str(result)


# ----------------------------------------------------------------- report
def machine() -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores, {gpu}, Python {platform.python_version()}, torch {torch.__version__}"


# What training and decoding run through: one install and the next can train the same data and base to figures a
# point or two apart (docs/training.md, "Recorded run #11"), so a report names the versions it was made with.
REPORTED_LIBRARIES = (
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "tokenizers",
    "datasets",
    "safetensors",
    "llguidance",
)


def library_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return ", ".join(f"{name} {installed(name)}" for name in REPORTED_LIBRARIES)


def _combined_loss_png(train_dir: Path, out: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from forethought.kernel.specs import PRIMITIVE_NAMES

    fig, ax = plt.subplots(figsize=(8, 3.6))
    any_curve = False
    for primitive in PRIMITIVE_NAMES:
        metrics_path = train_dir / primitive / "metrics.json"
        if not metrics_path.is_file():
            continue
        metrics = read_json_object(metrics_path)
        hist = metrics.get("train_loss_history") or metrics.get("loss_history") or []
        pts = [(h["step"], h["loss"]) for h in hist if isinstance(h, dict) and "loss" in h and "step" in h]
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], label=primitive)
            any_curve = True
    if not any_curve:
        plt.close(fig)
        return False
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (completion tokens)")
    ax.legend(fontsize=8)
    ax.set_title("Training loss per primitive")
    fig.tight_layout()
    atomic_write_figure(out, fig)
    return True


def _learning_curve_png(train_dir: Path, out: Path) -> bool:
    """Exact match against steps: the base stage (every primitive, no adapter) and each adapter (its own primitive)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from forethought.kernel.specs import PRIMITIVE_NAMES

    curves = []
    base = train_dir / "base_run" / "metrics.json"
    if base.is_file():
        curves.append(("base", read_json_object(base).get("exact_match_history") or []))
    for primitive in PRIMITIVE_NAMES:
        metrics_path = train_dir / primitive / "metrics.json"
        if metrics_path.is_file():
            curves.append((f"adapter {primitive}", read_json_object(metrics_path).get("exact_match_history") or []))

    def has_em(hist: list[dict[str, Any]]) -> bool:
        return any(k.startswith("em/") for h in hist for k in h)

    # one panel per group that has a curve: a base stage run without em_eval_steps leaves no empty panel behind
    groups = [
        (title, [(label, hist) for label, hist in curves if (label == "base") == is_base and has_em(hist)])
        for title, is_base in (("base stage (no adapter)", True), ("adapters (each on its own primitive)", False))
    ]
    groups = [(title, cs) for title, cs in groups if cs]
    if not groups:
        return False
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 3.6), squeeze=False)
    for ax, (title, cs) in zip(axes[0], groups, strict=True):
        for label, hist in cs:
            for k in sorted({k for h in hist for k in h if k.startswith("em/")}):
                pts = [(h["step"], 100 * h[k]) for h in hist if k in h]
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker=".", label=k[3:] if label == "base" else label)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel("exact match (%)")
        ax.set_ylim(-2, 102)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    atomic_write_figure(out, fig)
    return True


def _dev_curve_png(train_dir: Path, out: Path) -> bool:
    """Each adapter's exact match on its dev rows (carved from train solutions) at every epoch's end, the kept epoch marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from forethought.kernel.specs import PRIMITIVE_NAMES

    fig, ax = plt.subplots(figsize=(8, 3.6))
    for primitive in PRIMITIVE_NAMES:
        metrics_path = train_dir / primitive / "metrics.json"
        if not metrics_path.is_file():
            continue
        metrics = read_json_object(metrics_path)
        pts = [
            (e["epoch"], 100 * e["eval_exact_match"])
            for e in metrics.get("eval_history") or []
            if "eval_exact_match" in e
        ]
        if not pts:
            continue
        (line,) = ax.plot([x for x, _ in pts], [y for _, y in pts], marker=".", label=primitive)
        best = (metrics.get("selection") or {}).get("best_global_step")
        kept = [
            (e["epoch"], 100 * e["eval_exact_match"])
            for e in metrics["eval_history"]
            if e.get("step") == best and "eval_exact_match" in e
        ]
        if kept:
            ax.scatter([kept[0][0]], [kept[0][1]], s=80, facecolors="none", edgecolors=line.get_color(), zorder=3)
    if not ax.lines:
        plt.close(fig)
        return False
    ax.set_xlabel("epoch")
    ax.set_ylabel("exact match on dev rows (%)")
    ax.set_ylim(-2, 102)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Adapters: dev exact match per epoch (circled: the epoch kept)")
    fig.tight_layout()
    atomic_write_figure(out, fig)
    return True


LOSS_TOKENS = {"completion": "completion tokens", "prompt": "prompt tokens", "full": "all tokens"}


def _base_loss_png(metrics: dict[str, Any], out: Path) -> bool:
    """The base stage's train loss against steps; the y axis names the tokens the loss is on (its ``loss`` setting:
    the requests only for ``prompt``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hist = metrics.get("train_loss_history") or []
    pts = [
        (h["step"], h["loss"])
        for h in hist
        if isinstance(h, dict) and isinstance(h.get("step"), (int, float)) and isinstance(h.get("loss"), (int, float))
    ]
    if not pts:
        return False
    kind = metrics.get("loss") or "completion"
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.plot([x for x, _ in pts], [y for _, y in pts], marker="." if len(pts) < 30 else None, label="train loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(f"train loss ({LOSS_TOKENS.get(kind, kind)})")
    ax.set_title(f"Base stage: full-parameter training, {kind} loss")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write_figure(out, fig)
    return True


def _datasets_png(stats_path: Path, out: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not stats_path.is_file():
        return False
    st = read_json_object(stats_path)["primitives"]
    names = list(st)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4))
    positions = range(len(names))
    a1.bar(list(positions), [st[n]["train"]["examples"] for n in names], label="train", color="#1a73e8")
    a1.bar(
        list(positions),
        [st[n]["validation"]["examples"] for n in names],
        bottom=[st[n]["train"]["examples"] for n in names],
        label="validation (held-out solutions)",
        color="#fbbc04",
    )
    a1.set_xticks(list(positions), names, rotation=15, fontsize=8)
    a1.set_ylabel("examples")
    a1.legend(fontsize=8)
    a1.set_title("Examples per primitive")
    a2.bar(
        [i - 0.2 for i in positions],
        [st[n]["train"]["prompt_tokens"]["median"] for n in names],
        width=0.4,
        label="prompt (median)",
        color="#34a853",
    )
    a2.bar(
        [i + 0.2 for i in positions],
        [st[n]["train"]["target_tokens"]["median"] for n in names],
        width=0.4,
        label="target (median)",
        color="#ea4335",
    )
    a2.set_xticks(list(positions), names, rotation=15, fontsize=8)
    a2.set_ylabel("pre-tokenizer tokens")
    a2.legend(fontsize=8)
    a2.set_title("Lengths (train split)")
    fig.tight_layout()
    atomic_write_figure(out, fig)
    return True


def _read_object(path: Path) -> dict[str, Any] | None:
    """A stage's JSON output, or None where it is absent or unreadable (the report then says "not run")."""
    if not path.is_file():
        return None
    try:
        return read_json_object(path)
    except UserError:
        return None


def _pct(fraction: Any) -> str:
    return f"{100 * fraction:.1f} %" if isinstance(fraction, (int, float)) else "—"


# the end-to-end settings the headline compares (their labels are the tables' and the plot's: forethought/evaluation.py)
HEADLINE = ("bundle_cvc", "bundle_no_cvc")


def verdict_lines(pr: PipelineRun) -> list[str]:
    """The report's opening block: the gates passed and failed per primitive, whether the bundle is smoke, the
    end-to-end headline with CVC on and off, and any stage that did not finish. Read from the stages' own outputs,
    with the names their tables and plots use."""
    run = pr.run_dir
    out = ["## Verdict", ""]
    unfinished = [s.name for s in pr.stages.values() if s.status not in ("ran", "skipped", "not selected")]
    if unfinished:
        out.append(
            f"- **Stages not finished**: {', '.join(unfinished)} (see Stages; what follows is from earlier runs where present)."
        )
    gates = _read_object(run / "validate" / "gates.json")
    prims = gates.get("primitives") if gates else None
    if isinstance(prims, dict) and prims:
        passed = [p for p, r in prims.items() if isinstance(r, dict) and r.get("passed")]
        failed = [p for p in prims if p not in passed]
        detail = [
            f"{p} {'pass' if p in passed else 'FAIL'} ({_pct(prims[p].get('exact_match'))} vs {_pct(prims[p].get('threshold'))})"
            for p in prims
        ]
        word = "all passed" if not failed else f"**{len(failed)} FAILED** ({', '.join(failed)})"
        out.append(
            f"- **Gates**: {len(passed)} of {len(prims)} passed, {word} — tuned exact match vs threshold: {'; '.join(detail)}."
        )
    else:
        out.append("- **Gates**: not measured (no `validate/gates.json`).")
    man = _read_object(run / "bundle" / "manifest.json")
    if man is None:
        out.append("- **Bundle**: not packaged.")
    elif man.get("smoke"):
        out.append(
            "- **Bundle**: **SMOKE** — packaged with failed gates allowed (`allow_failed_gates`); the kernel warns when loading it."
        )
    else:
        out.append("- **Bundle**: packaged; all gates passed.")
    res = _read_object(run / "evaluate" / "results.json")
    settings = res.get("settings") if res else None
    if isinstance(settings, dict) and all(isinstance(settings.get(k), dict) for k in HEADLINE):
        on, off = (settings[k] for k in HEADLINE)
        n = len(res.get("scenarios") or [])
        delta = 100 * (on.get("turn_call_match", 0) - off.get("turn_call_match", 0))
        out.append(
            f"- **End to end** ({n} held-out scenarios, {on.get('turns')} turns; call-sequence match per turn / per scenario): "
            f"{on.get('label', HEADLINE[0])} {_pct(on.get('turn_call_match'))} / {_pct(on.get('scenario_call_match'))}; "
            f"{off.get('label', HEADLINE[1])} {_pct(off.get('turn_call_match'))} / {_pct(off.get('scenario_call_match'))} "
            f"(CVC {delta:+.1f} points per turn)."
        )
    elif isinstance(settings, dict):
        out.append(
            "- **End to end**: the trained primitives were not evaluated with and without CVC (settings run: "
            + ", ".join(str(v.get("label", k)) if isinstance(v, dict) else k for k, v in settings.items())
            + ")."
        )
    else:
        out.append("- **End to end**: not evaluated (no `evaluate/results.json`).")
    return [*out, ""]


def write_report(pr: PipelineRun, argv: list[str]) -> Path:
    run = pr.run_dir
    lines: list[str] = [f"# forethought pipeline report — profile `{pr.cfg.profile}`", ""]
    lines += verdict_lines(pr)
    lines += [
        f"- Command: `{recorded_command(['forethought', 'pipeline', *argv])}`",
        f"- Date: {dt.datetime.now().isoformat(timespec='seconds')}",
        f"- Machine: {machine()}",
        f"- Libraries: {library_versions()}",
        "",
    ]
    train_cfg = pr.stages["train"].config if "train" in pr.stages else None
    if train_cfg is not None and train_cfg.model.profile in BUILT_HERE:
        # what each primitive trains is the profile's choice (converge: every weight), so the note reads it from the config
        tuned = (
            "fine-tunes a copy of its every weight per primitive"
            if train_cfg.train.finetuning == "full"
            else "trains one LoRA adapter per primitive on it"
        )
        lines += [
            f"> **Small-model results.** The `{pr.cfg.profile}` profile builds a small Gemma-3-architecture model here, "
            f"pretrains it full-parameter on the train splits of the five primitives (the base stage), then {tuned}, "
            "all on CPU. Its figures are small-model figures: they show that the chain works "
            "and how far such a model gets, not what Gemma-3-12B reaches (`profile=paper`, GPUs).",
            "",
        ]
    lines += ["## Stages", "", "| stage | status | seconds |", "| --- | --- | ---: |"]
    for stage in pr.stages.values():
        if stage.status == "skipped":  # nothing ran now: show the stored record of the run it reuses
            lines.append(f"| {stage.name} | skipped — {stage.note} | — |")
        else:
            lines.append(
                f"| {stage.name} | {stage.status}{' (' + stage.note + ')' if stage.note else ''} | {stage.seconds:.1f} |"
            )
    verify_result = pr.stages["verify"].result
    if isinstance(verify_result, dict):
        lines += [
            "",
            "## Worked solutions",
            "",
            f"{verify_result['solutions']} solutions verified by replay through the kernel (oracle backend).",
            "",
        ]
        lines += ["| domain | solutions |", "| --- | ---: |"] + [
            f"| {k} | {n} |" for k, n in verify_result["domains"].items()
        ]
        lines += ["", "| pattern | solutions |", "| --- | ---: |"] + [
            f"| {k} | {n} |" for k, n in verify_result["tags"].items()
        ]
    card = run / "data" / "README.md"
    if card.is_file():
        text = card.read_text().split("\n")
        table = [x for x in text if x.startswith("|")]
        lines += ["", "## Datasets", "", *table, "", f"Details: `{run / 'data' / 'stats.json'}`."]
        if _datasets_png(run / "data" / "stats.json", run / "datasets.png"):
            lines += ["", "![datasets](datasets.png)"]
    base_metrics = run / "train" / "base_run" / "metrics.json"
    if base_metrics.is_file():
        bm = read_json_object(base_metrics)
        lines += [
            "",
            "## Base stage",
            "",
            f"Full-parameter training of the {bm.get('parameters', 0) / 1e6:.1f} M-parameter base on {bm.get('train_rows')} train rows of the "
            f"five primitives mixed ({bm.get('loss')} loss; no validation row): {bm.get('global_step')} steps, "
            f"{bm.get('epochs_completed') or 0:.2f} epochs, {bm.get('tokens_per_second')} tokens/s, {bm.get('wall_time_s', 0):.0f} s, "
            f"final loss {bm.get('train_loss_last') or 0:.3g}.",
        ]
        if _base_loss_png(bm, run / "base_loss.png"):
            lines += ["", "![base loss](base_loss.png)"]
    if _learning_curve_png(run / "train", run / "exact_match_curves.png"):
        lines += [
            "",
            "### Learning curve (exact match on a fixed validation subset, monitoring only)",
            "",
            "![exact match against steps](exact_match_curves.png)",
        ]
    if _dev_curve_png(run / "train", run / "dev_exact_match_curves.png"):
        lines += [
            "",
            "### Adapters: exact match on the dev rows per epoch (the selection's measure)",
            "",
            "Dev rows come from train solutions held out of training (never a validation row); each adapter keeps the "
            "epoch of best dev exact match (circled).",
            "",
            "![dev exact match per epoch](dev_exact_match_curves.png)",
        ]
    if _combined_loss_png(run / "train", run / "loss_curves.png"):
        lines += ["", "## Training", "", "![loss curves](loss_curves.png)", ""]
        lines += [
            "| primitive | steps | epochs run | epoch kept | dev exact match kept | final train loss | eval loss | tokens/s | wall s |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        from forethought.kernel.specs import PRIMITIVE_NAMES

        for primitive in PRIMITIVE_NAMES:
            metrics_path = run / "train" / primitive / "metrics.json"
            if metrics_path.is_file():
                metrics = read_json_object(metrics_path)
                fmt = lambda x: "—" if x is None else (f"{x:.4g}" if isinstance(x, float) else str(x))  # noqa: E731
                sel = metrics.get("selection") or {}
                kept_epoch = next(
                    (
                        e.get("epoch")
                        for e in metrics.get("eval_history") or []
                        if e.get("step") == sel.get("best_global_step")
                    ),
                    None,
                )
                em = sel.get("best_dev_exact_match")
                cells = [
                    metrics.get("global_step"),
                    metrics.get("epochs_completed"),
                    kept_epoch,
                    None if em is None else f"{100 * em:.1f} %",
                    metrics.get("train_loss_last"),
                    metrics.get("eval_loss"),
                    metrics.get("tokens_per_second"),
                    metrics.get("wall_time_s"),
                ]
                lines.append(f"| {primitive} | " + " | ".join(fmt(c) for c in cells) + " |")
    gates = run / "validate" / "gates.md"
    if gates.is_file():
        shutil.copyfile(run / "validate" / "gates.png", run / "gates.png")
        lines += ["", "## Validation gates (exact match, Table-5 style)", "", gates.read_text(), "![gates](gates.png)"]
    man = run / "bundle" / "manifest.json"
    if man.is_file():
        manifest = read_json_object(man)
        verdict = (
            "**SMOKE** (failed gates allowed; the kernel warns when loading it)"
            if manifest["smoke"]
            else "all gates passed"
        )
        lines += [
            "",
            "## Bundle",
            "",
            f"`{run / 'bundle'}` — {verdict}; base `{manifest['base']['name']}`, code {manifest['code_version']}.",
        ]
    ev = run / "evaluate" / "evaluation.md"
    if ev.is_file():
        shutil.copyfile(run / "evaluate" / "evaluation.png", run / "evaluation.png")
        lines += [
            "",
            "## End-to-end evaluation (held-out scenarios)",
            "",
            ev.read_text(),
            "![evaluation](evaluation.png)",
        ]
    out = run / "report.md"
    atomic_write_text(out, "\n".join(lines) + "\n")
    return out


def cli(args: list[str]) -> int:
    from rich.console import Console

    from forethought.arguments import load, split_args

    cfg = load("pipeline", split_args(args), PipelineConfig)
    if cfg is None:
        return 0
    console = Console(stderr=True)
    pr = build(cfg)  # every stage's config, checked before anything is written
    from forethought.errors import ensure_output_dir

    ensure_output_dir(cfg.run_dir, "run_dir")  # a file there, or an unwritable folder: refused before any stage runs
    for rec in sorted((pr.run_dir / ".stages").glob("*.json")):  # a hand-edited stage record: refused before the report
        read_json_object(rec)
    t0 = time.perf_counter()
    try:
        execute(pr, console)
    finally:
        report = write_report(pr, args)
    console.print(f"pipeline finished in {time.perf_counter() - t0:.0f} s; report: {report}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli(sys.argv[1:]))
