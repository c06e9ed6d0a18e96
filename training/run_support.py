"""What the base stage (training/pretrain.py) and the primitives' runs (training/train.py) share: the resolved config a
run records and the resume check's diff of it, the newest complete checkpoint, the wandb run each opens, and the
trainer arguments whose names changed across transformers versions."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from forethought.errors import UserError
from forethought.primitives.io import atomic_write_text
from forethought.training.config import TrainConfig

RESUME_FREE_KEYS = {
    ("train", "resume"),
    ("train", "overwrite"),
    ("train", "cpu_threads"),
    ("logging",),
    ("train", "device"),
    ("train", "dataloader_num_workers"),
    ("train", "save_total_limit"),
}


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def read_run_config(path: Path) -> dict[str, Any]:
    """A run folder's ``config.yaml`` (what it was trained with), read as strictly as any config: a hand-edited or torn
    one is a located refusal, never a traceback or a silently different comparison."""
    import yaml

    from forethought.bounded import loads_yaml

    try:
        data = loads_yaml(path.read_text(encoding="utf-8"), str(path))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UserError(f"not valid YAML: {exc}", str(path)) from None
    if not isinstance(data, dict):
        raise UserError(f"expected a mapping (the run's resolved config), got {type(data).__name__}", str(path))
    return data


def resolved_config(cfg: TrainConfig, primitive: str) -> dict[str, Any]:
    resolved = cfg.model_dump(mode="json")
    resolved["primitive"] = primitive
    return resolved


def config_diff(old: Any, new: Any, path: tuple[str, ...] = ()) -> list[str]:
    if any(path[: len(key)] == key for key in RESUME_FREE_KEYS):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            out.extend(config_diff(old.get(key), new.get(key), (*path, key)))
        return out
    return [] if old == new else [f"{'.'.join(path)}: {old!r} -> {new!r}"]


def last_checkpoint(ckpt_dir: Path) -> Path | None:
    """The newest complete checkpoint: its trainer_state.json (written last) parses. A kill while the trainer was
    writing one leaves it empty or cut short; the checkpoint before it is then the one to resume from."""
    if not ckpt_dir.is_dir():
        return None
    found = []
    for folder in ckpt_dir.iterdir():
        if (
            folder.is_dir()
            and folder.name.startswith("checkpoint-")
            and folder.name[len("checkpoint-") :].isdigit()
            and complete_trainer_state(folder / "trainer_state.json")
        ):
            found.append((int(folder.name[len("checkpoint-") :]), folder))
    return max(found)[1] if found else None


def holds_checkpoint(ckpt_dir: Path) -> bool:
    """Whether a trainer began writing any checkpoint here, complete or torn: a run was started in this folder. A kill
    while the first checkpoint was being written leaves no complete one (:func:`last_checkpoint` is None), yet the
    folder is not fresh, so a plain rerun must still be refused rather than train over it."""
    return ckpt_dir.is_dir() and any(
        folder.is_dir() and folder.name.startswith("checkpoint-") for folder in ckpt_dir.iterdir()
    )


def complete_trainer_state(path: Path) -> bool:
    # transformers writes this file with Python's json, which writes a diverged loss as NaN: read it as its writer
    # does (not with the project's strict reader), or a run whose loss went NaN once could never resume
    import json

    try:
        return path.is_file() and isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (OSError, UnicodeDecodeError, ValueError):  # a torn or hand-edited state: not complete
        return False


def _set_environ(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextlib.contextmanager
def temporary_environ(values: dict[str, str | None]) -> Iterator[None]:
    """Set (a value) or unset (None) these environment variables for the block, then put back what was there."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        _set_environ(values)
        yield
    finally:
        _set_environ(saved)


def wandb_run_id(run_dir: Path, primitive: str) -> str:
    """A stable wandb run id per run folder, so a resumed run continues the same wandb run."""
    id_file = run_dir / "wandb_run_id"
    if id_file.is_file():
        return id_file.read_text(encoding="utf-8").strip()
    run_id = f"{primitive}-{uuid.uuid4().hex[:8]}"
    if is_main_process():
        atomic_write_text(id_file, run_id + "\n")
    return run_id


def wandb_environ(cfg: TrainConfig) -> dict[str, str | None]:
    if cfg.logging.backend != "wandb":
        return {}
    return {
        "WANDB_MODE": cfg.logging.mode,
        "WANDB_SILENT": "true",
        "WANDB_LOG_MODEL": "false",
        "WANDB_PROJECT": cfg.logging.project,
    }


def start_wandb(cfg: TrainConfig, run_dir: Path, primitive: str, config: dict[str, Any]) -> None:
    """Open this primitive's wandb run explicitly (transformers' callback then logs into it).

    Settings are passed as arguments, not environment variables: wandb reads its
    environment once per process, so with ``primitive=all`` every later run would
    otherwise land in the first one's folder under the first one's id.
    """
    if cfg.logging.backend != "wandb" or not is_main_process():
        return
    import wandb

    finish_wandb()
    wandb.init(
        project=cfg.logging.project,
        entity=cfg.logging.entity,
        name=primitive,
        id=wandb_run_id(run_dir, primitive),
        resume="allow",
        dir=str(run_dir.resolve()),
        mode=cfg.logging.mode,
        tags=[*cfg.logging.tags, primitive, cfg.model.profile, cfg.train.preset],
        group=Path(cfg.output_dir).resolve().name,
        config=config,
    )


def finish_wandb() -> None:
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()


def train_resumable(trainer: Any, resume_from: Path | None, label: str, progress: bool) -> Any:
    """``trainer.train()``, from ``resume_from`` when given (said on stderr); with the rich progress display, without
    transformers' printed log dicts. Returns the trainer's result."""
    if progress:
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    if resume_from is not None:
        print(f"[{label}] resuming from {resume_from}", file=sys.stderr)
    return trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)


def whole_model_phase_kwargs(cfg: Any, device: str, save_steps: int) -> dict[str, Any]:
    """The SFTConfig settings the whole-model phases share (the base stage, a primitive's lookups): no evaluation, a
    checkpoint every ``save_steps`` (the last one kept, to resume from), the reporting the run's logging asks for."""
    return {
        "use_cpu": device == "cpu",
        "dataloader_pin_memory": device == "cuda",
        **checkpointing_kwargs(False),  # ~40 % slower on CPU and not needed at these sizes
        "logging_first_step": True,
        "eval_strategy": "no",
        "save_strategy": "steps",
        "save_steps": save_steps,
        "save_total_limit": 1,
        "include_num_input_tokens_seen": "non_padding",
        "report_to": ["wandb"] if cfg.logging.backend == "wandb" else "none",
        "disable_tqdm": True,
        "push_to_hub": False,
    }


def checkpointing_kwargs(gc: bool) -> dict[str, Any]:
    """transformers >= 5.2x renamed gradient_checkpointing to activation_checkpointing (the old name warns)."""
    import dataclasses

    from trl import SFTConfig

    names = {f.name for f in dataclasses.fields(SFTConfig)}
    key = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {key: gc, f"{key}_kwargs": {"use_reentrant": False} if gc else None}
