"""``forethought train``: LoRA fine-tuning of the SLM primitives (transformers + peft + trl).

::

    forethought train primitive=match_func model=tiny
    forethought train primitive=all model=gemma3_12b model.path=/models/gemma-3-12b-it train=paper
    forethought train -m primitive=decompose,get_order,check_prerequisites,match_func,match_fill \\
        model=gemma3_12b model.path=/models/gemma-3-12b-it launcher=slurm

Output (``output_dir``, default ``runs/pipeline/train``)::

    base.json                 which base the adapters belong to (profile, path, stop tokens)
    base/                     built-here profiles (tiny, small): the pretrained base model + tokenizer
    base_run/                 ... and the base stage's run folder (training/pretrain.py)
    <primitive>/
        config.yaml           the resolved config of this run
        run_state.json        dataset hashes and base the run started from (checked on resume)
        metrics.json          loss history, eval loss, steps, tokens, tokens/s, wall time
        loss.png              loss curve
        adapter/              the LoRA adapter (adapter_model.safetensors + adapter_config.json)
        checkpoints/          trainer checkpoints (resume with train.resume=true)
        selection.json        train.refit: the selection pass's metrics, while its refit runs
        refit_checkpoints/    train.refit: the refit's trainer checkpoints
        wandb/                offline wandb run (logging=wandb_offline)

The Python API used by later commands to load the result is in
:mod:`forethought.training.artifacts`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forethought.arguments import Args, load, split_args
from forethought.bounded import read_json_object
from forethought.errors import UserError
from forethought.primitives.io import atomic_write_json, atomic_write_text
from forethought.training.config import BUILT_HERE, PRIMITIVE_NAMES, TrainConfig
from forethought.training.run_support import (
    checkpointing_kwargs,
    config_diff,
    finish_wandb,
    holds_checkpoint,
    is_main_process,
    last_checkpoint,
    read_run_config,
    resolved_config,
    start_wandb,
    temporary_environ,
    wandb_environ,
)

BASE_REF = "base.json"
STOP_TOKENS = ["<eos>", "<end_of_turn>"]


# Keys that may change between an interrupted run and its resumption.
@dataclass
class BaseRef:
    """The base model all adapters of one output folder are trained on."""

    profile: str
    path: Path
    model_type: str

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "path": str(self.path.resolve()),
            "model_type": self.model_type,
            "stop_tokens": STOP_TOKENS,
        }


@dataclass
class RunResult:
    primitive: str
    run_dir: Path
    metrics: dict[str, Any]
    trainer: Any = None  # kept only with keep_trainer=True (tests, notebooks)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- CLI


def cli(args: list[str]) -> int:
    parsed = split_args(args)
    bad_flags = sorted(parsed.flags - {"--cfg", "-m", "--multirun"})
    if bad_flags:
        raise UserError(f"unknown flag(s) {', '.join(bad_flags)}; accepted: --cfg, -m/--multirun", "forethought train")
    if parsed.positional:
        raise UserError(
            f"unexpected argument(s) {parsed.positional}; pass settings as key=value overrides", "forethought train"
        )
    if "-m" in parsed.flags or "--multirun" in parsed.flags:
        return multirun(parsed.overrides, print_cfg="--cfg" in parsed.flags)
    cfg = load("train", parsed, TrainConfig)
    if cfg is None:  # --cfg printed the config
        return 0
    results = run(cfg)
    if is_main_process():
        _print_summary(results)
    return 0


def _print_summary(results: dict[str, RunResult]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="forethought train")
    for col in ("primitive", "steps", "train loss", "eval loss", "tokens/s", "wall s", "adapter"):
        table.add_column(col)
    for primitive, result in results.items():
        metrics = result.metrics
        table.add_row(
            primitive,
            str(metrics.get("global_step")),
            _fmt(metrics.get("train_loss_last")),
            _fmt(metrics.get("eval_loss")),
            _fmt(metrics.get("tokens_per_second")),
            _fmt(metrics.get("wall_time_s")),
            str(result.run_dir / "adapter"),
        )
    Console(file=sys.stderr).print(table)


def _fmt(value: Any) -> str:
    return "-" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))


# --------------------------------------------------------------------------- multirun


def _hydra_task(cfg: Any) -> dict[str, Any]:
    """Task function of a Hydra multirun job (runs in-process or on a SLURM node)."""
    from hydra.errors import CompactHydraException

    from forethought.config import validate

    class JobInputError(CompactHydraException):
        """Hydra prints a compact exception as its message alone (no traceback)."""

    conf = validate(cfg, TrainConfig, "multirun job config")
    try:
        results = run(conf)
    except UserError as exc:
        raise JobInputError(f"error: {exc}") from None
    return {p: r.metrics for p, r in results.items()}


def multirun(overrides: list[str], *, print_cfg: bool = False) -> int:
    """``forethought train -m ...``: validate every sweep point up front, then hand over to Hydra.

    Hydra's launcher (``launcher=local``: one job after another here;
    ``launcher=slurm``: one SLURM job per sweep point via hydra-submitit-launcher)
    runs :func:`_hydra_task` for each point.
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from forethought.config import CONF_DIR, ConfigError, compose_and_validate, hydra_config_flags

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as exc:
        raise ConfigError("conf/train.yaml", [f"cannot parse overrides: {exc}"]) from None
    points = [p for batch in BasicSweeper.split_arguments(parsed, None) for p in batch]
    errors: list[str] = []
    for point in points:
        label = f"[{' '.join(point) or 'defaults'}]"
        try:
            conf = compose_and_validate("train", point, TrainConfig)[1]
        except ConfigError as exc:
            errors.extend(f"{label} {e}" for e in exc.errors)
            continue
        try:
            # data files, model path, attention kernel: checked for every point before any job is
            # launched (on SLURM they would otherwise queue and then fail one by one)
            _preflight(conf)
        except UserError as exc:
            errors.append(f"{label} {exc}")
    if errors:
        raise ConfigError(
            f"conf/train.yaml + overrides ({len(points)} sweep points)", sorted(set(errors), key=errors.index)
        )
    if print_cfg:
        from omegaconf import OmegaConf

        for point in points:
            print(f"# {' '.join(point)}")
            print(OmegaConf.to_yaml(compose_and_validate("train", point, TrainConfig)[0]))
        return 0

    import hydra

    main = hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")(_hydra_task)
    saved = sys.argv
    sys.argv = ["forethought-train", "--multirun", *hydra_config_flags("train"), *overrides]
    try:
        main()
    except SystemExit as exc:  # hydra reports a failed job and exits
        return int(exc.code or 0)
    finally:
        sys.argv = saved
    return 0


# --------------------------------------------------------------------------- the run


def run(cfg: TrainConfig, *, callbacks: list[Any] | None = None, keep_trainer: bool = False) -> dict[str, RunResult]:
    """Train what ``cfg.primitive`` names: the base stage (``base``), one adapter, or the base stage (reused when
    current) and all five adapters on it (``all``)."""
    _preflight(cfg)
    _set_offline_env()
    _check_before_changes(cfg)  # every refusal first: one never follows a deletion or a write
    with _run_folder_locks(cfg):
        if cfg.train.overwrite and is_main_process():
            _clear_outputs(cfg)
        results: dict[str, RunResult] = {}
        with _cpu_threads(cfg):
            base = prepare_base(cfg)
            if cfg.primitive == "base":
                results["base"] = _base_result(cfg, base)
            for primitive in cfg.primitives():
                results[primitive] = train_primitive(
                    cfg, primitive, base, callbacks=callbacks, keep_trainer=keep_trainer
                )
    return results


@contextlib.contextmanager
def _run_folder_locks(cfg: TrainConfig) -> Iterator[None]:
    """One ``forethought train`` per run folder at a time.

    A second process training the same primitive into the same output_dir would write its
    checkpoints into the first one's folder (and ``train.overwrite`` would delete a folder in
    use). The locks are advisory ``flock``s on ``<output_dir>/.<primitive>.lock``, held by the
    main process for the whole run and released by the OS if it dies, so a crash never leaves a
    stale lock behind.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: no locking
        yield
        return
    if not is_main_process():
        yield
        return
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    held = []
    try:
        for primitive in [*(["base"] if cfg.primitive in ("base", "all") else []), *cfg.primitives()]:
            lock_file = open(out / f".{primitive}.lock", "a+", encoding="utf-8")
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock_file.seek(0)
                owner = lock_file.read().strip() or "?"
                lock_file.close()
                raise UserError(
                    f"another `forethought train` (pid {owner}) is training {primitive} into this output_dir; "
                    "wait for it to finish or choose another output_dir",
                    str(out / primitive),
                ) from None
            lock_file.seek(0)
            lock_file.truncate()
            lock_file.write(str(os.getpid()))
            lock_file.flush()
            held.append(lock_file)
        yield
    finally:
        for lock_file in held:
            lock_file.close()  # closing the file releases its lock


@contextlib.contextmanager
def _cpu_threads(cfg: TrainConfig) -> Iterator[None]:
    """``train.cpu_threads`` for the duration of training on CPU; the caller's setting is restored after."""
    if not cfg.train.cpu_threads:
        yield
        return
    import torch

    from forethought.training.models import resolve_device

    if resolve_device(cfg.train.device) != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(cfg.train.cpu_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _preflight(cfg: TrainConfig) -> None:
    """Checks before any heavy import or any training: data files (every row) and the model path.

    With ``primitive=all`` a bad row in the last dataset fails here, not after four adapters.
    """
    from forethought.training.data import check_dev_split, read_split, split_path, use_dataset_rendering

    use_dataset_rendering(cfg.dataset_dir)  # prompts and spec hashes as the data was rendered
    missing = [
        str(split_path(cfg.dataset_dir, primitive, "train"))
        for primitive in cfg.primitives()
        if not split_path(cfg.dataset_dir, primitive, "train").is_file()
    ]
    if missing:
        raise UserError(
            f"missing train split(s): {', '.join(missing)} (run `forethought generate` first, or set dataset_dir=...)",
            "dataset_dir",
        )
    if cfg.train.dev_fraction > 0:  # selection reads dev rows: their solutions must be out of the stores
        check_dev_split(
            cfg.dataset_dir,
            list(cfg.primitives()),
            cfg.train.dev_fraction,
            cfg.seed,
            limit=cfg.train.max_train_examples,
        )
    for primitive in cfg.primitives():
        read_split(cfg.dataset_dir, primitive, "train", limit=cfg.train.max_train_examples)
        read_split(cfg.dataset_dir, primitive, "validation", required=False, limit=cfg.train.max_eval_examples)
    if cfg.model.profile in BUILT_HERE and cfg.primitive in ("base", "all"):
        # the base stage builds its tokenizer from, and pretrains on, every train split there: their rows too
        for primitive in PRIMITIVE_NAMES:
            if primitive not in cfg.primitives() and split_path(cfg.dataset_dir, primitive, "train").is_file():
                read_split(cfg.dataset_dir, primitive, "train")
    from forethought.kernel.specs import SPECS
    from forethought.training.data import dataset_spec_hash

    stale = [
        (primitive, spec_hash)
        for primitive in cfg.primitives()
        if (spec_hash := dataset_spec_hash(cfg.dataset_dir, primitive)) is not None
        and spec_hash != SPECS[primitive].spec_hash
    ]
    if stale:
        raise UserError(
            "the dataset was rendered with another version of the primitives' specs ("
            + "; ".join(
                f"{primitive}: data {spec_hash}, code {SPECS[primitive].spec_hash}" for primitive, spec_hash in stale
            )
            + "): validate and package would refuse these adapters; regenerate the data with `forethought generate`",
            str(Path(cfg.dataset_dir) / "stats.json"),
        )
    from forethought.training.models import check_attention_available, resolve_device

    device = resolve_device(cfg.train.device)
    check_attention_available(cfg.model.attn_implementation, device)
    if cfg.model.quantization is not None:
        from forethought.training.models import check_quantization_available

        check_quantization_available(device)
    if cfg.model.profile not in BUILT_HERE:
        from forethought.training.models import require_local_path

        require_local_path(cfg.model)
    _check_lora_layers(cfg)


def _check_lora_layers(cfg: TrainConfig) -> None:
    """``lora.last_layers`` within the model's decoder layers, known before any model is loaded or file written."""
    wanted = cfg.lora.last_layers
    if wanted is None or cfg.train.finetuning == "full":
        return
    if cfg.model.profile in BUILT_HERE:
        count = cfg.model.tiny.num_layers if cfg.model.tiny is not None else None
    else:
        from forethought.training.models import require_local_path

        model_config = read_json_object(require_local_path(cfg.model) / "config.json")
        text_config = model_config.get("text_config") or model_config
        # unknown here when config.json leaves it to the class default: lora_config checks it on the loaded model
        count = text_config.get("num_hidden_layers", model_config.get("num_hidden_layers"))
    if isinstance(count, int) and wanted > count:
        raise UserError(
            f"lora.last_layers is {wanted} but the model has {count} decoder layers (at most {count}, or null for all)",
            "lora.last_layers",
        )


_RUN_MARKERS = ("config.yaml", "metrics.json", "run_state.json", "checkpoints", "adapter")


def _check_before_changes(cfg: TrainConfig) -> None:
    """Everything the run could refuse after ``train.overwrite`` deleted a folder or after it wrote one, checked while
    nothing has changed (docs/guarantees.md, "Refusals change nothing"): the folders it would delete are ours; the base
    it would keep is usable (not built from other inputs); ``base.json`` names that base while adapters remain that
    belong to it; a run folder that holds a run is continued or replaced, never trained over."""
    if not is_main_process():
        return
    from forethought.training.lookup_corpus import pool_of

    for primitive in cfg.primitives():  # a lookup phase with too few tools to draw from
        lookup = cfg.train.for_primitive(primitive).lookup
        if primitive != "base" and lookup is not None:
            pool_of(cfg, lookup.tools)
    targets = _overwrite_targets(cfg) if cfg.train.overwrite else []
    clears_base = cfg.train.overwrite and _clears_base(cfg)
    if cfg.model.profile in BUILT_HERE and not clears_base:
        from forethought.training import pretrain

        pretrain.check_usable(cfg)
    if not (cfg.train.overwrite and cfg.primitive in ("base", "all")):  # those drop base.json along with its adapters
        from forethought.training.artifacts import trained_primitives

        out = Path(cfg.output_dir)
        kept = [primitive for primitive in trained_primitives(out) if out / primitive not in targets]
        _check_base_ref(out, _base_path(cfg), cfg.model.profile, kept)
    if not cfg.train.overwrite:
        for primitive in cfg.primitives():
            _check_reuse(cfg, Path(cfg.output_dir) / primitive)


def _overwrite_targets(cfg: TrainConfig) -> list[Path]:
    """The folders ``train.overwrite=true`` deletes: those of the primitives it trains and the base when it goes too;
    refused, before any is deleted, unless every one is recognisably ours."""
    out = Path(cfg.output_dir)
    targets = []
    for primitive in cfg.primitives():
        folder = out / primitive
        if folder.exists():
            if not any((folder / m).exists() for m in _RUN_MARKERS):
                raise UserError("train.overwrite: not a forethought run folder, refusing to delete it", str(folder))
            targets.append(folder)
    if _clears_base(cfg):
        from forethought.training import pretrain

        targets += pretrain.clear_targets(cfg)
    return targets


def _clears_base(cfg: TrainConfig) -> bool:
    """Whether ``train.overwrite`` takes the base with it: with primitive=base, and with primitive=all when it is stale
    (built from other inputs). A current base is reused, so the pipeline's base stage is not undone by its train stage."""
    from forethought.training import pretrain

    return cfg.model.profile in BUILT_HERE and (
        cfg.primitive == "base" or (cfg.primitive == "all" and not pretrain.is_current(cfg))
    )


def _clear_outputs(cfg: TrainConfig) -> None:
    """``train.overwrite=true``: remove what an earlier run left, only where it is recognisably ours."""
    import shutil

    for folder in _overwrite_targets(cfg):
        shutil.rmtree(folder)
    if cfg.primitive in ("base", "all"):
        (Path(cfg.output_dir) / BASE_REF).unlink(missing_ok=True)


def _set_offline_env() -> None:
    for variable, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("HF_HUB_DISABLE_TELEMETRY", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
    ):
        os.environ.setdefault(variable, value)


def prepare_base(cfg: TrainConfig) -> BaseRef:
    """Build and pretrain (tiny, small) or locate (gemma3_12b) the shared base, and record it in ``<output_dir>/base.json``."""
    from forethought.training.models import checkpoint_model_type, require_local_path

    out = Path(cfg.output_dir)
    if cfg.model.profile in BUILT_HERE:
        from forethought.training import pretrain

        path = pretrain.prepare(cfg)
    else:
        path = require_local_path(cfg.model)
    ref = BaseRef(profile=cfg.model.profile, path=path, model_type=checkpoint_model_type(path))
    ref_file = out / BASE_REF
    from forethought.training.artifacts import trained_primitives

    kept = trained_primitives(out)
    if is_main_process() and ref_file.is_file() and not kept:
        # No adapter belongs to the recorded base yet (e.g. its load failed): the record binds nothing.
        ref_file.unlink()
    _check_base_ref(out, path, ref.profile, kept)
    if not ref_file.is_file() and is_main_process():
        atomic_write_json(ref_file, ref.to_json())
    return ref


def _base_path(cfg: TrainConfig) -> Path:
    """Where the base of this run is (or will be, for a built-here profile), without building it."""
    if cfg.model.profile in BUILT_HERE:
        from forethought.training import pretrain

        return pretrain.base_dir(cfg)
    from forethought.training.models import require_local_path

    return require_local_path(cfg.model)


def _check_base_ref(out: Path, path: Path, profile: str, kept: list[str]) -> None:
    """Adapters of one output folder share one base: refuse a base other than the one ``base.json`` records while
    adapters trained on that one remain (``kept``)."""
    ref_file = out / BASE_REF
    if not kept or not ref_file.is_file():
        return
    old = read_json_object(ref_file)
    if old.get("path") != str(path.resolve()) or old.get("profile") != profile:
        raise UserError(
            f"this output folder's adapters belong to another base ({old.get('profile')} at {old.get('path')}); "
            "adapters of different bases cannot share a bundle: use another output_dir",
            str(ref_file),
        )


def _base_result(cfg: TrainConfig, base: BaseRef) -> RunResult:
    path = Path(cfg.output_dir) / "base_run" / "metrics.json"
    metrics = read_json_object(path) if path.is_file() else {"stage": "base", "pretrained": False}
    return RunResult("base", base.path, metrics)


def _run_state(cfg: TrainConfig, primitive: str, base: BaseRef) -> dict[str, Any]:
    from forethought.training.data import dataset_spec_hash, file_sha256, split_path

    return {
        "dataset": {
            "train_sha256": file_sha256(split_path(cfg.dataset_dir, primitive, "train")),
            "validation_sha256": file_sha256(split_path(cfg.dataset_dir, primitive, "validation")),
        },
        # The spec (prompt, schemas, contract) the training prompts were rendered with: validate and package
        # refuse the adapter once the code's spec hash differs. None when stats.json does not record it.
        "spec_hash": dataset_spec_hash(cfg.dataset_dir, primitive),
        "base": base.to_json(),
    }


def _resume_point(cfg: TrainConfig, primitive: str, run_dir: Path, base: BaseRef) -> tuple[Path | None, bool]:
    """Where to start: ``(checkpoint or None, already_complete)``; refuses unsafe reuse of a run folder."""
    ckpt = last_checkpoint(run_dir / "checkpoints")
    from forethought.bundle.models import adapter_kind

    adapter = run_dir / "adapter"
    metrics_file = run_dir / "metrics.json"
    if not cfg.train.resume:
        _check_reuse(cfg, run_dir)
        return None, False
    cfg_file = run_dir / "config.yaml"
    if cfg_file.is_file():
        old = read_run_config(cfg_file)
        diffs = config_diff(old, resolved_config(cfg, primitive))
        if diffs:
            raise UserError("cannot resume with a different config:\n  " + "\n  ".join(diffs), str(cfg_file))
    state_file = run_dir / "run_state.json"
    if state_file.is_file():
        old_state = read_json_object(state_file)
        new_state = _run_state(cfg, primitive, base)
        diffs = config_diff(old_state, new_state)
        if diffs:
            raise UserError(
                "cannot resume: the data or base changed since the run started:\n  " + "\n  ".join(diffs),
                str(state_file),
            )
    if metrics_file.is_file() and adapter_kind(adapter) is not None:
        if read_json_object(metrics_file).get("completed"):
            return None, True
    return ckpt, False


def _check_reuse(cfg: TrainConfig, run_dir: Path) -> None:
    """A run folder that holds a run (a checkpoint, an adapter, metrics) is continued or replaced, never trained over."""
    if cfg.train.resume or cfg.train.overwrite:
        return
    from forethought.bundle.models import adapter_kind

    if (
        holds_checkpoint(run_dir / "checkpoints")
        or holds_checkpoint(run_dir / LOOKUP_CHECKPOINTS)  # its made-up lookups began
        or holds_checkpoint(run_dir / REFIT_CHECKPOINTS)  # its refit began (train.refit)
        or adapter_kind(run_dir / "adapter") is not None
        or (run_dir / "metrics.json").is_file()
    ):
        raise UserError(
            "this run folder already holds a run; pass train.resume=true to continue it, train.overwrite=true to "
            "replace it, or choose another output_dir",
            str(run_dir),
        )


def _sft_config(
    cfg: TrainConfig,
    *,
    ckpt_dir: Path,
    device: str,
    dtype: Any,
    primitive: str,
    has_eval: bool,
    notes: list[str],
    epochs: float | None = None,
) -> Any:
    import importlib.util

    import torch
    from trl import SFTConfig

    settings = cfg.train.for_primitive(primitive)
    if epochs is not None:  # the refit's: the epochs the selection pass kept
        settings = settings.model_copy(update={"epochs": epochs, "max_steps": -1})
    select = settings.selection == "dev_exact_match" and has_eval
    gc = settings.gradient_checkpointing if settings.gradient_checkpointing is not None else device == "cuda"
    if gc and cfg.lora.last_layers is not None and settings.finetuning == "lora":
        # transformers and trl make the input embeddings require a gradient under checkpointing, so the backward
        # pass runs through the layers without an adapter too: the adapter is still last-layers only, the speed is not
        notes.append(
            "lora.last_layers with gradient checkpointing: the backward pass still runs through every layer "
            "(checkpointing makes the inputs need a gradient), so it trains the last layers without their speed-up"
        )
    liger = False
    if settings.liger:
        if device != "cuda":
            notes.append("train.liger skipped: Liger kernels are GPU-only")
        elif importlib.util.find_spec("liger_kernel") is None:
            notes.append("train.liger skipped: liger-kernel is not installed (pip install 'forethought[gpu]')")
        else:
            liger = True
    eval_strategy = settings.eval_strategy if has_eval else "no"
    # Selection on the dev rows: an evaluation and a checkpoint at every epoch's end; the trainer keeps the best
    # checkpoint by dev exact match (DevExactMatch adds it to the evaluation's metrics) and loads it at the end.
    selection = (
        {
            "eval_strategy": "epoch",
            "save_strategy": "epoch",
            "load_best_model_at_end": True,
            "metric_for_best_model": "selection_score",
            "greater_is_better": True,
        }
        if select
        else {"eval_strategy": eval_strategy, "save_strategy": "steps", "save_steps": settings.save_steps}
    )
    return SFTConfig(
        output_dir=str(ckpt_dir),
        run_name=primitive,
        seed=cfg.seed,
        data_seed=cfg.seed,
        # schedule
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        lr_scheduler_type=settings.lr_scheduler,
        warmup_steps=settings.warmup_ratio,  # a float < 1 is a ratio of the total steps
        weight_decay=settings.weight_decay,
        max_grad_norm=settings.max_grad_norm,
        optim=settings.optim,
        per_device_train_batch_size=settings.per_device_batch_size,
        per_device_eval_batch_size=settings.eval_batch_size,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        # data: prompt-completion, loss on the completion only (its <end_of_turn> included)
        max_length=settings.max_length,
        packing=settings.packing,
        padding_free=settings.padding_free,
        completion_only_loss=True,
        assistant_only_loss=False,
        shuffle_dataset=False,  # the trainer's sampler shuffles (seeded by data_seed)
        dataset_num_proc=None,
        # precision and device (FIELD_NOTES §6: fp32 / use_cpu / no pin memory on CPU; bf16 on GPU, never fp16)
        bf16=(device == "cuda" and dtype == torch.bfloat16),
        fp16=False,
        use_cpu=(device == "cpu"),
        dataloader_pin_memory=(device == "cuda"),
        dataloader_num_workers=settings.dataloader_num_workers,
        **checkpointing_kwargs(gc),
        use_liger_kernel=liger,
        # bookkeeping
        logging_steps=settings.logging_steps,
        logging_first_step=True,
        eval_steps=settings.eval_steps if not select else None,
        **selection,
        save_total_limit=settings.save_total_limit,
        include_num_input_tokens_seen="non_padding",
        ddp_find_unused_parameters=False,  # every LoRA parameter is used; the frozen vision tower needs no gradients
        report_to=["wandb"] if cfg.logging.backend == "wandb" else "none",
        disable_tqdm=True,  # our rich display (or nothing) instead
        push_to_hub=False,
    )


def _dataset_tokens(ds: Any) -> tuple[int, int]:
    total = completion = 0
    for labels in ds["labels"]:
        total += len(labels)
        completion += sum(1 for x in labels if x != -100)
    return total, completion


def train_primitive(
    cfg: TrainConfig,
    primitive: str,
    base: BaseRef,
    *,
    callbacks: list[Any] | None = None,
    keep_trainer: bool = False,
) -> RunResult:
    """Train one adapter into ``<output_dir>/<primitive>/``: the selection pass, then with ``train.refit`` the refit
    (:func:`_refit`) that replaces its adapter."""
    if primitive not in PRIMITIVE_NAMES:
        raise UserError(f"unknown primitive {primitive!r}", "primitive")
    t_start = time.perf_counter()
    run_dir = Path(cfg.output_dir) / primitive
    resume_from, complete = _resume_point(cfg, primitive, run_dir, base)
    if complete:
        metrics = read_json_object(run_dir / "metrics.json")
        print(f"[{primitive}] already complete ({run_dir}); nothing to do", file=sys.stderr)
        return RunResult(primitive, run_dir, metrics, notes=["already complete"])
    refit = cfg.train.for_primitive(primitive).refit
    selected = run_dir / SELECTION_METRICS
    trainer: Any = None
    if refit and resume_from is not None and selected.is_file():  # killed during the refit: the selection stands
        metrics = read_json_object(selected)
        print(f"[{primitive}] selection pass complete ({selected}); resuming the refit", file=sys.stderr)
    else:
        metrics, trainer = _selection_pass(cfg, primitive, base, run_dir, resume_from, callbacks=callbacks)
        if refit and is_main_process():
            atomic_write_json(selected, metrics)
    if refit:
        metrics, trainer = _refit(cfg, primitive, base, run_dir, metrics, callbacks=callbacks)
    metrics["wall_time_s"] = round(time.perf_counter() - t_start, 3)  # this session's, as a resumed run counts it
    metrics["finished_at"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if is_main_process():
        import shutil

        shutil.rmtree(run_dir / LOOKUP_CHECKPOINTS, ignore_errors=True)  # the adapter is saved: no resume needs them
        atomic_write_json(run_dir / "metrics.json", metrics)
        (run_dir / SELECTION_METRICS).unlink(missing_ok=True)  # metrics.json holds it now
    notes = list(metrics["notes"])
    for n in notes:
        print(f"[{primitive}] note: {n}", file=sys.stderr)
    return RunResult(primitive, run_dir, metrics, trainer=trainer if keep_trainer else None, notes=notes)


SELECTION_METRICS = "selection.json"  # the selection pass's metrics, kept while a refit runs (train.refit)
REFIT_CHECKPOINTS = "refit_checkpoints"


def _selection_pass(
    cfg: TrainConfig,
    primitive: str,
    base: BaseRef,
    run_dir: Path,
    resume_from: Path | None,
    *,
    callbacks: list[Any] | None,
) -> tuple[dict[str, Any], Any]:
    """The primitive's training on its train rows (after its made-up lookups), keeping the last step's weights or the
    epoch of best dev exact match; saves them as the adapter and returns ``(metrics, trainer)``."""
    t_start = time.perf_counter()
    ckpt_dir = run_dir / "checkpoints"
    adapter_dir = run_dir / "adapter"
    import datasets
    import torch
    import transformers
    from omegaconf import OmegaConf
    from trl import SFTTrainer

    from forethought.bundle.models import check_saved_adapter, load_tokenizer
    from forethought.training.callbacks import RichProgress, Throughput
    from forethought.training.data import load_splits
    from forethought.training.lm_head import compact_on_cpu
    from forethought.training.models import check_adapter_targets, lora_config, resolve_device, resolve_dtype
    from forethought.training.plots import plot_loss

    if not sys.stderr.isatty():
        datasets.disable_progress_bars()
    notes: list[str] = []
    device = resolve_device(cfg.train.device)
    dtype = resolve_dtype(cfg.model, device)
    transformers.set_seed(cfg.seed)

    settings = cfg.train.for_primitive(primitive)
    train_ds, eval_ds, dev_rows = load_splits(
        cfg.dataset_dir,
        primitive,
        max_train=cfg.train.max_train_examples,
        max_eval=cfg.train.max_eval_examples,
        dev_fraction=settings.dev_fraction,
        seed=cfg.seed,
    )
    if eval_ds is None:
        notes.append(
            "no dev rows: no eval loss, no selection"
            if settings.dev_fraction > 0
            else "no validation split: no eval loss"
        )
    tokenizer = load_tokenizer(base.path)
    model = _load_base_model(cfg, base, device, dtype)
    full = settings.finetuning == "full"
    peft_config = None if full else lora_config(model, cfg.lora)
    args = _sft_config(
        cfg,
        ckpt_dir=ckpt_dir,
        device=device,
        dtype=dtype,
        primitive=primitive,
        has_eval=eval_ds is not None,
        notes=notes,
    )

    throughput = Throughput()
    cbs: list[Any] = [throughput]
    if cfg.logging.progress:
        cbs.append(RichProgress(primitive))
    constrained = settings.decoding == "constrained"
    if settings.selection == "dev_exact_match" and dev_rows:
        import random

        from transformers import EarlyStoppingCallback

        from forethought.training.callbacks import DevExactMatch

        subset = list(dev_rows)
        random.Random(f"{cfg.seed}:{primitive}:dev").shuffle(subset)
        cbs.append(DevExactMatch(tokenizer, primitive, subset[: settings.dev_em_examples], constrained=constrained))
        if settings.early_stopping_patience:
            cbs.append(EarlyStoppingCallback(early_stopping_patience=settings.early_stopping_patience))
    curve = None
    if cfg.train.em_eval_steps and eval_ds is not None:
        from forethought.training.callbacks import ExactMatchCurve
        from forethought.training.pretrain import em_rows

        curve = ExactMatchCurve(
            tokenizer,
            em_rows(cfg.dataset_dir, [primitive], cfg.train.em_eval_examples, cfg.seed, settings.dev_fraction),
            cfg.train.em_eval_steps,
            constrained=constrained,
        )
        cbs.append(curve)
    cbs.extend(callbacks or [])

    main = is_main_process()
    run_state = _run_state(cfg, primitive, base)
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(resolved_config(cfg, primitive))))
        if resume_from is None:
            atomic_write_json(run_dir / "run_state.json", run_state)

    if device == "cpu":
        compact_on_cpu()  # score only the completion positions in trl's LM head (training/lm_head.py)
    with temporary_environ(wandb_environ(cfg)):
        try:
            start_wandb(cfg, run_dir, primitive, resolved_config(cfg, primitive))
            lookup = _lookup_phase(cfg, settings, model, tokenizer, run_dir, device, primitive, resume_from, main)
            trainer = SFTTrainer(
                model=model,
                args=args,
                train_dataset=train_ds,
                eval_dataset=eval_ds,
                processing_class=tokenizer,
                peft_config=peft_config,
                callbacks=cbs,
            )
            if cfg.logging.progress:
                from transformers.trainer_callback import PrinterCallback

                trainer.remove_callback(PrinterCallback)  # the rich display replaces the printed log dicts
            if full:  # every weight trains; the run's output is the whole model, of the base's architecture
                targets = {
                    "kind": "full",
                    "parameters": int(sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)),
                }
            else:
                targets = {"kind": "lora", **check_adapter_targets(trainer.model, cfg.lora)}
            tokens_per_epoch, completion_tokens_per_epoch = _dataset_tokens(trainer.train_dataset)
            if len(trainer.train_dataset) == 0:
                raise UserError(
                    f"no train example is left: every prompt alone fills train.max_length={cfg.train.max_length} tokens "
                    "(nothing to compute a loss on); raise train.max_length",
                    "train.max_length",
                )
            if cfg.train.packing:
                # BFD packing cuts each overlong sequence to max_length; the packed rows keep the lengths.
                truncated = sum(
                    1 for row in trainer.train_dataset["seq_lengths"] for n in row if n >= cfg.train.max_length
                )
            else:
                kept = len(trainer.train_dataset)
                truncated = sum(1 for ids in trainer.train_dataset["input_ids"] if len(ids) >= cfg.train.max_length)
                if kept < len(train_ds):
                    notes.append(
                        f"{len(train_ds) - kept} train examples dropped: their prompt alone fills train.max_length={cfg.train.max_length}"
                    )
            if truncated:
                notes.append(
                    f"{truncated} train examples cut at train.max_length={cfg.train.max_length}: their completion (and <end_of_turn>) is incomplete"
                )
            if resume_from is not None:
                print(f"[{primitive}] resuming from {resume_from}", file=sys.stderr)
            result = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
            eval_metrics: dict[str, Any] = {}
            if eval_ds is not None:
                last_eval = [e for e in trainer.state.log_history if "eval_loss" in e]
                if last_eval and last_eval[-1].get("step") == trainer.state.global_step:
                    eval_metrics = last_eval[-1]
                else:
                    eval_metrics = trainer.evaluate()
            trainer.save_model(str(adapter_dir))
            # The trainer also pickles its TrainingArguments there; nothing loads it (config.yaml records the run), and
            # model folders holding a pickle are refused on load (forethought/bundle/models.py check_model_files).
            (adapter_dir / "training_args.bin").unlink(missing_ok=True)
            trainer.accelerator.wait_for_everyone()
        finally:
            finish_wandb()

    if main and full:
        from forethought.bundle.models import check_full_adapter

        check_full_adapter(adapter_dir, base.path)
    elif main:
        expected = targets["lora_modules"]
        check_saved_adapter(adapter_dir, targets["text_model_prefix"], expected)

    state = trainer.state
    history = state.log_history
    train_hist = [
        {
            k: e[k]
            for k in (
                "step",
                "epoch",
                "loss",
                "learning_rate",
                "grad_norm",
                "mean_token_accuracy",
                "num_input_tokens_seen",
            )
            if k in e
        }
        for e in history
        if "loss" in e
    ]
    eval_hist = [
        {k: e[k] for k in ("step", "epoch", "eval_loss", "eval_mean_token_accuracy", "eval_exact_match") if k in e}
        for e in history
        if "eval_loss" in e
    ]
    tp = throughput.summary()
    metrics: dict[str, Any] = {
        "primitive": primitive,
        "completed": True,
        "profile": cfg.model.profile,
        "base_path": str(base.path.resolve()),
        "preset": cfg.train.preset,
        "spec_hash": run_state["spec_hash"],  # of the dataset's prompts (stats.json); None if it did not record one
        "device": device,
        "dtype": str(dtype).replace("torch.", ""),
        "global_step": state.global_step,
        "max_steps": state.max_steps,
        "epochs_completed": state.epoch,
        "train_examples": len(train_ds),
        "eval_examples": len(eval_ds) if eval_ds is not None else 0,
        "train_tokens_per_epoch": tokens_per_epoch,
        "train_completion_tokens_per_epoch": completion_tokens_per_epoch,
        "tokens_seen": int(state.num_input_tokens_seen or 0),
        **tp,
        "wall_time_s": round(time.perf_counter() - t_start, 3),
        "train_loss": result.training_loss,
        "train_loss_last": train_hist[-1]["loss"] if train_hist else None,
        "train_loss_history": train_hist,
        "eval_loss": eval_metrics.get("eval_loss"),
        "eval_mean_token_accuracy": eval_metrics.get("eval_mean_token_accuracy"),
        "eval_history": eval_hist,
        "exact_match_history": curve.history if curve else [],
        # What was kept: the last step's adapter, or the epoch checkpoint of best dev exact match.
        "selection": {
            "rule": settings.selection if dev_rows else "last",
            "dev_fraction": settings.dev_fraction,
            "dev_rows": len(dev_rows),
            "dev_solutions": len({r.solution_id for r in dev_rows}),
            "decoding": settings.decoding,
            "best_dev_exact_match": _em_at(eval_hist, state.best_global_step)
            if settings.selection == "dev_exact_match"
            else None,
            "best_global_step": state.best_global_step if settings.selection == "dev_exact_match" else None,
            "best_epoch": _epoch_at(eval_hist, state.best_global_step)
            if settings.selection == "dev_exact_match"
            else None,
            "stopped_early": bool(settings.early_stopping_patience) and state.global_step < state.max_steps,
        },
        "resumed_from": resume_from.name if resume_from else None,
        "lookup": lookup,
        "adapter": {"path": "adapter", **targets},
        "notes": notes,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": _version("trl"),
            "peft": _version("peft"),
        },
    }
    if main:
        plot_loss(history, run_dir / "loss.png", f"{primitive} ({cfg.model.profile}, {cfg.train.preset})")
        if curve and curve.history:
            from forethought.training.plots import plot_em

            plot_em(
                curve.history, run_dir / "exact_match.png", f"{primitive}: exact match on a fixed validation subset"
            )
    return metrics, trainer


LOOKUP_CHECKPOINTS = "lookup_checkpoints"
LOOKUP_METRICS = "lookup.json"


def _lookup_phase(
    cfg: TrainConfig,
    settings: Any,
    model: Any,
    tokenizer: Any,
    run_dir: Path,
    device: str,
    primitive: str,
    resume_from: Path | None,
    main: bool,
) -> dict[str, Any] | None:
    """``train.per_primitive.<name>.lookup``: made-up lookups first (training/lookup_corpus.py), the model trained in
    place. Once the primitive's own rows have a checkpoint a resume reads the phase's record (``lookup.json``) and the
    weights come from that checkpoint; a phase that ended before it gives its last checkpoint's weights (resumed, the
    trainer would take one step more); a phase cut short resumes from its own checkpoint. Its checkpoints go with
    the run's end."""
    if settings.lookup is None:
        return None
    from forethought.training.lookup_corpus import train_on_lookups

    done = run_dir / LOOKUP_METRICS
    if resume_from is not None:
        return read_json_object(done)
    if done.is_file():
        _load_lookup_weights(model, run_dir)
        return read_json_object(done)
    record = train_on_lookups(cfg, settings.lookup, model, tokenizer, run_dir / LOOKUP_CHECKPOINTS, device, primitive)
    if main:
        atomic_write_json(done, record)
    return record


def _load_base_model(cfg: TrainConfig, base: BaseRef, device: str, dtype: Any) -> Any:
    """The base the primitive's training starts from (prepared for QLoRA when quantised)."""
    from forethought.bundle.models import load_model

    model = load_model(
        base.path,
        dtype=dtype,
        attn_implementation=cfg.model.attn_implementation,
        device=device,
        quantization=cfg.model.quantization,
    )
    if cfg.model.quantization is not None:
        from forethought.training.models import prepare_quantized

        prepare_quantized(model, cfg.train, device)
    return model


def _load_lookup_weights(model: Any, run_dir: Path) -> None:
    """The weights the lookup phase ended with (its last checkpoint), into ``model``."""
    from safetensors.torch import load_file

    ckpt = last_checkpoint(run_dir / LOOKUP_CHECKPOINTS)
    if ckpt is None:
        raise UserError(
            "the lookup phase ended but its checkpoint is gone: rerun with train.overwrite=true",
            str(run_dir / LOOKUP_METRICS),
        )
    missing, unexpected = model.load_state_dict(load_file(ckpt / "model.safetensors"), strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)  # tied to the embeddings


def _refit(
    cfg: TrainConfig,
    primitive: str,
    base: BaseRef,
    run_dir: Path,
    selected: dict[str, Any],
    *,
    callbacks: list[Any] | None,
) -> tuple[dict[str, Any], Any]:
    """``train.refit``: once the selection pass has kept its epoch, the primitive trained again from where its own rows
    began (the base, or the base after its made-up lookups) on every train row, the dev solutions' included, for the
    epochs kept; its weights replace the adapter. The dev rows choose the epoch count and then train, so the run's dev
    figures are the selection pass's; validation rows never reach either pass. A refit killed part-way resumes from
    its own checkpoints (``refit_checkpoints/``). Measured on match_func: docs/training.md, "Probe of 2026-12-07: the
    dev solutions trained after selection"."""
    import datasets
    import transformers
    from trl import SFTTrainer

    from forethought.bundle.models import check_full_adapter, check_saved_adapter, load_tokenizer
    from forethought.data_gen.row import read_rows
    from forethought.training.callbacks import RichProgress, Throughput
    from forethought.training.data import trainer_rows
    from forethought.training.models import check_adapter_targets, lora_config, resolve_device, resolve_dtype

    t_start = time.perf_counter()
    settings = cfg.train.for_primitive(primitive)
    notes = list(selected.get("notes", []))
    epochs = selected["selection"].get("best_epoch")
    if not selected["selection"].get("dev_rows") or epochs is None:
        notes.append("train.refit skipped: no dev rows, so no epoch was kept by dev exact match")
        return {**selected, "notes": notes, "refit": None}, None
    device = resolve_device(cfg.train.device)
    dtype = resolve_dtype(cfg.model, device)
    transformers.set_seed(cfg.seed)
    tokenizer = load_tokenizer(base.path)
    model = _load_base_model(cfg, base, device, dtype)
    if settings.lookup is not None:
        _load_lookup_weights(model, run_dir)
    rows = read_rows(cfg.dataset_dir, primitive, "train", limit=cfg.train.max_train_examples)
    full = settings.finetuning == "full"
    ckpt_dir = run_dir / REFIT_CHECKPOINTS
    args = _sft_config(
        cfg,
        ckpt_dir=ckpt_dir,
        device=device,
        dtype=dtype,
        primitive=primitive,
        has_eval=False,
        notes=notes,
        epochs=epochs,
    )
    throughput = Throughput()
    cbs: list[Any] = [throughput, *([RichProgress(f"{primitive} refit")] if cfg.logging.progress else [])]
    resume_from = last_checkpoint(ckpt_dir)
    adapter_dir = run_dir / "adapter"
    with temporary_environ(wandb_environ(cfg)):
        try:
            start_wandb(cfg, run_dir, primitive, resolved_config(cfg, primitive))
            trainer = SFTTrainer(
                model=model,
                args=args,
                train_dataset=datasets.Dataset.from_list(trainer_rows(rows)),
                processing_class=tokenizer,
                peft_config=None if full else lora_config(model, cfg.lora),
                callbacks=[*cbs, *(callbacks or [])],
            )
            if cfg.logging.progress:
                from transformers.trainer_callback import PrinterCallback

                trainer.remove_callback(PrinterCallback)
            targets = None if full else check_adapter_targets(trainer.model, cfg.lora)
            if resume_from is not None:
                print(f"[{primitive}] resuming the refit from {resume_from}", file=sys.stderr)
            result = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
            trainer.save_model(str(adapter_dir))
            (adapter_dir / "training_args.bin").unlink(missing_ok=True)  # as the selection pass: no pickle ships
            trainer.accelerator.wait_for_everyone()
        finally:
            finish_wandb()
    if is_main_process() and full:
        check_full_adapter(adapter_dir, base.path)
    elif is_main_process():
        assert targets is not None
        check_saved_adapter(adapter_dir, targets["text_model_prefix"], targets["lora_modules"])
    state = trainer.state
    return {
        **selected,
        "notes": notes,
        "refit": {
            "epochs": epochs,
            "train_examples": len(rows),
            "dev_solutions_added": selected["selection"]["dev_solutions"],
            "global_step": state.global_step,
            "train_loss": result.training_loss,
            "train_loss_history": [
                {k: e[k] for k in ("step", "epoch", "loss", "learning_rate") if k in e}
                for e in state.log_history
                if "loss" in e
            ],
            "tokens_seen": int(state.num_input_tokens_seen or 0),
            **throughput.summary(),
            "wall_time_s": round(time.perf_counter() - t_start, 3),
            "resumed_from": resume_from.name if resume_from else None,
        },
    }, trainer


def _em_at(eval_hist: list[dict[str, Any]], step: int | None) -> float | None:
    return next((e.get("eval_exact_match") for e in eval_hist if e.get("step") == step), None)


def _epoch_at(eval_hist: list[dict[str, Any]], step: int | None) -> float | None:
    """The epoch (rounded: the evaluation ran at its end) of the evaluation at ``step``."""
    epoch = next((e.get("epoch") for e in eval_hist if e.get("step") == step), None)
    return None if epoch is None else float(round(epoch))


def _version(pkg: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def config_from_overrides(overrides: list[str]) -> TrainConfig:
    """Compose and validate ``conf/train.yaml`` with overrides (for tests and notebooks)."""
    cfg = load("train", Args(overrides=list(overrides)), TrainConfig)
    assert cfg is not None
    return cfg
