"""Probe-only: train match_func with copies of its rows whose tools get new meaningless names each time one is read.

The anonymous-name probe (``probe_anonymous_tools.py``) renamed each copied row's tools once, and the model learned
those pairings by rote. Here a share of the train-solution rows (never a dev solution's: the dev split is carved
first; never a validation row) each fill one more slot of the epoch, and every read of a slot gets a fresh renaming
of the same row (``fn_qzk``; ``--variants`` renderings drawn up front, read in turn, more than the epochs run), so
no pairing recurs and the loss on those slots falls only by reading the tool lines against the task. The rest of
``forethought train`` is untouched: the same real rows, dev rows, selection and outputs; this wraps ``load_splits``
(the variants join the rows the trainer tokenises) and ``SFTTrainer.train`` (the epoch reads the slots).
A measurement, not a lever the project ships (docs/training.md, "Probe of 2026-12-06: match_func trained on tool
names drawn afresh at every read").

    python scripts/probe_fresh_codes.py --fraction 0.5 --variants 12 -- train primitive=match_func model=tiny ...

``--lexical`` writes each rendering's task as words only the wanted tool's shown description holds, and
``--task-last`` moves the task line below the tool list (docs/training.md, "Probes of 2026-12-06 (later)").
``--shuffled`` keeps the names and draws the tool list's order afresh instead, and ``--slots-only`` makes the epoch
read the slots alone with the dev rows as listed: with ``--fraction 1`` every read shows its row's tools in a new
order, so a tool's place in the list says nothing (docs/training.md, "Probe of 2026-12-07: the tool list's order").
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_anonymous_tools import anonymous, anonymous_rendering, rendered  # noqa: E402  (a sibling script)

PRIMITIVE = "match_func"


class FreshReads:
    """The epoch the trainer samples: the real rows, then one slot per copied row; each read of a slot returns the
    next of its renderings (all tokenised by the trainer, stored after the real rows, slot by slot)."""

    def __init__(self, processed: Any, real: int, slots: int, variants: int, *, codes_only: bool = False):
        if len(processed) != real + slots * variants:
            raise ValueError(
                f"the trainer kept {len(processed)} rows of {real} + {slots} x {variants}: a row was dropped, "
                "so the slots no longer line up (raise train.max_length)"
            )
        self.processed, self.real, self.slots, self.variants = processed, real, slots, variants
        self.shown = 0 if codes_only else real  # real rows the epoch reads: all, or none (the slots alone)
        self.reads = [0] * slots

    def __len__(self) -> int:
        return self.shown + self.slots

    def __getitem__(self, index: int) -> Any:
        if index < self.shown:
            return self.processed[index]
        slot = index - self.shown
        read = self.reads[slot]
        self.reads[slot] += 1
        return self.processed[self.real + slot * self.variants + read % self.variants]


def task_last(messages: list) -> list:
    """The messages with the user message's ``Task:`` line moved below the tool list (a causal model then reads the
    tool lines before the task, and the answer follows the task's last word)."""
    *head, user = messages
    lines = user["content"].splitlines()
    task = [line for line in lines if line.startswith("Task: ")][:1]
    rest = [line for line in lines if line not in task]
    return [*head, {**user, "content": "\n".join(rest + task)}]


def visible_descriptions(inp: dict) -> dict[str, str]:
    """Each listed tool's description as the prompt shows it (the rendering in use; a cut word dropped)."""
    from forethought.kernel.specs import SPECS

    spec = SPECS[PRIMITIVE]
    lines = spec.messages(spec.input_type.model_validate(inp))[-1]["content"].splitlines()
    shown: dict[str, str] = {}
    for tool in inp["tools"]:
        line = next(text for text in lines if text.startswith(f"- {tool['name']}("))
        description = line.split("): ", 1)[1] if "): " in line else ""
        words = description.rstrip("…").split()
        shown[tool["name"]] = " ".join(words[:-1] if description.endswith("…") else words)
    return shown


def unique_spans(inp: dict, target: dict | None) -> list[str]:
    """Spans of 2-4 consecutive words of the wanted tool's shown description that no other listed tool's shows."""
    wanted = (target or {}).get("tool_name")
    if not wanted:
        return []
    shown = visible_descriptions(inp)
    words = shown.get(wanted, "").split()
    others = [text.lower() for name, text in shown.items() if name != wanted]
    spans = {" ".join(words[start : start + size]) for size in (2, 3, 4) for start in range(len(words) - size + 1)}
    return sorted(span for span in spans if not any(span.lower() in other for other in others))


def lexical_rendering(inp: dict, target: dict, spans: list[str], rng: random.Random) -> dict:
    """A renamed rendering whose task is a span of the wanted tool's description (found by matching words alone)."""
    task = {**inp["task"], "text": rng.choice(spans)}
    renamed, renamed_target = anonymous({**inp, "task": task}, target, rng)
    return rendered(renamed, renamed_target)


def shuffled_rendering(inp: dict, target: dict | None, rng: random.Random) -> dict:
    """The same input and target with the tool list in a new order (names and lines unchanged)."""
    tools = list(inp["tools"])
    rng.shuffle(tools)
    return rendered({**inp, "tools": tools}, target)


def renderings(row: Any, rng: random.Random, lexical: bool, last: bool, shuffled: bool = False) -> Any:
    """A function drawing one more rendering of ``row`` (its task line below the tools if ``last``), or None where a
    lexical task has no span to draw from."""
    spans = unique_spans(row.input_value, row.target) if lexical else []
    if lexical and not spans:
        return None

    def draw() -> dict:
        if shuffled:
            copy = shuffled_rendering(row.input_value, row.target, rng)
        elif lexical:
            copy = lexical_rendering(row.input_value, row.target, spans, rng)
        else:
            copy = anonymous_rendering(row.input_value, row.target, rng)
        return {**copy, "prompt": task_last(copy["prompt"])} if last else copy

    return draw


def variant_rows(
    rows: list,
    fraction: float,
    variants: int,
    seed: int,
    lexical: bool = False,
    last: bool = False,
    shuffled: bool = False,
) -> tuple[list[dict], int]:
    """(``variants`` renamed renderings of each chosen row, slot by slot; the number of slots)."""
    rng = random.Random(f"fresh:{seed}")
    out: list[dict] = []
    slots = 0
    for row in rows:
        if rng.random() >= fraction:
            continue
        draw = renderings(row, rng, lexical, last, shuffled)
        if draw is None:
            continue
        slots += 1
        for _ in range(variants):
            copy = draw()
            out.append({"prompt": copy["prompt"], "completion": copy["completion"]})
    return out, slots


def renamed_dev(rows: list, seed: int, lexical: bool = False, last: bool = False) -> list:
    """Each dev row with its tools renamed once (the in-context reading measured on held-out wordings); lexical: the
    task replaced by a span of the wanted description, rows without one left out."""
    import json

    from forethought.data_gen.row import DatasetRow

    rng = random.Random(f"fresh-dev:{seed}")
    out = []
    for row in rows:
        draw = renderings(row, rng, lexical, last)
        if draw is None:
            continue
        copy = draw()
        fields = {**copy, "input": json.dumps(copy["input"], ensure_ascii=False)}
        out.append(DatasetRow.model_validate({**row.model_dump(), **fields}))
    return out


def install(
    fraction: float,
    variants: int,
    *,
    codes_only: bool = False,
    lexical: bool = False,
    last: bool = False,
    shuffled: bool = False,
    slots_only: bool = False,
) -> dict[str, Any]:
    """Patch ``load_splits`` and ``SFTTrainer.train`` for match_func; returns the probe's state (slots, reads).
    ``codes_only``: the epoch reads the slots alone, and the dev rows (selection, the per-epoch curve) are shown
    renamed, so the curve is the reading skill's. ``lexical``: each rendering's task is a span of the wanted tool's
    description that no other listed tool's shows (the lookup by matching words, the step's simplest form). ``last``:
    the renderings' task line below the tool list. ``shuffled``: the renderings keep the names and draw the list's
    order afresh. ``slots_only``: the epoch reads the slots alone, the dev rows as listed."""
    import trl
    from datasets import Dataset

    from forethought.training import data

    state: dict[str, Any] = {}
    original = data.load_splits

    def load_splits(dataset_dir, primitive, *, max_train=None, max_eval=None, dev_fraction=0.0, seed=0):
        train_ds, eval_ds, dev = original(
            dataset_dir, primitive, max_train=max_train, max_eval=max_eval, dev_fraction=dev_fraction, seed=seed
        )
        if primitive != PRIMITIVE:
            return train_ds, eval_ds, dev
        data.use_dataset_rendering(dataset_dir)
        train, _ = data.train_and_dev_rows(dataset_dir, primitive, dev_fraction, seed, limit=max_train)
        extra, slots = variant_rows(train, fraction, variants, seed, lexical, last, shuffled)
        state.update(real=len(train_ds), slots=slots, variants=variants)
        print(f"[probe] {len(train_ds)} rows + {slots} slots x {variants} fresh renamings", file=sys.stderr)
        if codes_only:
            dev = renamed_dev(dev, seed, lexical, last)
            eval_ds = Dataset.from_list(data.trainer_rows(dev[:max_eval] if max_eval else dev))
        return Dataset.from_list(data.trainer_rows(train) + extra), eval_ds, dev

    class Trainer(trl.SFTTrainer):
        def train(self, *args, **kwargs):
            # The lookup phase (training/lookup_corpus.py) runs its own trainer before match_func's rows: not ours.
            if state and "lookup" not in Path(self.args.output_dir).name:
                self.train_dataset = state["epoch"] = FreshReads(
                    self.train_dataset,
                    state["real"],
                    state["slots"],
                    state["variants"],
                    codes_only=codes_only or slots_only,
                )
            return super().train(*args, **kwargs)

    data.load_splits = load_splits
    trl.SFTTrainer = Trainer
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.5, help="share of train rows given a slot")
    parser.add_argument("--variants", type=int, default=12, help="renderings per slot (more than the epochs)")
    parser.add_argument("--codes-only", action="store_true", help="train on the renamed slots alone; dev renamed")
    parser.add_argument("--lexical", action="store_true", help="tasks are spans of the wanted tool's description")
    parser.add_argument("--task-last", action="store_true", help="the slots' task line below the tool list")
    parser.add_argument("--shuffled", action="store_true", help="the slots keep the names, the list's order drawn anew")
    parser.add_argument("--slots-only", action="store_true", help="train on the slots alone; dev as listed")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then forethought's arguments")
    args = parser.parse_args(argv)
    if not 0 < args.fraction <= 1 or args.variants < 1:
        print("error: --fraction in (0, 1] and --variants >= 1", file=sys.stderr)
        return 2
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.shuffled and (args.codes_only or args.lexical):
        print("error: --shuffled keeps the names: not with --codes-only or --lexical", file=sys.stderr)
        return 2
    state = install(
        args.fraction,
        args.variants,
        codes_only=args.codes_only,
        lexical=args.lexical,
        last=args.task_last,
        shuffled=args.shuffled,
        slots_only=args.slots_only,
    )
    from forethought.cli import main as forethought

    code = forethought(command)
    if "epoch" in state:
        reads = state["epoch"].reads
        print(f"[probe] slot reads: min {min(reads)}, max {max(reads)} (renderings per slot {args.variants})")
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
