"""Probe-only: a copy of a dataset whose match_func prompts list their tools most relevant to the task first.

Relevance is the word-overlap baseline's (scripts/match_func_baselines.py ``tool_relevance``: the words a tool's name
and description share with the task, a name's word counting one and a half); ties keep the registry's order. Each
row's input lists its tools in the new order and its prompt is rendered again by the spec, under the dataset's own
rendering, so the grammar and the contract see the same list; targets, rows and their order are unchanged (the dev
split stays the same), and the manifest's digests of the two rewritten files are updated. Not a rendering the kernel
knows: a measurement of whether a lexical prior in the list's order is a lever (docs/training.md, "Probe of
2026-12-06: match_func's tools ranked by word overlap").

    python scripts/probe_ranked_tools.py runs/spread/data runs/rank/data
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dataset_copy import refusal, write_copy  # noqa: E402  (sibling scripts: one copy, one scoring)
from match_func_baselines import tool_relevance, words  # noqa: E402


def ranked(inp: dict) -> dict:
    """The input with its tools most relevant to the task first (``sorted`` is stable: ties keep their order)."""
    task = words(inp["task"]["text"])
    return {**inp, "tools": sorted(inp["tools"], key=lambda tool: -tool_relevance(task, tool))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("destination", type=Path)
    args = parser.parse_args(argv)
    # every refusal before the first write: a located message, exit 2, nothing on disk changed
    refused = refusal(args.source, args.destination)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2

    from forethought.kernel.specs import SPECS
    from forethought.training.data import use_dataset_rendering

    use_dataset_rendering(args.source)
    spec = SPECS["match_func"]
    rewritten: dict[str, str] = {}
    moved = first_wanted = total = 0
    for split in ("train", "validation"):
        relative = f"match_func/{split}.jsonl"
        rows = []
        for text in (args.source / relative).read_text(encoding="utf-8").splitlines():
            row = json.loads(text)
            before = json.loads(row["input"])
            after = ranked(before)
            row["input"] = json.dumps(after, ensure_ascii=False)
            row["prompt"] = spec.messages(spec.input_type.model_validate(after))
            moved += after["tools"] != before["tools"]
            first_wanted += bool(after["tools"]) and after["tools"][0]["name"] == (row["target"] or {}).get("tool_name")
            total += 1
            rows.append(json.dumps(row, ensure_ascii=False))
        rewritten[relative] = "\n".join(rows) + "\n"
    write_copy(args.source, args.destination, rewritten)
    print(
        f"{total} match_func rows, {moved} reordered; the first listed tool is the wanted one in {first_wanted} "
        f"({100 * first_wanted / max(total, 1):.1f} %) -> {args.destination}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
