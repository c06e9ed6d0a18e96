"""The base stage of the built-here profiles (``tiny``, ``small``): a small Gemma 3 text model that has
been trained on the corpus before any adapter is.

LoRA on a *randomly initialised* model learns almost nothing (FIELD_NOTES §6: 0 % exact match after
2 h 15 min): a low-rank update needs features to steer. So on CPU the base is trained first,
full-parameter, on the **train splits only** of all five primitives, mixed and shuffled; the tokenizer
is built from the same rows. The five adapters then train on top of it, as they would on Gemma-3-12B.
Validate's "Base" column measures this base without an adapter.

Layout (under the train ``output_dir``)::

    base/              the pretrained model + tokenizer (save_pretrained) + forethought_base.json
    base_run/          config.yaml, metrics.json, loss.png, exact_match.png, init/ (tokenizer and random
                       initialisation), checkpoints/ (resume with train.resume=true)

``base/`` only ever appears complete (written to a temporary folder, then renamed); its
``forethought_base.json`` records the fingerprint of everything the base depends on (data, shape,
pretraining settings, seed, library versions), so a stale base is never reused silently.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.bounded import read_json_object
from forethought.data_gen.row import DatasetRow, read_rows
from forethought.errors import UserError
from forethought.primitives.io import atomic_write_json, atomic_write_text
from forethought.training.config import PRIMITIVE_NAMES
from forethought.training.tiny import BASE_MANIFEST, base_fingerprint, build_tiny_base

if TYPE_CHECKING:
    from forethought.training.config import TrainConfig

PRETRAIN_VERSION = 1  # bump when the base stage's recipe changes


def base_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.output_dir) / "base"


def run_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.output_dir) / "base_run"


def base_seed(cfg: TrainConfig) -> int:
    """The seed of the base's initialisation and row order: ``model.pretrain.seed``, else the run's. Never the dev
    split's: that stays carved with the run's seed, so the adapters of bases of several seeds select on one dev split."""
    if cfg.model.pretrain is not None and cfg.model.pretrain.seed is not None:
        return cfg.model.pretrain.seed
    return cfg.seed


def fingerprint(cfg: TrainConfig) -> dict[str, Any]:
    assert cfg.model.tiny is not None
    fp = base_fingerprint(cfg.dataset_dir, cfg.model.tiny, base_seed(cfg))
    if cfg.model.pretrain is not None:
        settings = cfg.model.pretrain.model_dump()
        if settings["seed"] is None:  # the run's seed, already in the fingerprint: bases built before the key match
            del settings["seed"]
        fp["pretrain"] = {"version": PRETRAIN_VERSION, **settings}
        if cfg.train.dev_fraction:  # the dev solutions' rows are left out of the base
            fp["pretrain"]["dev_fraction"] = cfg.train.dev_fraction
    return fp


def stored_fingerprint(cfg: TrainConfig) -> dict[str, Any] | None:
    path = base_dir(cfg) / BASE_MANIFEST
    if not path.is_file():
        return None
    try:
        return read_json_object(path).get("fingerprint")
    except (json.JSONDecodeError, AttributeError):
        raise UserError("not a valid base manifest (JSON object with 'fingerprint')", str(path)) from None


def is_current(cfg: TrainConfig) -> bool:
    return stored_fingerprint(cfg) == fingerprint(cfg)


def mixed_train_rows(cfg: TrainConfig) -> list[dict[str, Any]]:
    """Every primitive's train rows (capped per primitive), shuffled with the seed. Never a validation row, and
    never a dev row (``train.dev_fraction``: the adapters select on those, so the base must not have read them).

    A dataset folder holding only some primitives (a user's own, or the chain test's) gives a base of those."""
    from forethought.training.data import split_path, train_and_dev_rows, trainer_rows

    assert cfg.model.pretrain is not None
    cap = cfg.model.pretrain.max_examples_per_primitive
    rng = random.Random(base_seed(cfg))
    rows: list[dict[str, Any]] = []
    for primitive in PRIMITIVE_NAMES:
        if not split_path(cfg.dataset_dir, primitive, "train").is_file():
            continue
        got = trainer_rows(train_and_dev_rows(cfg.dataset_dir, primitive, cfg.train.dev_fraction, cfg.seed)[0])
        rng.shuffle(got)  # a cap takes a random subset, not the first solutions of the file
        rows += got[:cap] if cap else got
    if not rows:
        raise UserError(
            "no <primitive>/train.jsonl found: the base stage trains on the train splits", str(cfg.dataset_dir)
        )
    rng.shuffle(rows)
    if cfg.model.pretrain.loss == "prompt":  # a language model of the requests: the answers are left to the adapters
        return [{"messages": r["prompt"]} for r in rows]
    return rows


def em_rows(
    dataset_dir: str | Path, primitives: list[str], n: int, seed: int, dev_fraction: float = 0.0
) -> dict[str, list[DatasetRow]]:
    """A fixed random subset of each primitive's dev rows (``dev_fraction`` > 0) or validation split, for the
    exact-match learning curve."""
    from forethought.training.data import train_and_dev_rows

    out = {}
    for primitive in primitives:
        split = "train" if dev_fraction > 0 else "validation"
        if not (Path(dataset_dir) / primitive / f"{split}.jsonl").is_file():
            continue
        # checked as validate checks them: the curve scores what validate would
        rows = (
            train_and_dev_rows(dataset_dir, primitive, dev_fraction, seed)[1]
            if dev_fraction > 0
            else read_rows(dataset_dir, primitive, "validation")
        )
        random.Random(f"{seed}:{primitive}").shuffle(rows)
        out[primitive] = rows[:n]
    return out


def prepare(cfg: TrainConfig) -> Path:
    """The base of a built-here profile, built (and pretrained) if it is missing; reused when current."""
    out = base_dir(cfg)
    assert cfg.model.tiny is not None
    if cfg.model.pretrain is None:  # a random base (fast tests, smoke runs)
        return build_tiny_base(cfg.dataset_dir, cfg.model.tiny, cfg.seed, out)
    check_usable(cfg)
    if stored_fingerprint(cfg) is not None:  # current: check_usable refuses a stale one
        return out
    return pretrain(cfg)


def check_usable(cfg: TrainConfig) -> None:
    """What :func:`prepare` refuses, without changing anything: ``train`` checks it before ``train.overwrite`` deletes a
    primitive's folder, so a refusal leaves everything as it was (docs/guarantees.md, "Refusals change nothing").
    A stale base (built from other inputs), a folder that holds no complete base, a base stage that started and is
    neither resumed nor replaced."""
    if cfg.model.pretrain is None:
        return
    out = base_dir(cfg)
    stored = stored_fingerprint(cfg)
    if stored is not None:
        current = fingerprint(cfg)
        if stored == current:
            return
        diff = sorted(k for k in set(current) | set(stored) if stored.get(k) != current.get(k))
        raise UserError(
            f"an existing base was built from different inputs (differs in: {', '.join(diff)}); rerun the base stage "
            "with train.overwrite=true (forethought train primitive=base train.overwrite=true), or use another output_dir",
            str(out),
        )
    if out.exists() and any(out.iterdir()):
        raise UserError(
            f"folder exists but holds no complete base (no {BASE_MANIFEST}); delete it or use another output_dir",
            str(out),
        )
    _check_not_started(cfg)


def _check_not_started(cfg: TrainConfig) -> None:
    """A base stage that started here (a checkpoint or its config) is continued (train.resume) or replaced (train.overwrite),
    never restarted silently."""
    from forethought.training.run_support import holds_checkpoint

    run = run_dir(cfg)
    if (
        _is_main_process()
        and not cfg.train.resume
        and (holds_checkpoint(run / "checkpoints") or (run / "config.yaml").is_file())
    ):
        raise UserError(
            "the base stage already started here; pass train.resume=true to continue it, train.overwrite=true to "
            "replace it, or choose another output_dir",
            str(run),
        )


def clear_targets(cfg: TrainConfig) -> list[Path]:
    """``train.overwrite``: the base and its run folder, which ``train`` deletes; refused unless recognisably ours."""
    out, run = base_dir(cfg), run_dir(cfg)
    targets = []
    if out.exists():
        if not (out / BASE_MANIFEST).is_file() and any(out.iterdir()):
            raise UserError("train.overwrite: not a forethought base, refusing to delete it", str(out))
        targets.append(out)
    if run.exists():
        if not any((run / m).exists() for m in ("config.yaml", "init", "checkpoints", "metrics.json")):
            raise UserError("train.overwrite: not a forethought base run folder, refusing to delete it", str(run))
        targets.append(run)
    return targets


def _init(cfg: TrainConfig, run: Path) -> Path:
    """The tokenizer and random initialisation the pretraining starts from (deterministic from data and seed)."""
    assert cfg.model.tiny is not None
    return build_tiny_base(cfg.dataset_dir, cfg.model.tiny, base_seed(cfg), run / "init")


def _sft_config(cfg: TrainConfig, ckpt_dir: Path, device: str) -> Any:
    from trl import SFTConfig

    from forethought.training.run_support import whole_model_phase_kwargs

    settings = cfg.model.pretrain
    assert settings is not None
    return SFTConfig(
        output_dir=str(ckpt_dir),
        run_name="base",
        seed=base_seed(cfg),
        data_seed=base_seed(cfg),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        lr_scheduler_type=settings.lr_scheduler,
        warmup_steps=settings.warmup_ratio,
        weight_decay=settings.weight_decay,
        max_grad_norm=1.0,
        optim="adamw_torch",
        per_device_train_batch_size=settings.per_device_batch_size,
        max_length=settings.max_length,
        packing=settings.packing,
        completion_only_loss=settings.loss == "completion",
        assistant_only_loss=False,
        shuffle_dataset=False,  # rows are shuffled with the seed; the trainer's sampler shuffles again
        bf16=False,
        fp16=False,
        logging_steps=settings.logging_steps,
        **whole_model_phase_kwargs(cfg, device, settings.save_steps),
    )


def pretrain(cfg: TrainConfig) -> Path:
    """Train the base full-parameter on the mixed train splits and publish it as ``<output_dir>/base``."""
    import datasets
    import torch
    import transformers
    from omegaconf import OmegaConf
    from trl import SFTTrainer

    from forethought.bundle.models import load_model, load_tokenizer
    from forethought.training.callbacks import ExactMatchCurve, RichProgress, Throughput
    from forethought.training.lm_head import compact_on_cpu
    from forethought.training.models import resolve_device
    from forethought.training.plots import plot_em, plot_loss
    from forethought.training.run_support import (
        finish_wandb,
        last_checkpoint,
        resolved_config,
        start_wandb,
        temporary_environ,
        train_resumable,
        wandb_environ,
    )

    settings = cfg.model.pretrain
    assert settings is not None
    t0 = time.perf_counter()
    run = run_dir(cfg)
    ckpt_dir = run / "checkpoints"
    resume_from = last_checkpoint(ckpt_dir)
    config = resolved_config(cfg, "base")
    # Under `accelerate launch` every rank trains (DDP); only rank 0 checks and writes the run folder.
    main = _is_main_process()
    _check_not_started(cfg)
    if main and (resume_from is not None or (run / "config.yaml").is_file()):
        from forethought.training.run_support import config_diff, read_run_config

        old = read_run_config(run / "config.yaml") if (run / "config.yaml").is_file() else config
        diffs = [
            d for d in config_diff(old, config) if d.split(":")[0].split(".")[0] in ("model", "seed", "dataset_dir")
        ]
        if diffs:
            raise UserError(
                "cannot resume the base stage with a different config:\n  " + "\n  ".join(diffs),
                str(run / "config.yaml"),
            )
    if not sys.stderr.isatty():
        datasets.disable_progress_bars()
    device = resolve_device(cfg.train.device)
    transformers.set_seed(base_seed(cfg))
    run.mkdir(parents=True, exist_ok=True)
    if main:
        atomic_write_text(run / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(config)))
    init = _init(cfg, run)  # race-safe: every rank builds the same folder, one rename wins
    tokenizer = load_tokenizer(init)
    model = load_model(
        init,
        dtype=torch.float32 if device == "cpu" else torch.bfloat16,
        attn_implementation=cfg.model.attn_implementation,
        device=device,
    )
    rows = mixed_train_rows(cfg)
    throughput = Throughput()
    callbacks: list[Any] = [throughput]
    if cfg.logging.progress:
        callbacks.append(RichProgress("base"))
    curve = None
    if settings.em_eval_steps:
        curve = ExactMatchCurve(
            tokenizer,
            em_rows(
                cfg.dataset_dir, list(PRIMITIVE_NAMES), settings.em_eval_examples, cfg.seed, cfg.train.dev_fraction
            ),
            settings.em_eval_steps,
            constrained=cfg.train.decoding == "constrained",
        )
        callbacks.append(curve)
    if device == "cpu":
        compact_on_cpu()  # score only the completion positions in trl's LM head (training/lm_head.py)
    with temporary_environ(wandb_environ(cfg)):
        try:
            start_wandb(cfg, run, "base", config)
            trainer = SFTTrainer(
                model=model,
                args=_sft_config(cfg, ckpt_dir, device),
                train_dataset=datasets.Dataset.from_list(rows),
                processing_class=tokenizer,
                callbacks=callbacks,
            )
            result = train_resumable(trainer, resume_from, "base", cfg.logging.progress)
        finally:
            finish_wandb()
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<end_of_turn>")]
    model.generation_config.pad_token_id = tokenizer.pad_token_id

    out = base_dir(cfg)
    n_params = sum(p.numel() for p in trainer.model.parameters())
    if not main:
        trainer.accelerator.wait_for_everyone()  # rank 0 publishes the base; the adapters load it after this
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".base.", dir=out.parent))
    try:
        trainer.model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        atomic_write_json(
            tmp / BASE_MANIFEST,
            {"profile": cfg.model.profile, "parameters": n_params, "pretrained": True, "fingerprint": fingerprint(cfg)},
        )
        if out.exists():
            out.rmdir()  # an empty folder (checked by prepare)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    history = trainer.state.log_history
    metrics = {
        "stage": "base",
        "completed": True,
        "profile": cfg.model.profile,
        "parameters": n_params,
        "train_rows": len(rows),
        "global_step": trainer.state.global_step,
        "epochs_completed": trainer.state.epoch,
        "tokens_seen": int(trainer.state.num_input_tokens_seen or 0),
        **throughput.summary(),
        "wall_time_s": round(time.perf_counter() - t0, 3),
        "train_loss": result.training_loss,
        "train_loss_last": next((e["loss"] for e in reversed(history) if "loss" in e), None),
        "train_loss_history": [
            {k: e[k] for k in ("step", "epoch", "loss", "learning_rate") if k in e} for e in history if "loss" in e
        ],
        "exact_match_history": curve.history if curve else [],
        "loss": settings.loss,
        "resumed_from": resume_from.name if resume_from else None,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    tokens = {"completion": "completion tokens", "prompt": "prompt tokens", "full": "all tokens"}[settings.loss]
    plot_loss(
        history,
        run / "loss.png",
        f"base ({cfg.model.profile}, full-parameter, {settings.loss} loss)",
        ylabel=f"loss ({tokens})",
    )
    if curve and curve.history:
        plot_em(
            curve.history,
            run / "exact_match.png",
            f"base ({cfg.model.profile}): exact match on a fixed validation subset",
        )
    atomic_write_json(run / "metrics.json", metrics)
    shutil.rmtree(ckpt_dir, ignore_errors=True)  # the base is published; its checkpoints are no longer needed
    trainer.accelerator.wait_for_everyone()
    return out


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0
