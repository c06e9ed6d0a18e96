"""Where a trained match_func stands against two plain baselines, on the dev split (never a validation row).

- **word overlap**: the listed tool whose name and description share the most words with the task, a word of the
  name counting one and a half (null if none shares one);
- **nearest trained task**: the tool of the trained task (a row of a *train*, non-dev solution, not written for
  training only) that shares the largest fraction of its words with the task (Jaccard), among those whose tool is
  listed in the row; and how often the wanted tool is among the tools of the k nearest (k = 1, 3, 5).

With ``--train-dir`` the trained model decodes the same rows (contract-compiled, as its gate) and its wrong answers
are counted by how many trained rows have the wanted tool as their target: whether the model fails on tools it has
seen rarely, or on wordings; with data that retrieves demonstrations, also by whether the wanted tool was among
the row's demonstrations (first, later, not at all): whether the model fails to use them, or they fail it.
docs/training.md, "Probes after run #7", quotes its figures.

    python scripts/match_func_baselines.py --dataset-dir runs/converge7/data [--train-dir runs/converge7/train]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from forethought.kernel.specs.demonstrations import words  # the overlap's unit, as retrieval uses it

_BANDS = ((1, "0"), (5, "1-4"), (10, "5-9"), (20, "10-19"), (None, "20 or more"))


def tool_relevance(task_words: frozenset[str], tool: dict) -> float:
    """How many of the task's words a listed tool's name and description share, a word of the name counting one and
    a half (a name says what the tool does, a description more besides)."""
    named = task_words & words(tool["name"])
    return len(task_words & (named | words(tool["description"]))) + 0.5 * len(named)


def word_overlap(inp: dict) -> str | None:
    """The listed tool that shares the most words with the task (the first listed among equals); null if none does."""
    task = words(inp["task"]["text"])
    best = max(inp["tools"], key=lambda tool: tool_relevance(task, tool), default=None)  # max keeps the first of ties
    return best["name"] if best is not None and tool_relevance(task, best) > 0 else None


def nearest_tools(inp: dict, store: list[tuple[frozenset[str], str]], k: int) -> list[str]:
    """The distinct tools of the k trained tasks nearest to the row's task, among those listed in the row."""
    task, listed = words(inp["task"]["text"]), {t["name"] for t in inp["tools"]}
    ranked = sorted(
        ((len(task & w) / (len(task | w) or 1), tool) for w, tool in store if tool in listed),
        key=lambda pair: -pair[0],
    )
    out: list[str] = []
    for _, tool in ranked:
        if tool not in out:
            out.append(tool)
            if len(out) == k:
                break
    return out


def _band(n: int) -> str:
    return next(label for upper, label in _BANDS if upper is None or n < upper)


def main(argv: list[str] | None = None) -> int:
    from forethought.errors import UserError

    try:
        return _main(argv)
    except UserError as exc:  # a missing or unsealed dataset, a train folder without a model: located, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset-dir", required=True)
    ap.add_argument("--train-dir", default=None, help="a train folder with a match_func model: decode it too")
    ap.add_argument("--dev-fraction", type=float, default=None, help="default: the run's (--train-dir), else 0.2")
    ap.add_argument("--seed", type=int, default=0, help="the run's seed (train's seed=), which carved its dev split")
    args = ap.parse_args(argv)

    from forethought.training.data import train_and_dev_rows, use_dataset_rendering

    fraction = args.dev_fraction
    if fraction is None and args.train_dir:
        metrics = Path(args.train_dir) / "match_func" / "metrics.json"
        try:
            fraction = float(json.loads(metrics.read_text())["selection"]["dev_fraction"])
        except (OSError, ValueError, KeyError, TypeError):
            print(f"error: {metrics}: no selection.dev_fraction recorded; pass --dev-fraction", file=sys.stderr)
            return 2
    fraction = 0.2 if fraction is None else fraction
    use_dataset_rendering(args.dataset_dir)
    trained, dev = train_and_dev_rows(args.dataset_dir, "match_func", fraction, seed=args.seed)
    if not dev:
        print(f"error: {args.dataset_dir}: no dev rows at dev fraction {fraction}", file=sys.stderr)
        return 2
    solution_rows = [r for r in trained if not r.train_only]
    store = [(words(r.input_value["task"]["text"]), r.target["tool_name"]) for r in solution_rows]
    wanted = [r.target["tool_name"] for r in dev]
    n = len(dev)
    overlap = sum(word_overlap(r.input_value) == w for r, w in zip(dev, wanted, strict=True))
    print(f"match_func dev rows: {n} from {len({r.solution_id for r in dev})} solutions (dev fraction {fraction})")
    print(f"word overlap: {100 * overlap / n:.1f} %")
    for k in (1, 3, 5):
        hits = sum(w in nearest_tools(r.input_value, store, k) for r, w in zip(dev, wanted, strict=True))
        label = "nearest trained task" if k == 1 else f"wanted tool among the {k} nearest trained tasks' tools"
        print(f"{label}: {100 * hits / n:.1f} %")
    if not args.train_dir:
        return 0

    import torch

    from forethought.kernel.backends.hf import generate
    from forethought.kernel.specs import SPECS
    from forethought.training.artifacts import load_adapters

    torch.set_num_threads(2)
    spec = SPECS["match_func"]
    model, tok = load_adapters(args.train_dir, ["match_func"], device="cpu")
    inputs = [spec.input_type.model_validate(r.input_value) for r in dev]
    texts = generate(
        model,
        tok,
        [r.prompt_messages() for r in dev],
        adapter="match_func",
        batch_size=16,
        max_new_tokens=32,
        schemas=[spec.decoding_schema(x) for x in inputs],
    )
    frequency = collections.Counter(r.target["tool_name"] for r in trained)  # every row the model read
    bands: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    # With retrieved demonstrations (the data's store): whether the wanted tool was among those the row showed
    shown_bands: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    right = 0
    for row, inp, text, want in zip(dev, inputs, texts, wanted, strict=True):
        try:
            ok = spec.exact_match(spec.parse(text), row.target)
        except Exception:
            ok = False
        right += ok
        band = "null wanted" if want is None else _band(frequency[want])
        bands[band][0] += 1
        bands[band][1] += not ok
        shown = [d.tool_name for d in getattr(inp, "similar_tasks", None) or []]
        label = (
            "null wanted"
            if want is None
            else "shown first"
            if shown[:1] == [want]
            else "shown, not first"
            if want in shown
            else "not shown"
        )
        shown_bands[label][0] += 1
        shown_bands[label][1] += not ok
    print(f"model: {100 * right / n:.1f} %")
    print("wanted tool's trained rows | dev rows | wrong")
    for label in ["null wanted", *(b for _, b in _BANDS)]:
        if label in bands:
            rows, wrong = bands[label]
            print(f"{label} | {rows} | {wrong} ({100 * wrong / rows:.0f} %)")
    if any(getattr(x, "similar_tasks", None) is not None for x in inputs):
        print("wanted tool among the row's demonstrations | dev rows | wrong")
        for label in ("shown first", "shown, not first", "not shown", "null wanted"):
            if label in shown_bands:
                rows, wrong = shown_bands[label]
                print(f"{label} | {rows} | {wrong} ({100 * wrong / rows:.0f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
