"""A match_func adapter trained with retrieved demonstrations, decoded on validation rows twice: shown their
demonstrations (the gate's prompts), and shown ``(none)`` instead, as every prompt over a user's own tools is (no
stored decision names them). A report for docs/training.md, "Recorded run #9": it selects nothing.

    python scripts/match_func_without_demonstrations.py --dataset-dir runs/converge9/data --train-dir runs/converge9/train
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    from forethought.errors import UserError

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset-dir", required=True, help="data generated with data.demonstrations")
    ap.add_argument("--train-dir", required=True, help="a train folder with a match_func model trained on it")
    args = ap.parse_args(argv)
    try:
        return _run(args.dataset_dir, args.train_dir)
    except UserError as exc:  # a missing or unsealed dataset, a train folder without a model: located, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def _run(dataset_dir: str, train_dir: str) -> int:
    import torch

    from forethought.data_gen.row import read_rows
    from forethought.kernel.backends.hf import generate
    from forethought.kernel.specs import SPECS
    from forethought.training.artifacts import load_adapters
    from forethought.training.data import dataset_stores, use_dataset_rendering

    torch.set_num_threads(2)
    use_dataset_rendering(dataset_dir)
    if not any(store.primitive == "match_func" for store in dataset_stores(dataset_dir)):
        print(f"error: {dataset_dir}: its match_func prompts retrieve no demonstrations", file=sys.stderr)
        return 2
    spec = SPECS["match_func"]
    rows = read_rows(dataset_dir, "match_func", "validation")
    model, tok = load_adapters(train_dir, ["match_func"], device="cpu")
    shown = [spec.input_type.model_validate(r.input_value) for r in rows]
    for label, inputs in (("shown", shown), ("(none)", [x.model_copy(update={"similar_tasks": []}) for x in shown])):
        texts = generate(
            model,
            tok,
            [spec.messages(x) for x in inputs],
            adapter="match_func",
            batch_size=16,
            max_new_tokens=32,
            schemas=[spec.decoding_schema(x) for x in inputs],
        )
        right = sum(spec.exact_match(spec.parse(t), r.target) for r, t in zip(rows, texts, strict=True))
        nulls = sum(json.loads(t).get("tool_name") is None for t in texts)
        print(
            f"demonstrations {label}: exact match {100 * right / len(rows):.1f} % of {len(rows)} validation rows; null answered {nulls}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
