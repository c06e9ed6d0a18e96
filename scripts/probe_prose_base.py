"""Probe-only: a CPU base that also reads English prose, from the docstrings this machine already holds.

Every match_func probe ends at words the model does not understand ("sorted", "read-only", that no tool tells the
weather), which a base pretrained on language brings. No corpus and no model hub are reachable here, but the
interpreter's standard library and the installed packages hold English in their docstrings. Two steps:

    python scripts/probe_prose_base.py corpus runs/lang/all.jsonl --words 180 --root .venv/lib/python3.11/site-packages
    python scripts/probe_prose_base.py base runs/lang/all.jsonl 10000 -- train primitive=base model=tiny \\
        train=converge model.pretrain.max_steps=2400 ... dataset_dir=runs/spread/data output_dir=runs/lang/s0_mix

``corpus`` keeps the docstring paragraphs that read as prose (no doctest, code or rule lines; six words or more),
drops repeats and writes chunks of about ``--words`` words, one JSON string per line. ``base`` runs the project's own
base stage (``forethought train primitive=base``) with that many chunks, each a user turn, shuffled among the
request rows it reads anyway; nothing else in the stage changes, so the base's dev and validation rows stay unread.
A measurement, not a setting the project ships (docs/training.md, "Probe of 2026-12-07, fourteenth session: a base
that also reads English prose").
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Folders whose docstrings are not prose about the package: tests, vendored copies, and this project's own text.
SKIPPED = re.compile(
    r"(^|/)(test|tests|forethought|_vendor|idlelib|lib2to3|turtledemo|ensurepip|site-packages|dist-packages)(/|$)"
)
CODE_LIKE = re.compile(r"(>>>|\.\.\. |[{}\[\]=<>]{2,}|^\s*[-=~*]{3,}\s*$|::\s*$|\(\)\s*$)")
MIN_WORDS = 6


def prose_paragraphs(source: str) -> Iterator[str]:
    """The paragraphs of a module's docstrings (module, classes, functions) that read as prose, each on one line."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        for paragraph in re.split(r"\n\s*\n", doc or ""):
            lines = [line.strip() for line in paragraph.splitlines()]
            if any(CODE_LIKE.search(line) or line.startswith(("$", "#", "%")) for line in lines):
                continue
            text = " ".join(lines)
            if len(text.split()) >= MIN_WORDS and re.search(r"[a-z]{3}", text):
                yield text


def build_corpus(roots: list[Path], words_per_chunk: int) -> tuple[list[str], int]:
    """Chunks of about ``words_per_chunk`` words from every root's ``*.py`` files (sorted: the same install gives the
    same corpus), and how many distinct paragraphs they hold."""
    seen: dict[str, None] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if SKIPPED.search(path.relative_to(root).as_posix()):
                continue
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            seen.update(dict.fromkeys(prose_paragraphs(source)))
    chunks: list[str] = []
    current: list[str] = []
    for paragraph in seen:
        current.append(paragraph)
        if sum(len(part.split()) for part in current) >= words_per_chunk:
            chunks.append("\n\n".join(current))
            current = []
    if current:
        chunks.append("\n\n".join(current))
    return chunks, len(seen)


def with_prose(
    original: Callable[[Any], list[dict[str, Any]]], chunks: list[str], count: int, seed: int
) -> Callable[[Any], list[dict[str, Any]]]:
    """``mixed_train_rows`` with ``count`` prose chunks added as user turns, all shuffled together."""

    def mixed(cfg: Any) -> list[dict[str, Any]]:
        rows = original(cfg)
        rng = random.Random(seed)
        shuffled = list(chunks)
        rng.shuffle(shuffled)
        prose = [{"messages": [{"role": "user", "content": chunk}]} for chunk in shuffled[:count]]
        print(f"probe_prose_base: {len(rows)} request rows + {len(prose)} prose rows", flush=True)
        rows = rows + prose
        rng.shuffle(rows)
        return rows

    return mixed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    corpus = commands.add_parser("corpus", help="write the prose chunks")
    corpus.add_argument("out", type=Path)
    corpus.add_argument("--words", type=int, default=180, help="words per chunk (about)")
    corpus.add_argument(
        "--root", type=Path, action="append", default=[], help="a folder of .py files besides the stdlib"
    )
    base = commands.add_parser("base", help="run `forethought train primitive=base ...` with the prose mixed in")
    base.add_argument("corpus", type=Path)
    base.add_argument("count", type=int, help="prose chunks to mix among the requests")
    base.add_argument("--seed", type=int, default=1234)
    base.add_argument("forethought_args", nargs=argparse.REMAINDER, help="after --: forethought's own arguments")
    args = parser.parse_args(argv)
    if args.command == "corpus":
        if args.out.exists():
            print(f"{args.out}: already exists; choose another path", file=sys.stderr)
            return 2
        missing = [str(root) for root in args.root if not root.is_dir()]
        if missing or args.words < 1:
            print(f"not a folder: {', '.join(missing)}" if missing else "--words: must be >= 1", file=sys.stderr)
            return 2
        chunks, paragraphs = build_corpus([Path(sysconfig.get_paths()["stdlib"]), *args.root], args.words)
        from forethought.primitives.io import atomic_write_text

        atomic_write_text(args.out, "".join(json.dumps(chunk) + "\n" for chunk in chunks))
        words = sum(len(chunk.split()) for chunk in chunks)
        print(f"{paragraphs} paragraphs, {len(chunks)} chunks, {words} words -> {args.out}")
        return 0
    try:
        chunks = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines() if line]
    except (OSError, ValueError) as error:
        print(f"{args.corpus}: {error}", file=sys.stderr)
        return 2
    if not all(isinstance(chunk, str) for chunk in chunks) or args.count < 1:
        print(f"{args.corpus}: not one JSON string per line, or count < 1", file=sys.stderr)
        return 2
    import forethought.training.pretrain as pretrain
    from forethought.cli import main as forethought_main

    pretrain.mixed_train_rows = with_prose(pretrain.mixed_train_rows, chunks, args.count, args.seed)
    forwarded = [arg for arg in args.forethought_args if arg != "--"]
    sys.argv = ["forethought", *forwarded]  # what the run records as its command line
    return forethought_main(forwarded)


if __name__ == "__main__":
    sys.exit(main())
