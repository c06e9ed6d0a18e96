"""Error analysis on the dev split: what a trained primitive gets wrong on rows carved from its *train* solutions.

The dev rows are the ones `train.selection` selects with (training/data.py `train_and_dev_rows`): reading their
errors tunes nothing on validation rows, which stay the held-out measurement of `forethought validate`.
Prints each wrong answer (prompt's first line, target, prediction, contract verdict) and a count per kind.

``--rows train`` decodes a seeded sample of the rows the model was trained on instead (those its solutions hold,
not the ones written for training only): exact match there against dev's is the generalisation gap, the
measurement that tells "has not learned it yet" (train low too: more epochs, lr) from "does not carry it to
other solutions" (train high, dev low: data, not steps).

    python scripts/dev_errors.py --train-dir runs/converge1/train --dataset-dir runs/converge1/data \
        --primitive check_prerequisites [--limit 128] [--free] [--rows train]
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
from pathlib import Path


def _selected_fraction(train_dir: str, primitive: str) -> float:
    """The dev fraction the run carved its dev rows with, so the rows decoded here are the ones it selected on."""
    metrics = Path(train_dir) / primitive / "metrics.json"
    try:
        return float(json.loads(metrics.read_text())["selection"]["dev_fraction"])
    except (OSError, ValueError, KeyError, TypeError):
        print(f"error: {metrics}: no selection.dev_fraction recorded; pass --dev-fraction", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-dir", required=True)
    ap.add_argument("--dataset-dir", required=True)
    ap.add_argument("--primitive", required=True)
    ap.add_argument(
        "--dev-fraction", type=float, default=None, help="default: the one the run selected with (its metrics.json)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=128)
    ap.add_argument("--free", action="store_true", help="free decoding instead of contract-compiled")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--show", type=int, default=40, help="wrong answers printed")
    ap.add_argument("--rows", choices=("dev", "train"), default="dev", help="dev rows, or a sample of trained rows")
    args = ap.parse_args(argv)

    import torch

    from forethought.kernel.backends.hf import generate
    from forethought.kernel.specs import SPECS
    from forethought.training.artifacts import load_adapters
    from forethought.training.data import train_and_dev_rows, use_dataset_rendering

    torch.set_num_threads(2)
    use_dataset_rendering(args.dataset_dir)
    spec = SPECS[args.primitive]
    fraction = (
        args.dev_fraction if args.dev_fraction is not None else _selected_fraction(args.train_dir, args.primitive)
    )
    trained, dev = train_and_dev_rows(args.dataset_dir, args.primitive, fraction, seed=args.seed)
    if args.rows == "train":
        rows = [r for r in trained if not r.train_only]
        random.Random(args.seed).shuffle(rows)
    else:
        rows = dev
    rows = rows[: args.limit]
    model, tok = load_adapters(args.train_dir, [args.primitive], device="cpu")
    schemas = None if args.free else [spec.decoding_schema(spec.input_type.model_validate(r.input_value)) for r in rows]
    texts = generate(
        model,
        tok,
        [r.prompt_messages() for r in rows],
        adapter=args.primitive,
        batch_size=16,
        max_new_tokens=args.max_new_tokens,
        schemas=schemas,
    )
    kinds: collections.Counter = collections.Counter()
    shown = 0
    for row, text in zip(rows, texts, strict=True):
        try:
            pred = spec.parse(text)
        except Exception:
            kinds["unparseable"] += 1
            continue
        if spec.exact_match(pred, row.target):
            kinds["exact"] += 1
            continue
        res = spec.check_output(row.input_value, pred)
        kind = "mismatch" if res.ok else f"contract:{res.violations[0].constraint}"
        kinds[kind] += 1
        if shown < args.show:
            shown += 1
            user = row.prompt_messages()[-1]["content"]
            print(f"--- {row.solution_id} [{kind}]")
            print("   " + "\n   ".join(user.splitlines()[:3]))
            print(f"   want {spec.canonical(row.target)}")
            print(f"   got  {spec.canonical(pred)}")
    n = len(rows)
    print(
        f"\n{args.primitive}: {n} {args.rows} rows from {len({r.solution_id for r in rows})} solutions; "
        + ", ".join(f"{k} {v} ({100 * v / n:.1f} %)" for k, v in kinds.most_common())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
