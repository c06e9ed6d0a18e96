"""Bounded parsing: sizes, nesting depth and YAML aliases are limited before a file is trusted.

A YAML alias bomb (a few lines that expand to gigabytes), or JSON nested
thousands of levels deep, would otherwise exhaust memory or the stack before any
schema sees it. Every overrun is a located :class:`UserError`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

from forethought.errors import UserError

MAX_DEPTH = 64  # no file forethought reads needs more nesting than this
MAX_FILE_BYTES = 32 * 1024 * 1024  # a solution, a registry, a manifest


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without aliases: an anchor reused is how an alias bomb grows; no forethought file needs one. A key given
    twice in one mapping is refused too, as in JSON (the last would silently win)."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(
                f"YAML aliases (*{event.anchor}) are not accepted (line {event.start_mark.line + 1}): "
                "write the value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:  # type: ignore[override]
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.YAMLError(
                    f"duplicate key {key!r} (line {key_node.start_mark.line + 1}): the first value would be "
                    "silently replaced"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class JSONProblem(UserError):
    """JSON the project will not read, located: ``path`` is the JSON path of the offending value (keys and indexes),
    ``names`` the ``name`` member of each object along it where it has one (which tool a registry's problem is in),
    ``line``/``column`` where it is in the text (None for already decoded data)."""

    def __init__(
        self,
        detail: str,
        where: str,
        path: list[str | int],
        names: list[str | None] | None = None,
        line: int | None = None,
        column: int | None = None,
    ):
        self.detail, self.path, self.line, self.column = detail, list(path), line, column
        self.names = list(names) if names is not None else [None] * len(self.path)
        at = f" at {json_path(self.path)}" if self.path else ""
        pos = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"{detail}{at}{pos}", where)


def json_path(path: list[str | int], *, head: int = 8, tail: int = 2) -> str:
    """``tools[0].inputSchema.properties.unit``; a path deeper than ``head + tail`` keeps its ends around ``…``."""

    def text(parts: list[str | int], first: bool) -> str:
        out = ""
        for i, part in enumerate(parts):
            out += f"[{part}]" if isinstance(part, int) else (part if first and i == 0 else f".{part}")
        return out

    if len(path) <= head + tail:
        return text(path, True)
    return f"{text(path[:head], True)} … {len(path) - head - tail} more levels … {text(path[-tail:], False)}"


def check_depth(obj: Any, where: str, max_depth: int = MAX_DEPTH) -> Any:
    """``obj``, refused when containers nest deeper than ``max_depth`` or a number is NaN or infinite (decoded data that
    did not come through :func:`loads_json`); iterative, so no recursion limit. The error names the JSON path."""
    stack: list[tuple[Any, int, list[str | int], list[str | None]]] = [(obj, 1, [], [])]
    while stack:
        cur, depth, path, names = stack.pop()
        if isinstance(cur, float) and not math.isfinite(cur):
            raise JSONProblem(f"{cur} is not a finite number (JSON has no NaN or infinity)", where, path, names)
        if isinstance(cur, (dict, list)):
            if depth > max_depth:
                raise JSONProblem(f"nested deeper than {max_depth} levels", where, path, names)
            name = cur.get("name") if isinstance(cur, dict) and isinstance(cur.get("name"), str) else None
            items = cur.items() if isinstance(cur, dict) else enumerate(cur)
            stack.extend((v, depth + 1, [*path, k], [*names, name]) for k, v in items)
    return obj


def read_bounded(path: Path, where: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """At most ``max_bytes`` of a file, refused (located) when it holds more: a FIFO or /dev/zero is read no further
    than a regular file would be. OSError passes through."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UserError(f"larger than {max_bytes >> 20} MiB", where)
    return data


def check_size(text: str | bytes, where: str, max_bytes: int = MAX_FILE_BYTES) -> None:
    if len(text) > max_bytes:
        raise UserError(f"larger than {max_bytes >> 20} MiB", where)


# ---------------------------------------------------------------- strict JSON
# Python's json module accepts what JSON does not (NaN, Infinity, numbers that overflow to infinity) and lets the last
# of two equal keys win silently. The project reads every file it does not write itself through loads_json, which
# refuses all of them: a solution, a registry, a recording, a manifest, a gates file (docs/guarantees.md).


class _Refused(ValueError):
    """Raised inside the decoder's hooks; the text is then scanned to say where."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(key)
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise _Refused(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(text)
    return value


_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|-?Infinity|NaN|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null'
)


def _locate(text: str, where: str, max_depth: int) -> JSONProblem | None:
    """The first thing :func:`loads_json` refuses in ``text`` (nesting, a repeated key, a non-finite number), located by
    JSON path, line and column; None if there is none. A scan of the tokens: no recursion, no values built."""
    frames: list[dict[str, Any]] = []  # per open container: kind, its current key or index, keys seen, its "name"
    expect_key = False

    def problem(detail: str, start: int) -> JSONProblem:
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        along = [f for f in frames if f["at"] is not None]  # a container not yet into its first member adds nothing
        return JSONProblem(detail, where, [f["at"] for f in along], [f["name"] for f in along], line, column)

    last_key: str | None = None
    for match in _TOKEN.finditer(text):
        tok = match.group(0)
        top = frames[-1] if frames else None
        if tok in "{[":
            frames.append({"kind": tok, "at": None, "keys": set(), "name": None})
            if top is not None and top["kind"] == "[" and top["at"] is None:
                top["at"] = 0
            if len(frames) > max_depth:
                frames.pop()
                return problem(f"nested deeper than {max_depth} levels", match.start())
            expect_key = tok == "{"
        elif tok in "}]":
            frames.pop()
            expect_key = False
        elif tok == ",":
            if top is not None and top["kind"] == "[":
                top["at"] = (top["at"] or 0) + 1
            expect_key = top is not None and top["kind"] == "{"
        elif tok == ":":
            expect_key = False
        elif expect_key and tok.startswith('"') and top is not None:
            key = json.loads(tok)
            if key in top["keys"]:
                return problem(f"duplicate key {key!r} (the first value would be silently replaced)", match.start())
            top["keys"].add(key)
            top["at"], last_key = key, key
        else:
            if top is not None and top["kind"] == "[" and top["at"] is None:
                top["at"] = 0
            if tok in ("NaN", "Infinity", "-Infinity"):
                return problem(f"{tok} is not a JSON number", match.start())
            if tok[0] in "-0123456789" and not math.isfinite(float(tok)):
                return problem(f"{tok} is not a finite number (it overflows to infinity)", match.start())
            if (
                top is not None
                and top["kind"] == "{"
                and last_key == "name"
                and top["at"] == "name"
                and tok.startswith('"')
            ):
                top["name"] = json.loads(tok)
    return None


def loads_json(text: str | bytes, where: str, *, max_bytes: int = MAX_FILE_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """Strict JSON with a size and depth bound: NaN, infinities, numbers that overflow and repeated keys are refused,
    each as a :class:`JSONProblem` naming its JSON path, line and column. json.JSONDecodeError (not JSON at all) passes
    through for the caller to locate."""
    check_size(text, where, max_bytes)
    try:
        data = json.loads(
            text, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except json.JSONDecodeError:
        raise
    except (RecursionError, _Refused):
        raw = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
        found = _locate(raw, where, max_depth)
        if found is None:  # cannot happen: the scan refuses what the decoder's hooks refuse
            raise UserError(f"nested deeper than {max_depth} levels", where) from None
        raise found from None
    except ValueError as exc:  # Python's int() limit on digits (CVE-2020-10735): a located refusal, not a crash
        raise UserError(f"a number too long to read ({exc})", where) from None
    try:
        return check_depth(data, where, max_depth)
    except JSONProblem:
        raw = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
        raise (_locate(raw, where, max_depth) or UserError(f"nested deeper than {max_depth} levels", where)) from None


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


def read_json_object(path: Path, *, max_bytes: int = MAX_FILE_BYTES, hint: str = "") -> dict[str, Any]:
    """:func:`read_json_file` of a file that must hold one JSON object (a record, a manifest, a config): anything else
    is a located UserError, not an AttributeError later."""
    data = read_json_file(path, max_bytes=max_bytes, hint=hint)
    if not isinstance(data, dict):
        raise UserError(f"expected a JSON object, got {type(data).__name__}{hint}", str(path))
    return data


def loads_yaml(text: str, where: str, *, max_bytes: int = MAX_FILE_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """Safe YAML without aliases, with a size and depth bound; yaml.YAMLError passes through."""
    check_size(text, where, max_bytes)
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise UserError(f"nested deeper than {max_depth} levels", where) from None
    return check_depth(data, where, max_depth)
