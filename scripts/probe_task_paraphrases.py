"""Probe-only: a copy of a dataset whose match_func train rows also appear with their task written in other words.

The unit tasks of the worked solutions have one wording each (a user's request has paraphrases; the tasks
decompose writes from it do not), so match_func trains on one phrasing per decision and meets a held-out solution's
phrasing ("Show inventory.csv sorted", "Enter the directory just created") with no other to lean on. This rewrite
adds, for every match_func train row of a train solution (never a dev solution's, never a validation row), one copy
per paraphrase of its task text (at most ``--copies``), the input's task text replaced and the row rendered again by
the spec under the dataset's own rendering, the same target, marked ``train_only``. The paraphrases come from JSON
files mapping a task text (as the rows write it, without ``Task:``) to a list of other wordings, written from the
train texts alone. The original rows, their order and the dev split are unchanged, and the manifest's digest of the
rewritten file is updated. A measurement, not a variation the project ships (docs/training.md, "Probe of 2026-12-07,
thirteenth session: match_func's tasks in other words").

    python scripts/probe_task_paraphrases.py runs/spread/data runs/para/data runs/para/out_*.json --copies 2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dataset_copy import refusal, write_copy  # noqa: E402  (sibling scripts: one copy, one rendering)
from probe_anonymous_tools import rendered  # noqa: E402


def read_paraphrases(paths: list[Path]) -> dict[str, list[str]] | str:
    """Every file's mapping merged, or why one is refused (a located message)."""
    merged: dict[str, list[str]] = {}
    for path in paths:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            return f"{path}: {error}"
        if not isinstance(loaded, dict) or not all(
            isinstance(key, str) and isinstance(value, list) and all(isinstance(text, str) for text in value)
            for key, value in loaded.items()
        ):
            return f"{path}: not a JSON object of task text -> list of paraphrases"
        merged.update(loaded)
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("destination", type=Path)
    parser.add_argument("paraphrases", type=Path, nargs="+", help="JSON files: task text -> list of paraphrases")
    parser.add_argument("--copies", type=int, default=2, help="paraphrased copies per row, at most")
    parser.add_argument("--dev-fraction", type=float, default=0.2, help="train.dev_fraction of the training run")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (its dev split)")
    args = parser.parse_args(argv)
    # every refusal before the first write: a located message, exit 2, nothing on disk changed
    refused = refusal(args.source, args.destination)
    paraphrases = read_paraphrases(args.paraphrases)
    if refused is None and isinstance(paraphrases, str):
        refused = paraphrases
    if refused is None and args.copies < 1:
        refused = f"--copies {args.copies}: give 1 or more"
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2

    from forethought.data_gen.row import is_dev_solution
    from forethought.training.data import use_dataset_rendering

    use_dataset_rendering(args.source)
    relative = "match_func/train.jsonl"
    lines = (args.source / relative).read_text(encoding="utf-8").splitlines()
    copies, unmatched = [], 0
    for text in lines:
        row = json.loads(text)
        if is_dev_solution(row["solution_id"], args.dev_fraction, args.seed):
            continue
        inp = json.loads(row["input"])
        others = paraphrases.get(inp["task"]["text"])
        if not others:
            unmatched += 1
            continue
        for number, other in enumerate(others[: args.copies]):
            copy = rendered({**inp, "task": {**inp["task"], "text": other}}, row["target"])
            copied = dict(row)
            copied.update(
                copy,
                id=f"{row['id']}-paraphrase{number}",
                input=json.dumps(copy["input"], ensure_ascii=False),
                train_only=True,
            )
            copies.append(json.dumps(copied, ensure_ascii=False))
    write_copy(args.source, args.destination, {relative: "\n".join(lines + copies) + "\n"})
    print(
        f"{len(lines)} match_func train rows, {len(copies)} paraphrased copies added "
        f"({unmatched} train-solution rows with no paraphrase) -> {args.destination}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
