"""Probe-only: a copy of a dataset whose check_prerequisites prompts show, beside each listed tool's parameter that
the turn's context names, that context value (``- get_customer_by_phone(phone_number="555-263-1192"): Find ...``).

Targets, rows and their order are unchanged (the dev split and its sampled rows stay the same); the manifest's
digests of the two rewritten files are updated. Not a rendering the kernel knows: a measurement of whether the
prompt is the lever (docs/training.md, "Probe after run #6").

    python scripts/probe_valued_tools.py runs/converge6/data runs/data_valued
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
from pathlib import Path

TOOL_LINE = re.compile(r"^- ([A-Za-z_][\w.]*)\((.*?)\): ", re.MULTILINE)
PARAMETER_NAME = re.compile(r"[A-Za-z_]\w*")


def inline(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def with_values(tools_text: str, context: dict) -> str:
    """The tool lines with ``name=value`` for each parameter written as its bare name (``p`` or ``p?``) that the
    context holds."""

    def line(match: re.Match) -> str:
        shown = []
        for written in [part.strip() for part in match.group(2).split(",") if part.strip()]:
            name = PARAMETER_NAME.match(written).group(0)
            bare = written.rstrip("?") == name
            shown.append(f"{written}={inline(context[name])}" if bare and name in context else written)
        return f"- {match.group(1)}({', '.join(shown)}): "

    return TOOL_LINE.sub(line, tools_text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("destination", type=Path)
    args = parser.parse_args()
    if args.destination.exists():
        shutil.rmtree(args.destination)
    shutil.copytree(args.source, args.destination)
    manifest_path = args.destination / "dataset.json"
    manifest = json.loads(manifest_path.read_text())
    changed = 0
    for split in ("train", "validation"):
        relative = f"check_prerequisites/{split}.jsonl"
        path = args.destination / relative
        rows = []
        for text in path.read_text().splitlines():
            row = json.loads(text)
            context = json.loads(row["input"])["context"]
            head, separator, tools = row["prompt"][1]["content"].partition("\nTools:\n")
            shown = with_values(tools, context)
            changed += shown != tools
            row["prompt"][1]["content"] = head + separator + shown
            rows.append(json.dumps(row, ensure_ascii=False))
        path.write_text("\n".join(rows) + "\n")
        manifest["files"][relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"{changed} check_prerequisites rows rewritten -> {args.destination}")


if __name__ == "__main__":
    main()
