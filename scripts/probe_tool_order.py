"""Probe-only: does a trained match_func read its tool list, or remember where a tool stands in it?

Decodes a split's rows (constrained, as the gates do) with each row's tool list as listed, then in ``--orders`` - 1
other orders drawn per row (the same lines and names, seeded), and prints exact match per order, then a majority
vote over the first 1, 3, 5, ... orders (a tie goes to the answer of the earliest order holding it, so the listed
order first). A model that reads names and descriptions scores the same in every order; one that learned a tool's
place in its domain's usual list falls when the order changes. A measurement, not an inference mode the kernel has
(docs/training.md, "Probe of 2026-12-07: the tool list's order").

    python scripts/probe_tool_order.py --train-dir runs/converge10/train --dataset-dir runs/converge10/data \
        [--split validation] [--orders 5] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

PRIMITIVE = "match_func"


def orders_of(inputs: list, orders: int, seed: int) -> list[list]:
    """For each order, every input with its tool list in that order (order 0: as listed)."""
    shown = [list(inputs)]
    for order in range(1, orders):
        drawn = []
        for index, inp in enumerate(inputs):
            tools = list(inp.tools)
            random.Random(f"{seed}:{order}:{index}").shuffle(tools)
            drawn.append(inp.model_copy(update={"tools": tools}))
        shown.append(drawn)
    return shown


def vote(answers: list[Any]) -> Any:
    """The answer most orders gave; a tie goes to the earliest order's answer among the tied."""
    keys = [json.dumps(answer, sort_keys=True, default=str) for answer in answers]
    counts = Counter(keys)
    best = max(counts.values())
    return answers[next(index for index, key in enumerate(keys) if counts[key] == best)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-dir", required=True)
    parser.add_argument("--dataset-dir", required=True)
    parser.add_argument("--split", default="validation", choices=["train", "validation"])
    parser.add_argument("--orders", type=int, default=5, help="the listed order and this many minus one drawn")
    parser.add_argument("--limit", type=int, default=None, help="the split's first N rows only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    if args.orders < 1 or (args.limit is not None and args.limit < 1):
        print("error: --orders and --limit must be at least 1", file=sys.stderr)
        return 2
    adapter = Path(args.train_dir) / PRIMITIVE
    if not adapter.is_dir():
        print(f"error: {adapter}: no trained {PRIMITIVE} here (--train-dir)", file=sys.stderr)
        return 2

    import torch

    from forethought.kernel.backends.hf import generate
    from forethought.kernel.specs import SPECS
    from forethought.training.artifacts import load_adapters
    from forethought.training.data import read_rows, use_dataset_rendering

    torch.set_num_threads(1)  # a probe beside a training run: leave it the other core
    use_dataset_rendering(args.dataset_dir)
    spec = SPECS[PRIMITIVE]
    rows = read_rows(args.dataset_dir, PRIMITIVE, args.split)[: args.limit]
    model, tokenizer = load_adapters(args.train_dir, [PRIMITIVE], device="cpu")
    inputs = [spec.input_type.model_validate(row.input_value) for row in rows]
    answers = []
    for order, shown in enumerate(orders_of(inputs, args.orders, args.seed)):
        texts = generate(
            model,
            tokenizer,
            [spec.messages(inp) for inp in shown],
            adapter=PRIMITIVE,
            batch_size=args.batch_size,
            max_new_tokens=64,
            schemas=[spec.decoding_schema(inp) for inp in shown],
        )
        answers.append([spec.parse(text) for text in texts])
        right = sum(spec.exact_match(answer, row.target) for answer, row in zip(answers[-1], rows, strict=True))
        label = "as listed" if order == 0 else "drawn"
        print(f"order {order} ({label}): {right}/{len(rows)} = {100 * right / len(rows):.1f} %", flush=True)
    for upto in range(3, args.orders + 1, 2):
        right = sum(
            spec.exact_match(vote([answers[order][index] for order in range(upto)]), row.target)
            for index, row in enumerate(rows)
        )
        print(f"vote of {upto} orders: {right}/{len(rows)} = {100 * right / len(rows):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
