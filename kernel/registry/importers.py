"""Import tool registries (OpenAI function calling, MCP ``tools/list``, BFCL function docs) into ToolSpecs.

Accepted shapes:

* ``openai``: ``[{"type": "function", "function": {...}}]``, a bare list of
  function objects, ``{"tools": [...]}``, the older ``{"functions": [...]}``,
  and the flat Responses-API form ``{"type": "function", "name": ...}``;
* ``mcp``: ``{"tools": [{"name", "inputSchema", ...}]}``, optionally inside a
  JSON-RPC envelope ``{"jsonrpc": "2.0", "id": .., "result": {...}}``, or a
  bare list of MCP tools;
* ``bfcl``: JSON Lines (or a JSON list) of ``{"name", "description",
  "parameters": {"type": "dict", ...}, "response"?}`` using BFCL's type
  names; enums and defaults stated in descriptions are extracted
  (see :mod:`.prose_constraints`).

The format is detected from the content unless ``fmt`` is given. Nothing is
dropped unnoticed: a field is either mapped, or deliberately ignored (listed
in ``_IGNORED`` with the reason), or it is an error, except in MCP: the
protocol adds tool fields from one spec revision to the next (``execution``
in 2025-11-25), so a field of an MCP tool we do not know is ignored with a
note on the ToolSpec (``ToolSpec.notes``, shown by ``forethought registry
check``) rather than a reason to refuse the server's tools. It is still an
error where the object is no MCP tool at all (no name or inputSchema): a file
of another format is best told by its unknown fields.

Side effects: an MCP tool has them unless ``readOnlyHint`` is true, the
spec's default (a tool without annotations is not read-only, and
destructive); a BFCL function has them as :mod:`.bfcl_side_effects` says for
BFCL's 8 multi-turn classes, and is assumed to have them otherwise. Every error is a :class:`RegistryError` located as
``FILE: [line N: ]tool #I 'NAME': FIELD: what``, where ``#I`` is the tool's
0-based position in its list and ``line N`` the JSON Lines line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from forethought.errors import UserError

from .bfcl_side_effects import BFCL_SIDE_EFFECTS
from .model import ToolSpec, provider_name, tool_name_problem
from .prose_constraints import add_prose_constraints
from .registry import Registry
from .schema_normalize import SchemaPathError, normalize_schema, suggest, type_name

FORMATS = ("openai", "mcp", "bfcl")

# Tool fields carried into ToolSpec, per format.
_MAPPED = {
    "openai": {"name", "description", "parameters"},
    "mcp": {"name", "description", "inputSchema", "outputSchema", "annotations"},
    "bfcl": {"name", "description", "parameters", "response"},
}
# Fields understood but not carried, and why that loses nothing the kernel uses.
_IGNORED = {
    "openai": {"strict": "constrained decoding on OpenAI's side; the kernel validates every call anyway"},
    "mcp": {
        "title": "display name",
        "icons": "display icons",
        "_meta": "protocol metadata",
        # 2025-11-25: whether a call may or must run as an MCP task. The kernel makes plain
        # calls, which "forbidden" and "optional" allow; "required" gets a note.
        "execution": "task support; the kernel makes plain calls",
    },
    "bfcl": {},
}
_FIELDS = {f: _MAPPED[f] | set(_IGNORED[f]) for f in FORMATS}
# The spec's ToolAnnotations hints and their defaults (MCP 2025-06-18 and 2025-11-25).
_MCP_HINT_DEFAULTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
_MCP_ANNOTATIONS = {"title", *_MCP_HINT_DEFAULTS}
_SHAPES = {
    "openai": "a list of tools or an object with 'tools' or 'functions'",
    "mcp": "an MCP tools/list result",
    "bfcl": "JSON Lines or a JSON list of BFCL function docs",
}
_BFCL_ONLY_TYPES = {"dict", "float", "tuple", "any"}


class RegistryError(UserError):
    """A registry file that cannot be imported; the message names file, tool and field."""

    def __init__(
        self,
        source: str,
        detail: str,
        *,
        tool: str | None = None,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ):
        self.source, self.detail, self.tool, self.field, self.line = source, detail, tool, field, line
        at = None if line is None else f"line {line}" + (f", column {column}" if column is not None else "")
        parts = [at, tool, field, detail]
        super().__init__(": ".join(p for p in parts if p), where=source)


# -- public API --------------------------------------------------------------


def load_registry(path: str | Path, fmt: str | None = None) -> Registry:
    """Read a registry file; the registry is named after the file's stem."""
    source = str(path)
    from forethought.bounded import read_bounded

    try:
        raw = read_bounded(Path(path), source)
    except FileNotFoundError:
        raise RegistryError(source, "file not found") from None
    except OSError as exc:
        raise RegistryError(source, f"cannot read file: {exc.strerror or exc}") from None
    return Registry(parse_registry(raw, fmt, source=source), name=Path(path).stem)


def parse_registry(data_or_text: Any, fmt: str | None = None, source: str = "<registry>") -> list[ToolSpec]:
    """Parse registry text (JSON or JSON Lines), bytes, or already-decoded JSON data into ToolSpecs."""
    if fmt is not None and fmt not in FORMATS:
        raise RegistryError(source, f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    lines: list[int] | None = None
    data = data_or_text
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise RegistryError(source, f"not UTF-8 text (byte {exc.start})") from None
    if isinstance(data, str):
        data, lines = _load_text(data, source)
    else:  # decoded by the caller (a benchmark's own loader): the same bounds, NaN and infinity refused
        from forethought.bounded import JSONProblem, check_depth

        try:
            check_depth(data, source)
        except JSONProblem as exc:
            raise _located(exc, source) from None
    fmt = fmt or detect_format(data, source, jsonl=lines is not None)
    raw_tools = _unwrap(data, fmt, source)
    if lines is not None and len(lines) != len(raw_tools):
        lines = None  # a JSON Lines file whose single line holds a whole list
    tools: list[ToolSpec] = []
    seen: dict[str, int] = {}
    raw_names: dict[int, str] = {}
    for i, raw in enumerate(raw_tools):
        loc = _Loc(source, i, lines[i] if lines else None)
        tool = _tool(raw, fmt, loc)
        offered = provider_name(tool.name)  # two names a provider would be offered alike are one name too many
        if offered in seen:
            same = (
                "duplicate of"
                if raw_names[seen[offered]] == tool.name
                else f"offered to a provider as {offered!r}, as is"
            )
            raise loc.error("name", f"{same} tool #{seen[offered]}")
        seen[offered] = i
        raw_names[i] = tool.name
        tools.append(tool)
    return tools


def detect_format(data: Any, source: str = "<registry>", *, jsonl: bool = False) -> str:
    """Tell openai / mcp / bfcl apart by content; JSON Lines without other clues is BFCL."""
    if isinstance(data, dict):
        if {"jsonrpc", "result", "error"} & set(data):
            return "mcp"
        if "functions" in data and "tools" not in data:
            return "openai"
        if "tools" in data:
            items = data["tools"] if isinstance(data["tools"], list) else []
            return "mcp" if any(_clue(t) == "mcp" for t in items) else "openai"
        items = [data]
    elif isinstance(data, list):
        items = data
    else:
        raise RegistryError(source, f"expected a JSON object or array of tools, got {type_name(data)}")
    clues = {i: clue for i, t in enumerate(items) if (clue := _clue(t))}
    kinds = sorted(set(clues.values()))
    if len(kinds) > 1:
        first = {k: next(i for i, c in clues.items() if c == k) for k in kinds}
        seen = ", ".join(f"tool #{i} looks like {k}" for k, i in first.items())
        raise RegistryError(source, f"cannot tell the format: {seen}; pass fmt=openai|mcp|bfcl")
    if kinds:
        return kinds[0]
    return "bfcl" if jsonl else "openai"


# -- text --------------------------------------------------------------------


def _located(exc: Any, source: str, line: int | None = None) -> RegistryError:
    """A strict-JSON refusal (forethought/bounded.py: nesting, a repeated key, NaN or infinity) as a registry error
    naming the tool (its position and name) and the field's JSON path inside it."""
    from forethought.bounded import json_path

    path, names = list(exc.path), list(exc.names)
    # The tool is the item of the top-level list, of "tools" / "functions", or of an MCP reply's result.tools.
    k = 0
    if path[:1] == ["result"]:
        k = 1
    if path[k : k + 1] in (["tools"], ["functions"]):
        k += 1
    if line is not None:  # JSON Lines: the line is the tool
        tool, rest, name = None, path, names[0] if names else None
    elif k < len(path) and isinstance(path[k], int):
        tool, rest = path[k], path[k + 1 :]
        inner = k + 2 if rest[:1] == ["function"] else k + 1  # an OpenAI tool's name is in its "function"
        name = names[inner] if inner < len(names) else None
    else:
        return RegistryError(source, exc.message, line=exc.line if line is None else line, column=exc.column)
    who = (
        None
        if tool is None and name is None
        else (f"tool #{tool}" if tool is not None else "tool") + (f" {name!r}" if name else "")
    )
    return RegistryError(
        source,
        exc.detail,
        tool=who,
        field=json_path(rest) or None,
        line=exc.line if line is None else line,
        column=exc.column if line is None else None,
    )


def _load_text(text: str, source: str) -> tuple[Any, list[int] | None]:
    """Decode JSON, or JSON Lines (one value per non-blank line), with located errors; strict (forethought/bounded.py):
    NaN, infinities and a key given twice are refused like malformed JSON."""
    from forethought.bounded import MAX_FILE_BYTES, JSONProblem, loads_json

    text = text.lstrip("\ufeff")
    if not text.strip():
        raise RegistryError(source, "file is empty")
    if len(text) > MAX_FILE_BYTES:
        raise RegistryError(source, f"larger than {MAX_FILE_BYTES >> 20} MiB")
    try:
        return loads_json(text, source), None
    except JSONProblem as exc:
        raise _located(exc, source) from None
    except json.JSONDecodeError as whole:
        rows = text.splitlines()
        first = next(i for i, r in enumerate(rows) if r.strip())
        try:
            json.loads(rows[first])
        except json.JSONDecodeError:
            # Not JSON Lines either: report the whole-document error.
            raise RegistryError(source, f"invalid JSON: {whole.msg}", line=whole.lineno, column=whole.colno) from None
    items, line_nos = [], []
    for n, row in enumerate(rows, 1):
        if not row.strip():
            continue
        try:
            items.append(loads_json(row, source))
        except JSONProblem as exc:
            raise _located(exc, source, line=n) from None
        except json.JSONDecodeError as exc:
            raise RegistryError(source, f"invalid JSON: {exc.msg}", line=n, column=exc.colno) from None
        line_nos.append(n)
    return items, line_nos


def _clue(tool: Any) -> str | None:
    """The format one tool object points to, if it says."""
    if not isinstance(tool, dict):
        return None
    if {"inputSchema", "outputSchema", "annotations"} & set(tool):
        return "mcp"
    if tool.get("type") == "function" or "function" in tool:
        return "openai"
    if "response" in tool:
        return "bfcl"
    params = tool.get("parameters")
    if isinstance(params, dict):
        return "bfcl" if _uses_bfcl_types(params) else "openai"
    return None


def _uses_bfcl_types(schema: Any) -> bool:
    if isinstance(schema, dict):
        declared = schema.get("type")
        if any(
            isinstance(x, str) and x in _BFCL_ONLY_TYPES
            for x in (declared if isinstance(declared, list) else [declared])
        ):
            return True
        return any(_uses_bfcl_types(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_uses_bfcl_types(v) for v in schema)
    return False


def _unwrap(data: Any, fmt: str, source: str) -> list[Any]:
    """The list of raw tool objects inside a file's top-level shape."""

    def container(top: dict, keys: set[str], allowed: set[str], what: str) -> list[Any]:
        extra = sorted(set(top) - allowed)
        if extra:
            raise RegistryError(source, f"unexpected top-level key {extra[0]!r}{suggest(extra[0], allowed)}; {what}")
        out: list[Any] = []
        for k in sorted(keys & set(top)):
            if not isinstance(top[k], list):
                raise RegistryError(source, f"expected an array, got {type_name(top[k])}", field=k)
            out.extend(top[k])
        return out

    if isinstance(data, list):
        return data
    if not isinstance(data, dict):
        raise RegistryError(source, f"expected a JSON object or array of tools, got {type_name(data)}")
    if fmt == "mcp":
        if {"jsonrpc", "result", "error"} & set(data):
            extra = sorted(set(data) - {"jsonrpc", "id", "result", "error"})
            if extra:
                raise RegistryError(source, f"unexpected key {extra[0]!r} in a JSON-RPC response")
            if "error" in data:
                err = data["error"] if isinstance(data["error"], dict) else {"message": data["error"]}
                raise RegistryError(
                    source, f"the server returned an error: {err.get('message')} (code {err.get('code')})"
                )
            data = data.get("result")
            if not isinstance(data, dict):
                raise RegistryError(source, f"expected an object, got {type_name(data)}", field="result")
        if "tools" not in data:
            raise RegistryError(source, "missing 'tools' (an MCP tools/list result)")
        # nextCursor: this is one page of a paginated listing; each page imports on its own.
        return container(data, {"tools"}, {"tools", "nextCursor", "_meta"}, "expected an MCP tools/list result")
    if fmt == "openai" and ("tools" in data or "functions" in data):
        return container(data, {"tools", "functions"}, {"tools", "functions"}, "expected 'tools' or 'functions'")
    if "name" in data or (fmt == "openai" and "function" in data):
        return [data]  # a single tool object
    raise RegistryError(source, f"expected {_SHAPES[fmt]}, got an object with keys {sorted(data)}")


# -- one tool ----------------------------------------------------------------


class _Loc:
    """Where a tool sits, for messages."""

    def __init__(self, source: str, index: int, line: int | None):
        self.source, self.index, self.line, self.name = source, index, line, None

    @property
    def tool(self) -> str:
        return f"tool #{self.index}" + (f" {self.name!r}" if self.name else "")

    def error(self, field: str | None, detail: str) -> RegistryError:
        return RegistryError(self.source, detail, tool=self.tool, field=field, line=self.line)


def _tool(raw: Any, fmt: str, loc: _Loc) -> ToolSpec:
    if not isinstance(raw, dict):
        raise loc.error(None, f"expected a tool object, got {type_name(raw)}")
    fn = _openai_function(raw, loc) if fmt == "openai" else raw
    name = fn.get("name")
    if isinstance(name, str) and name.strip() == name != "":
        loc.name = name
    notes: list[str] = []
    # Unknown fields first: in a file of the wrong format they say more than a missing name.
    unknown = [key for key in fn if key not in _FIELDS[fmt]]
    looks_like_mcp_tool = loc.name is not None and "inputSchema" in fn
    for key in unknown:
        if fmt == "mcp" and looks_like_mcp_tool:
            notes.append(f"{key}: unknown MCP tool field{suggest(key, _FIELDS[fmt])} (a newer spec?), ignored")
        else:
            raise loc.error(key, f"unknown {fmt} tool field{suggest(key, _FIELDS[fmt])}")
    if "name" not in fn:
        raise loc.error("name", "missing")
    if loc.name is None:
        raise loc.error("name", f"expected a non-empty string without surrounding spaces, got {name!r}")
    problem = tool_name_problem(name, fmt)
    if problem:
        raise loc.error("name", problem)
    description = fn.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise loc.error("description", f"expected a string, got {type_name(description)}")
    if "strict" in fn and not isinstance(fn["strict"], bool):
        raise loc.error("strict", f"expected true or false, got {fn['strict']!r}")

    dialect = "bfcl" if fmt == "bfcl" else "json"
    params_key = "inputSchema" if fmt == "mcp" else "parameters"
    out_key = {"mcp": "outputSchema", "bfcl": "response"}.get(fmt)
    if params_key not in fn and fmt == "mcp":
        raise loc.error(params_key, "missing (an MCP tool must declare its inputSchema)")
    try:
        params = normalize_schema(fn.get(params_key, {}), path=params_key, dialect=dialect, require_object=True)
        output = None
        if out_key and fn.get(out_key) is not None:
            output = normalize_schema(fn[out_key], path=out_key, dialect=dialect)
    except SchemaPathError as exc:
        raise loc.error(exc.path, exc.message) from None
    if fmt == "bfcl":
        add_prose_constraints(params)
    hints: dict[str, bool] = {}
    if fmt == "mcp":
        hints = _mcp_hints(fn.get("annotations"), loc, notes)
        side_effect = not hints["readOnlyHint"]
        _mcp_execution_note(fn.get("execution"), notes)
    elif fmt == "bfcl":
        side_effect = BFCL_SIDE_EFFECTS.get(name, True)
        if name not in BFCL_SIDE_EFFECTS:
            notes.append("side effects: not one of BFCL's multi-turn functions, so assumed to have them")
    else:  # OpenAI's format cannot say whether a tool changes anything: assume it does, as MCP's spec defaults
        side_effect = True
        notes.append("side effects: the OpenAI format cannot declare them, so assumed (the kernel then checks the "
                     "request's intent before calling it); a read-only tool can say so in an annotations file")  # fmt: skip
    try:
        return ToolSpec(
            name=name,
            description=description,
            parameters=params,
            output_schema=output,
            side_effect=side_effect,
            source=fmt,
        ).record_import(hints=hints, notes=notes)
    except ValidationError as exc:  # the checks above should have caught it; still locate it
        first = exc.errors()[0]
        raise loc.error(".".join(map(str, first["loc"])) or None, first["msg"]) from None


def _openai_function(raw: dict, loc: _Loc) -> dict:
    """The function object inside an OpenAI tool (wrapped, flat, or a bare function)."""
    kind = raw.get("type")
    if kind is not None and kind != "function":
        raise loc.error("type", f"unsupported tool type {kind!r} (only 'function' tools can be imported)")
    if "function" not in raw:
        return {k: v for k, v in raw.items() if k != "type"}  # flat or bare
    extra = sorted(set(raw) - {"type", "function"})
    if extra:
        raise loc.error(extra[0], "unexpected next to 'function'")
    fn = raw["function"]
    if not isinstance(fn, dict):
        raise loc.error("function", f"expected an object, got {type_name(fn)}")
    return fn


def _mcp_hints(annotations: Any, loc: _Loc, notes: list[str]) -> dict[str, bool]:
    """MCP's four behaviour hints: the tool's values over the spec's defaults.

    The spec's defaults make a tool without annotations not read-only,
    destructive, not idempotent and open-world. An annotation we do not know
    is noted and ignored (later spec revisions may add some), unless it is a
    near miss of a known hint (``readOnly``): a misspelt hint is a server bug
    that would silently flip the side-effect flag.
    """
    hints = dict(_MCP_HINT_DEFAULTS)
    if annotations is None:
        return hints
    if not isinstance(annotations, dict):
        raise loc.error("annotations", f"expected an object, got {type_name(annotations)}")
    for key, value in annotations.items():
        if key not in _MCP_ANNOTATIONS:
            hint = suggest(key, _MCP_ANNOTATIONS)
            if hint:
                raise loc.error(f"annotations.{key}", f"unknown MCP tool annotation{hint}")
            notes.append(f"annotations.{key}: unknown MCP tool annotation, ignored")
        elif key == "title":
            continue  # display only
        elif not isinstance(value, bool):
            raise loc.error(f"annotations.{key}", f"expected true or false, got {value!r}")
        else:
            hints[key] = value
    return hints


def _mcp_execution_note(execution: Any, notes: list[str]) -> None:
    """A tool that must run as an MCP task cannot be called the way the kernel calls tools; say so."""
    if isinstance(execution, dict) and execution.get("taskSupport") == "required":
        notes.append("execution.taskSupport: 'required' (the server refuses plain calls, which the kernel makes)")
