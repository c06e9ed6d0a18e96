"""``forethought registry check FILE... [fmt=openai|mcp|bfcl]``: import registry files and report.

Every file is checked and reported (``ok`` lines on stdout, each followed by
the importer's notes, located errors on stderr) before the exit status is
decided: 0 when all imported, 1 when any failed, 2 for a usage error. A note
(an MCP field we do not know, an assumed side effect) does not fail a file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from forethought.errors import UserError

from .importers import FORMATS, RegistryError, load_registry

USAGE = """\
usage: forethought registry check FILE... [fmt=openai|mcp|bfcl] [annotations=FILE]

  check   import each registry file (OpenAI tools, MCP tools/list, BFCL
          function docs; format detected unless fmt= is given) and print
          the number of tools per file; with annotations=, also apply that
          sidecar (prerequisites, writes, side effects) to each and check it
          against the file's tools; exit 1 if any file fails"""


def cli(args: list[str]) -> int:
    if not args or args[0] not in ("check", "-h", "--help", "help"):
        if args:
            print(f"forethought registry: unknown subcommand {args[0]!r}", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return 2
    if args[0] != "check":
        print(USAGE)
        return 0
    return _check(args[1:])


def _check(args: list[str]) -> int:
    fmt: str | None = None
    annotations: str | None = None
    files: list[str] = []
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        return 0
    for arg in args:
        key, eq, value = arg.partition("=")
        if eq and key.lstrip("-") == "annotations":
            annotations = value
            continue
        if eq and key.lstrip("-").isidentifier():  # an override, not a path (paths may hold '=' after a '/')
            if key.lstrip("-") != "fmt":
                print(
                    f"forethought registry check: unknown option {key!r} (fmt=..., annotations=...)\n\n{USAGE}",
                    file=sys.stderr,
                )
                return 2
            if value not in FORMATS:
                print(
                    f"forethought registry check: fmt must be one of {', '.join(FORMATS)}, got {value!r}",
                    file=sys.stderr,
                )
                return 2
            fmt = value
        elif arg.startswith("-") and not Path(arg).exists():
            print(f"forethought registry check: unknown flag {arg!r}\n\n{USAGE}", file=sys.stderr)
            return 2
        else:
            files.append(arg)
    if not files:
        print(f"forethought registry check: no files given\n\n{USAGE}", file=sys.stderr)
        return 2

    sidecar = None
    if annotations is not None:
        from .annotations import load_annotations

        sidecar = load_annotations(annotations)  # a bad sidecar is bad input (exit 2), before any file is read
    failed = 0
    for path in files:
        try:
            reg = load_registry(path, fmt)
            if sidecar is not None:
                from .annotations import annotate

                reg = annotate(reg, sidecar)
        except (RegistryError, UserError) as exc:
            failed += 1
            print(
                f"FAIL {exc if isinstance(exc, RegistryError) else f'{path}: annotations: {exc.message}'}",
                file=sys.stderr,
            )
            continue
        kinds = sorted({t.source for t in reg}) or [fmt or "-"]
        print(f"ok   {path}: {len(reg)} tool{'s' if len(reg) != 1 else ''} ({', '.join(kinds)})")
        for line in _note_lines(path, reg):
            print(line)
    ok = len(files) - failed
    print(f"{len(files)} file{'s' if len(files) != 1 else ''} checked: {ok} ok, {failed} failed")
    return 1 if failed else 0


_SHOWN = 5  # tool names listed per note before "..."


def _note_lines(path: str, reg: object) -> list[str]:
    """One line per distinct note, naming the tools it applies to (a server's 14 tools share one)."""
    by_note: dict[str, list[str]] = {}
    for tool in reg:  # type: ignore[attr-defined]
        for note in tool.notes:
            by_note.setdefault(note, []).append(tool.name)
    lines = []
    for note, names in by_note.items():
        if len(names) == 1:
            lines.append(f"note {path}: tool {names[0]!r}: {note}")
        else:
            shown = ", ".join(map(repr, names[:_SHOWN])) + (", ..." if len(names) > _SHOWN else "")
            lines.append(f"note {path}: {len(names)} tools ({shown}): {note}")
    return lines
