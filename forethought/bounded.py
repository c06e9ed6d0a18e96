"""Bounded parsing: sizes, nesting depth and YAML aliases are limited before a file is trusted.

A YAML alias bomb (a few lines that expand to gigabytes), or JSON nested
thousands of levels deep, would otherwise exhaust memory or the stack before any
schema sees it. Every overrun is a located :class:`UserError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from forethought.errors import UserError

MAX_DEPTH = 64  # no file forethought reads needs more nesting than this
MAX_FILE_BYTES = 32 * 1024 * 1024  # a solution, a registry, a manifest


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without aliases: an anchor reused is how an alias bomb grows; no forethought file needs one."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"YAML aliases (*{event.anchor}) are not accepted (line {event.start_mark.line + 1}): "
                                 "write the value out")
        return super().compose_node(parent, index)


def check_depth(obj: Any, where: str, max_depth: int = MAX_DEPTH) -> Any:
    """``obj``, refused when containers nest deeper than ``max_depth`` (iterative: no recursion limit)."""
    stack = [(obj, 1)]
    while stack:
        cur, d = stack.pop()
        if isinstance(cur, (dict, list)):
            if d > max_depth:
                raise UserError(f"nested deeper than {max_depth} levels", where)
            stack.extend((v, d + 1) for v in (cur.values() if isinstance(cur, dict) else cur))
    return obj


def check_size(text: str | bytes, where: str, max_bytes: int = MAX_FILE_BYTES) -> None:
    if len(text) > max_bytes:
        raise UserError(f"larger than {max_bytes >> 20} MiB", where)


def loads_json(text: str | bytes, where: str, *, max_bytes: int = MAX_FILE_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """JSON with a size and depth bound; json.JSONDecodeError passes through for the caller to locate."""
    check_size(text, where, max_bytes)
    try:
        data = json.loads(text)
    except RecursionError:
        raise UserError(f"nested deeper than {max_depth} levels", where) from None
    return check_depth(data, where, max_depth)


def read_json_file(path: Path, *, max_bytes: int = MAX_FILE_BYTES, hint: str = "") -> Any:
    """A JSON file with a size bound (checked before reading) and a depth bound; every problem is a
    located UserError ending with ``hint`` (what to do about it)."""
    where = str(path)
    if path.stat().st_size > max_bytes:
        raise UserError(f"larger than {max_bytes >> 20} MiB{hint}", where)
    try:
        return loads_json(path.read_bytes(), where, max_bytes=max_bytes)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"not valid JSON (truncated?): {exc}{hint}", where) from None


def loads_yaml(text: str, where: str, *, max_bytes: int = MAX_FILE_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """Safe YAML without aliases, with a size and depth bound; yaml.YAMLError passes through."""
    check_size(text, where, max_bytes)
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise UserError(f"nested deeper than {max_depth} levels", where) from None
    return check_depth(data, where, max_depth)
