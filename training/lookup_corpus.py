"""Made-up lookups, many to a short sequence, trained before a primitive's own rows (per_primitive.<name>.lookup).

match_func's held-out tasks need one in-context step: find the tool line whose description says what the task says and
copy the name written on it. A model trained from scratch on the requests does not acquire it from match_func's rows
(one answer per 500-1,500-token prompt: docs/training.md, "Probe of 2026-12-06: match_func trained on tool names drawn
afresh at every read"); it memorises which wording goes with which name. Here the step is asked several times a
sequence, where memorising cannot pay: a few real tool lines of match_func's train prompts with their names shuffled
among them (a name stays beside its own description only by chance), then tasks that are 2-4 consecutive words only
one shown description holds, each answered ``{"tool_name": "NAME"}`` with the name on that line (with ``none_share``,
that share asks instead for words no shown line holds, answered ``{"tool_name": null}``; with ``task_share``, that share
of the sequences asks real train tasks against lines of their own tool list, :func:`task_sequence`). The loss reads the answers
only (the name or null, and the closing ``"}``). Made from train rows only (never a dev or validation row) and drawn
up front from the run's seed, so a resumed run reads the same sequences. Trained by the real trl trainer on the
primitive's full weights, in place, before its own rows; the adapter it ships is that model (docs/training.md, "Probe
of 2026-12-06: a made-up lookup corpus")."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.errors import UserError

if TYPE_CHECKING:
    from forethought.training.config import LookupSettings, TrainConfig

PRIMITIVE = "match_func"

# A tool list as the train prompts show it: its lines (name, parameters, description), and the tasks asked against it
# with the tool each wants (None: no listed tool fits).
Registry = tuple[list[tuple[str, str, str]], list[tuple[str, str | None]]]


def tool_lines(prompts: Iterable[list[dict[str, str]]]) -> list[tuple[str, str, str]]:
    """(name, parameters, description) of every distinct tool line the prompts' last messages show, as the prompt
    shows it (a cut description keeps its cut, without the ellipsis)."""
    lines = set()
    for prompt in prompts:
        for text in prompt[-1]["content"].splitlines():
            if text.startswith("- ") and "(" in text:
                lines.add(text)
    out = []
    for text in sorted(lines):
        name, rest = text[2:].split("(", 1)
        params, _, description = rest.partition("): ")
        if not description:
            params, description = rest.rstrip(")"), ""
        out.append((name, params, description.rstrip("…")))
    return out


def spans(words: list[str]) -> list[str]:
    """Every run of 2-4 consecutive words."""
    return [" ".join(words[start : start + size]) for size in (2, 3, 4) for start in range(len(words) - size + 1)]


def sequence(pool: list[tuple[str, str, str]], rng: random.Random, tools: int, queries: int, none_share: float = 0.0):
    """One sequence as (text, is_answer) parts, and how many lookups it asks. With ``none_share`` > 0, each lookup is
    in that share asked instead for words no shown line holds (2-4 words of a tool not shown), answered null: the
    decision match_func must make when no listed tool fits (6.4 % of its train rows). Measured at 0.2: one row more
    on validation, inside the base-to-base spread, so the converge profile leaves it at 0 (docs/training.md, "Probe
    of 2026-12-06, later: lookups that no shown line answers")."""
    chosen = rng.sample(pool, tools)
    names = [name for name, _, _ in chosen]
    rng.shuffle(names)
    lines = [f"- {name}({params}): {description}" for name, (_, params, description) in zip(names, chosen, strict=True)]
    lowered = [description.lower() for _, _, description in chosen]
    asks: list[tuple[str, str | None]] = []
    for index, (_, _, description) in enumerate(chosen):
        own = [
            span
            for span in spans(description.split())
            if not any(span.lower() in other for other_index, other in enumerate(lowered) if other_index != index)
        ]
        if own:
            asks.append((rng.choice(own), names[index]))
    rng.shuffle(asks)
    asks = asks[:queries]
    if none_share:  # no draw at all otherwise: a corpus without nulls stays the one measured before them
        for position in range(len(asks)):
            if rng.random() < none_share:
                unheld = _unheld(pool, names, lowered, rng)
                if unheld:
                    asks[position] = (unheld, None)
    # With nulls asked, the name's opening quote is part of the answer: a name or null is decided at its first token.
    asked = '{"tool_name": ' if none_share else '{"tool_name": "'
    parts = [("Tools:\n" + "\n".join(lines) + "\n", False)]
    for task, name in asks:
        parts.append((f"Task: {task}\n{asked}", False))
        if name is None:
            parts.append(("null}", True))
        else:
            parts.append((f'"{name}"}}' if none_share else f'{name}"}}', True))
        parts.append(("\n", False))
    return parts, len(asks)


def _unheld(pool: list[tuple[str, str, str]], shown: list[str], lowered: list[str], rng: random.Random) -> str | None:
    """2-4 consecutive words of a tool not shown that no shown description holds (None after a few tries)."""
    others = [description for name, _, description in pool if name not in shown]
    for _ in range(8):
        unheld = [
            span
            for span in spans(rng.choice(others).split())
            if not any(span.lower() in shown_text for shown_text in lowered)
        ]
        if unheld:
            return rng.choice(unheld)
    return None


def registries(rows: Iterable[Any]) -> list[Registry]:
    """The train rows grouped by the tool list their prompt shows: (tool lines, [(task, wanted tool name or null)]).
    Rows written for training only (``without_target``'s: a list with its tool cut out) are left out, so each list is
    a whole registry as the solutions show it."""
    grouped: dict[tuple[tuple[str, str, str], ...], list[tuple[str, str | None]]] = {}
    for row in rows:
        if row.train_only:
            continue
        lines = tuple(tool_lines([row.prompt_messages()]))
        grouped.setdefault(lines, []).append((row.input_value["task"]["text"], row.target.get("tool_name")))
    return [(list(lines), tasks) for lines, tasks in sorted(grouped.items())]


def task_sequence(
    registry: Registry,
    rng: random.Random,
    tools: int,
    queries: int,
    null_share: float,
):
    """One sequence of real train tasks against lines of their own registry, as (text, is_answer) parts and how many
    lookups it asks: up to ``queries`` tasks of one tool list, the lines of the tools they want shown (each left out
    instead in ``null_share`` of draws, its tasks then answered null), the rest of ``tools`` lines drawn from the same
    list, names shuffled among the shown lines as in :func:`sequence`. A null here is the real one: a task of the
    domain whose tool is not listed, beside lines that share its words."""
    lines, tasks = registry
    by_name = {name: (name, params, description) for name, params, description in lines}
    asked_tasks = rng.sample(tasks, min(queries, len(tasks)))
    wanted = list(dict.fromkeys(name for _, name in asked_tasks if name in by_name))
    dropped = {name for name in wanted if rng.random() < null_share}
    shown: list[str] = []
    said: set[str] = set()  # one line per description: two tools described alike (find, find_remote) are no lookup
    others = [name for name in by_name if name not in dropped and name not in wanted]
    for name in [name for name in wanted if name not in dropped] + rng.sample(others, len(others)):
        if len(shown) < tools and by_name[name][2] not in said:
            shown.append(name)
            said.add(by_name[name][2])
    rng.shuffle(shown)
    names = list(shown)
    rng.shuffle(names)
    written = dict(zip(shown, names, strict=True))  # a tool's line, with the name it is written with
    parts = [
        (
            "Tools:\n"
            + "\n".join(f"- {written[name]}({by_name[name][1]}): {by_name[name][2]}" for name in shown)
            + "\n",
            False,
        )
    ]
    for task, name in asked_tasks:
        answer = f'"{written[name]}"' if name in written else "null"
        parts += [(f'Task: {task}\n{{"tool_name": ', False), (answer + "}", True), ("\n", False)]
    return parts, len(asked_tasks)


def encode(tokenizer: Any, parts: list[tuple[str, bool]]) -> dict[str, list[int]]:
    """``input_ids`` after ``<bos>`` and ``labels`` (-100 outside the answers), as trl reads a tokenised row."""
    ids, labels = [tokenizer.bos_token_id], [-100]
    for text, is_answer in parts:
        piece = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += piece
        labels += piece if is_answer else [-100] * len(piece)
    return {"input_ids": ids, "labels": labels}


def check_pool(pool: list[tuple[str, str, str]], tools: int, where: str) -> None:
    """Refuse (before anything is written) a dataset whose match_func train prompts show too few tools."""
    if len(pool) < tools:
        raise UserError(
            f"lookup.tools={tools}, but match_func's train prompts show {len(pool)} distinct tool lines: lower "
            "train.per_primitive.<name>.lookup.tools, or set it to null",
            where,
        )


def corpus(
    tokenizer: Any,
    pool: list[tuple[str, str, str]],
    count: int,
    tools: int,
    queries: int,
    seed: int,
    none_share: float = 0.0,
    task_lists: list[Registry] | None = None,
    task_share: float = 0.0,
    task_null_share: float = 0.0,
):
    """``count`` tokenised sequences drawn from the seed (the same on every machine and every resume); with
    ``task_share`` > 0, that share of them asks real train tasks of one registry (:func:`task_sequence`) instead."""
    rng = random.Random(f"lookup:{seed}")
    weights = [len(tasks) for _, tasks in task_lists or []]
    out = []
    for _ in range(count):
        if task_share and task_lists and rng.random() < task_share:  # no draw otherwise: the corpus measured before
            registry = rng.choices(task_lists, weights)[0]
            out.append(encode(tokenizer, task_sequence(registry, rng, tools, queries, task_null_share)[0]))
        else:
            out.append(encode(tokenizer, sequence(pool, rng, tools, queries, none_share)[0]))
    return out


def pool_of(cfg: TrainConfig, tools: int) -> list[tuple[str, str, str]]:
    """The tool lines of match_func's train rows (never a dev solution's) the lookups draw from; refused when there is
    no match_func train split or too few distinct tools (checked before anything is written)."""
    from forethought.training.data import split_path, train_and_dev_rows

    where = str(split_path(cfg.dataset_dir, PRIMITIVE, "train"))
    if not Path(where).is_file():
        raise UserError(
            "train.per_primitive.<name>.lookup draws from match_func's train split, and there is none", where
        )
    rows = train_and_dev_rows(cfg.dataset_dir, PRIMITIVE, cfg.train.dev_fraction, cfg.seed)[0]
    pool = tool_lines(row.prompt_messages() for row in rows)
    check_pool(pool, tools, where)
    return pool


def train_registries(cfg: TrainConfig) -> list[Registry]:
    """:func:`registries` of match_func's train rows (never a dev solution's)."""
    from forethought.training.data import train_and_dev_rows

    return registries(train_and_dev_rows(cfg.dataset_dir, PRIMITIVE, cfg.train.dev_fraction, cfg.seed)[0])


def train_on_lookups(
    cfg: TrainConfig, settings: LookupSettings, model: Any, tokenizer: Any, ckpt_dir: Path, device: str, label: str
) -> dict[str, Any]:
    """Train ``model`` in place, every weight, on ``settings.steps`` batches of fresh made-up lookups, with the real trl
    trainer and its own checkpoints under ``ckpt_dir`` (a killed run resumes there). Returns its metrics."""
    import datasets
    from trl import SFTConfig, SFTTrainer

    from forethought.training.callbacks import RichProgress, Throughput
    from forethought.training.run_support import last_checkpoint, train_resumable, whole_model_phase_kwargs

    started = time.perf_counter()
    resume_from = last_checkpoint(ckpt_dir)
    count = settings.steps * settings.per_device_batch_size * max(1, int(os.environ.get("WORLD_SIZE", "1")))
    rows = corpus(
        tokenizer,
        pool_of(cfg, settings.tools),
        count,
        settings.tools,
        settings.queries,
        cfg.seed,
        settings.none_share,
        train_registries(cfg) if settings.task_share else None,
        settings.task_share,
        settings.task_null_share,
    )
    throughput = Throughput()
    callbacks: list[Any] = [throughput] + ([RichProgress(f"{label} lookups")] if cfg.logging.progress else [])
    args = SFTConfig(
        output_dir=str(ckpt_dir),
        run_name=f"{label}-lookups",
        seed=cfg.seed,
        data_seed=cfg.seed,
        max_steps=settings.steps,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant_with_warmup",  # the probe's schedule: a short warm-up, then a constant rate
        warmup_steps=settings.warmup_steps,
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch",
        per_device_train_batch_size=settings.per_device_batch_size,
        max_length=None,  # a sequence is a few hundred tokens: nothing to cut
        packing=False,
        bf16=device == "cuda",
        fp16=False,
        logging_steps=cfg.train.logging_steps,
        **whole_model_phase_kwargs(cfg, device, settings.save_steps),
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=datasets.Dataset.from_list(rows),  # tokenised rows with labels: trl uses them as they are
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    result = train_resumable(trainer, resume_from, f"{label} lookups", cfg.logging.progress)
    history = trainer.state.log_history
    return {
        **settings.model_dump(),
        "sequences": len(rows),
        "global_step": trainer.state.global_step,
        "tokens_seen": int(trainer.state.num_input_tokens_seen or 0),
        **throughput.summary(),
        "wall_time_s": round(time.perf_counter() - started, 3),
        "train_loss": result.training_loss,
        "train_loss_history": [
            {k: e[k] for k in ("step", "loss", "learning_rate") if k in e} for e in history if "loss" in e
        ],
        "resumed_from": resume_from.name if resume_from else None,
    }
