"""Probe-only: a copy of a dataset with match_func train rows whose tools are listed under meaningless names.

For a fraction of the match_func train rows of train solutions (never a dev solution's, never a validation row),
a copy is added in which every listed tool is renamed to a random code (``fn_qzk``): its parameters and description
stay, and the target names the code of the wanted tool (null stays null). A row like that is answered only by
reading the tool lines' descriptions against the task and copying the name on the matching line, which is what a
held-out wording needs and what memorising a trained task's tool name skips. Rows are rendered again by the spec,
under the dataset's own rendering; the original rows, their order and the dev split are unchanged, and the
manifest's digest of the rewritten file is updated. A measurement, not a variation the project ships
(docs/training.md, "Probe of 2026-12-06: match_func trained on anonymous tool names").

    python scripts/probe_anonymous_tools.py runs/spread/data runs/anon/data --fraction 0.5
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dataset_copy import refusal, write_copy  # noqa: E402  (a sibling script: one copy)


def code_names(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct meaningless names: ``fn_`` and three consonants (no English word to lean on)."""
    letters = [letter for letter in string.ascii_lowercase if letter not in "aeiouy"]
    names: set[str] = set()
    while len(names) < count:
        names.add("fn_" + "".join(rng.choice(letters) for _ in range(3)))
    return rng.sample(sorted(names), count)


def anonymous(inp: dict, target: dict | None, rng: random.Random) -> tuple[dict, dict | None]:
    """The input with every tool renamed to a code, and the target naming the wanted tool's code."""
    renamed = dict(zip((tool["name"] for tool in inp["tools"]), code_names(len(inp["tools"]), rng), strict=True))
    tools = [{**tool, "name": renamed[tool["name"]]} for tool in inp["tools"]]
    wanted = (target or {}).get("tool_name")
    return {**inp, "tools": tools}, (None if target is None else {**target, "tool_name": renamed.get(wanted)})


def anonymous_rendering(inp: dict, target: dict | None, rng: random.Random) -> dict:
    """The renamed input and target, with the prompt and completion match_func's spec renders for them (under the
    rendering in use: call ``use_dataset_rendering`` first)."""
    return rendered(*anonymous(inp, target, rng))


def rendered(inp: dict, target: dict | None) -> dict:
    """The input and target with the prompt and completion match_func's spec renders for them."""
    from forethought.kernel.specs import SPECS

    spec = SPECS["match_func"]
    output = target if target is not None else {"tool_name": None}
    return {
        "input": inp,
        "target": target,
        "prompt": spec.messages(spec.input_type.model_validate(inp)),
        "completion": [{"role": "assistant", "content": spec.target_text(output)}],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("destination", type=Path)
    parser.add_argument("--fraction", type=float, default=0.5, help="share of train-solution rows copied")
    parser.add_argument("--dev-fraction", type=float, default=0.2, help="train.dev_fraction of the training run")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (the dev split) and the copies' seed")
    args = parser.parse_args(argv)
    # every refusal before the first write: a located message, exit 2, nothing on disk changed
    refused = refusal(args.source, args.destination)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    if not 0 < args.fraction <= 1:
        print(f"error: --fraction {args.fraction}: give a share in (0, 1]", file=sys.stderr)
        return 2

    from forethought.data_gen.row import is_dev_solution
    from forethought.training.data import use_dataset_rendering

    use_dataset_rendering(args.source)
    rng = random.Random(f"anonymous:{args.seed}")
    relative = "match_func/train.jsonl"
    lines = (args.source / relative).read_text(encoding="utf-8").splitlines()
    copies = []
    for text in lines:
        row = json.loads(text)
        if is_dev_solution(row["solution_id"], args.dev_fraction, args.seed) or rng.random() >= args.fraction:
            continue
        copy = anonymous_rendering(json.loads(row["input"]), row["target"], rng)
        row.update(
            copy, id=row["id"] + "-anonymous", input=json.dumps(copy["input"], ensure_ascii=False), train_only=True
        )
        copies.append(json.dumps(row, ensure_ascii=False))
    write_copy(args.source, args.destination, {relative: "\n".join(lines + copies) + "\n"})
    print(f"{len(lines)} match_func train rows, {len(copies)} anonymous copies added -> {args.destination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
