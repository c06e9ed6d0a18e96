"""Trainer callbacks: a rich progress display and the run's throughput bookkeeping."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

if TYPE_CHECKING:
    from forethought.data_gen.row import DatasetRow


class RichProgress(TrainerCallback):
    """A rich progress bar for training and evaluation, with the latest loss.

    When stderr is not a terminal (SLURM logs, CI, tests) it prints one plain
    line per logging step instead of redrawing a bar.
    """

    def __init__(self, label: str, *, stream: Any = None):
        self.label = label
        self.stream = stream or sys.stderr
        self.progress = None
        self.task = None
        self.eval_task = None
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if self.interactive:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=state.max_steps, completed=state.global_step, info="")
        else:
            print(
                f"[{self.label}] training: {state.max_steps} steps (from step {state.global_step})",
                file=self.stream,
                flush=True,
            )

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step)

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if self.progress is None or eval_dataloader is None:
            return
        if self.eval_task is None:
            try:
                total = len(eval_dataloader)
            except TypeError:
                total = None
            self.eval_task = self.progress.add_task(f"{self.label} eval", total=total, info="")
        self.progress.advance(self.eval_task)

    def on_evaluate(self, args, state, control, **kwargs):
        if self.progress is not None and self.eval_task is not None:
            self.progress.remove_task(self.eval_task)
            self.eval_task = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        parts = []
        for key in ("loss", "eval_loss", "learning_rate", "grad_norm", "mean_token_accuracy"):
            if key in logs and isinstance(logs[key], (int, float)):
                parts.append(f"{key} {logs[key]:.4g}")
        if not parts:
            return
        info = "  ".join(parts)
        if self.progress is not None:
            self.progress.update(self.task, info=info)
        else:
            print(f"[{self.label}] step {state.global_step}/{state.max_steps}  {info}", file=self.stream, flush=True)

    def on_train_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step)
            self.progress.stop()
            self.progress = None


class Throughput(TrainerCallback):
    """Tokens and time of the training done by *this* process (a resumed run counts from its checkpoint).

    Evaluations run inside ``train()`` are subtracted, so tokens/s is training throughput.
    """

    def __init__(self) -> None:
        self.start_time: float | None = None
        self.end_time: float | None = None
        self.start_tokens = 0
        self.end_tokens = 0
        self.start_step = 0
        self.end_step = 0
        self.eval_seconds = 0.0

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "eval_runtime" in logs:
            self.eval_seconds += float(logs["eval_runtime"])

    def on_train_begin(self, args, state, control, **kwargs):
        # Called after a checkpoint's trainer state has been restored.
        self.start_time = time.perf_counter()
        self.start_tokens = int(state.num_input_tokens_seen or 0)
        self.start_step = int(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        self.end_time = time.perf_counter()
        self.end_tokens = int(state.num_input_tokens_seen or 0)
        self.end_step = int(state.global_step)

    def summary(self) -> dict[str, Any]:
        seconds = (self.end_time or time.perf_counter()) - (self.start_time or time.perf_counter())
        train_seconds = max(0.0, seconds - self.eval_seconds)  # evaluations during training are not training
        tokens = self.end_tokens - self.start_tokens
        return {
            "steps_this_session": self.end_step - self.start_step,
            "tokens_this_session": tokens,
            "train_seconds_this_session": round(train_seconds, 3),
            "eval_seconds_during_training": round(self.eval_seconds, 3),
            "tokens_per_second": round(tokens / train_seconds, 2) if train_seconds > 0 else None,
        }


def exact_match_now(
    model: Any, tokenizer: Any, rows: dict[str, list[DatasetRow]], *, constrained: bool, max_new_tokens: int = 256
) -> dict[str, float]:
    """Greedy decoding of each primitive's rows with the model as it is, scored as ``forethought validate`` scores
    (the primitive's spec: parse, canonical exact match); the model is put back in training mode after."""
    from forethought.kernel.backends.hf import generate
    from forethought.kernel.specs import SPECS
    from forethought.training.validate import score

    was_training = model.training
    side = tokenizer.padding_side
    model.eval()
    try:
        ems = {}
        for primitive, prows in rows.items():
            spec = SPECS[primitive]
            schemas = (
                [spec.decoding_schema(spec.input_type.model_validate(r.input_value)) for r in prows]
                if constrained
                else None
            )
            texts = generate(
                model,
                tokenizer,
                [r.prompt_messages() for r in prows],
                adapter=None,
                batch_size=16,
                max_new_tokens=max_new_tokens,
                schemas=schemas,
            )
            ems[primitive] = score(spec, prows, texts, 0)["exact_match"]
    finally:
        tokenizer.padding_side = side  # generate() pads on the left; training pads on the right
        if was_training:
            model.train()
    return ems


class DevExactMatch(TrainerCallback):
    """Exact match on the dev rows at every evaluation, added to the evaluation's metrics as ``eval_exact_match``,
    and ``eval_selection_score``: the exact match, ties broken by the dev loss (``em - loss / 1000``: a loss below
    10 never outweighs one row of 100), so epochs that only lower the loss still count as progress.

    The trainer keeps the best checkpoint by the score (``metric_for_best_model``, ``load_best_model_at_end``) and
    transformers' ``EarlyStoppingCallback`` stops on it, with their state saved in each checkpoint, so a resumed
    run selects exactly as an uninterrupted one. Must come before ``EarlyStoppingCallback`` in the callback list.
    The dev rows come from train solutions (training/data.py): no validation row is read.
    """

    def __init__(
        self, tokenizer: Any, primitive: str, rows: list[DatasetRow], *, constrained: bool, max_new_tokens: int = 256
    ):
        self.tokenizer = tokenizer
        self.primitive = primitive
        self.rows = rows
        self.constrained = constrained
        self.max_new_tokens = max_new_tokens

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        if model is None or metrics is None:
            return
        em = exact_match_now(
            model,
            self.tokenizer,
            {self.primitive: self.rows},
            constrained=self.constrained,
            max_new_tokens=self.max_new_tokens,
        )[self.primitive]
        metrics["eval_exact_match"] = em
        metrics["eval_selection_score"] = em - float(metrics.get("eval_loss", 0.0)) / 1000
        for entry in reversed(state.log_history):  # the evaluation's own log line, for metrics.json and the plots
            if "eval_loss" in entry and entry.get("step") == state.global_step:
                entry["eval_exact_match"] = em
                break
        wandb = sys.modules.get("wandb")
        if state.is_world_process_zero and wandb is not None and getattr(wandb, "run", None) is not None:
            wandb.log({"eval/exact_match": em, "train/global_step": state.global_step})
        if state.is_world_process_zero:
            print(
                f"[{self.primitive}] epoch {state.epoch:.2f}: dev exact match {100 * em:.1f} % ({len(self.rows)} rows)",
                file=sys.stderr,
                flush=True,
            )


class ExactMatchCurve(TrainerCallback):
    """A learning curve in exact match: greedy decoding on a fixed subset of rows every N steps.

    Scored exactly as ``forethought validate`` scores, kept in ``history`` (the run's metrics.json) and logged
    to wandb as ``em/<primitive>`` when a wandb run is open. It is monitoring only: nothing is selected or
    tuned with these rows (with a dev split they are dev rows, otherwise validation rows).
    """

    def __init__(
        self,
        tokenizer: Any,
        rows: dict[str, list[DatasetRow]],
        every: int,
        *,
        max_new_tokens: int = 256,
        constrained: bool = False,
    ):
        self.tokenizer = tokenizer
        self.rows = rows  # primitive -> rows
        self.every = every
        self.max_new_tokens = max_new_tokens
        self.constrained = constrained
        self.history: list[dict[str, Any]] = []

    def measure(self, model: Any, step: int) -> dict[str, float]:
        ems = exact_match_now(
            model, self.tokenizer, self.rows, constrained=self.constrained, max_new_tokens=self.max_new_tokens
        )
        self.history.append({"step": step, **{f"em/{p}": v for p, v in ems.items()}})
        return ems

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if model is None or not state.is_world_process_zero:
            return
        if state.global_step % self.every == 0 or state.global_step == state.max_steps:
            ems = self.measure(model, state.global_step)
            wandb = sys.modules.get("wandb")
            if wandb is not None and getattr(wandb, "run", None) is not None:
                # transformers' wandb callback runs before ours and uses train/global_step as the x axis
                wandb.log({**{f"em/{p}": v for p, v in ems.items()}, "train/global_step": state.global_step})
            print(
                f"[exact match] step {state.global_step}: " + ", ".join(f"{p} {100 * v:.0f} %" for p, v in ems.items()),
                file=sys.stderr,
                flush=True,
            )
