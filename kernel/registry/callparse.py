"""Parse and format tool-call strings such as ``cd(folder='document')`` without evaluating them.

Call strings come from models and benchmark files, so they are untrusted:
they are parsed with ``ast.parse(..., mode="eval")`` and only literal nodes
are accepted (strings, numbers, True/False/None, lists, tuples, sets, dicts,
a sign before a number). Anything else (a call or a name inside an
argument, attribute access, operators, f-strings, lambdas, comprehensions,
``*``/``**`` unpacking) raises :class:`CallParseError` with its position.

Positional arguments (``sort('final_report.pdf')``, as 40 of BFCL's 1,142
multi-turn ground-truth calls are written) bind to parameter names in the
order of the tool's signature, given as ``signatures`` (tool name ->
parameter names in order; :attr:`Registry.signatures` is one). Without a
signature for the called tool they are an error, since a name cannot be
guessed.

Values come back JSON-like: tuples and sets become lists (a tool's
parameters are JSON Schema, where both are arrays), dict keys must be
strings. Argument names that are Python keywords (a travel tool's ``from``)
are accepted: they are renamed before parsing and restored after. So are
tool names that providers accept but Python does not (``get-weather``,
``3d_print``: ``^[a-zA-Z0-9_-]{1,64}$``, kernel/registry/model.py), in call
position only: masked by a same-length identifier before parsing.
"""

from __future__ import annotations

import ast
import io
import keyword
import math
import re
import tokenize
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

MAX_TEXT = 100_000  # longer input is refused before parsing
MAX_DEPTH = 64  # nesting of literal values

_KW_PREFIX = "_ft_kw_"  # keyword argument names are parsed as _ft_kw_<name>


class Call(NamedTuple):
    name: str
    args: dict[str, Any]


class CallParseError(ValueError):
    """A call string that is not a literal-only call; ``line``/``column`` are 1-based."""

    def __init__(self, message: str, text: str = "", line: int | None = None, column: int | None = None):
        self.message, self.text, self.line, self.column = message, text, line, column
        where = ""
        if column is not None:
            multiline = "\n" in text.strip()
            where = f" at line {line}, column {column}" if multiline else f" at column {column}"
        shown = text if len(text) <= 80 else text[:77] + "..."
        super().__init__(f"{message}{where} in {shown!r}" if text else message)


# -- parsing ---------------------------------------------------------------


Signatures = Mapping[str, Sequence[str]]


def parse_call(text: str, signatures: Signatures | None = None) -> Call:
    """Parse one call, e.g. ``mod.f(x=-1.5, tags=['a'])``; positional arguments need ``signatures``."""
    src = _Source(text)
    body = src.parse()
    if not isinstance(body, ast.Call):
        raise src.error(body, f"expected a call like name(arg=value), got {_describe(body)}")
    return src.call(body, signatures)


def parse_calls(source: str | list[str], signatures: Signatures | None = None) -> list[Call]:
    """Parse one call, a list of calls ``[f(a=1), g(b='x')]``, or a list of call strings.

    The list of strings may be a Python list (BFCL's ground-truth form) or
    the text of one, e.g. ``["cd(folder='document')", "ls()"]``.
    """
    if isinstance(source, list):
        return [_element_call(s, i, signatures) for i, s in enumerate(source)]
    src = _Source(source)
    body = src.parse()
    if isinstance(body, ast.Call):
        return [src.call(body, signatures)]
    if not isinstance(body, (ast.List, ast.Tuple)):
        raise src.error(body, f"expected a call or a list of calls, got {_describe(body)}")
    if body.elts and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in body.elts):
        return [_element_call(e.value, i, signatures) for i, e in enumerate(body.elts)]  # type: ignore[attr-defined]
    for element in body.elts:
        if not isinstance(element, ast.Call):
            raise src.error(
                element, f"a list of calls may hold only calls (or only call strings), got {_describe(element)}"
            )
    return [src.call(e, signatures) for e in body.elts]  # type: ignore[arg-type]


def parse_literal(text: str) -> Any:
    """Parse one literal value (``['a', 'b']``, ``-1.5``, ``{'k': None}``) with the same rules."""
    src = _Source(text)
    return src.value(src.parse(), "value", 0)


def _element_call(text: Any, index: int, signatures: Signatures | None) -> Call:
    if not isinstance(text, str):
        raise CallParseError(f"call #{index}: expected a call string, got {type(text).__name__}")
    try:
        return parse_call(text, signatures)
    except CallParseError as exc:
        raise CallParseError(f"call #{index}: {exc.message}", exc.text, exc.line, exc.column) from None


class _Source:
    """One call string: parses it and maps AST positions back to the original text."""

    def __init__(self, text: Any):
        if not isinstance(text, str):
            raise CallParseError(f"expected a call string, got {type(text).__name__}")
        if len(text) > MAX_TEXT:
            raise CallParseError(f"call string too long ({len(text)} characters, at most {MAX_TEXT})")
        self.text = text
        stripped = text.lstrip()
        lead = text[: len(text) - len(stripped)]
        # ast refuses leading whitespace ("unexpected indent"); strip it and
        # shift reported positions back.
        self.line_shift = lead.count("\n")
        self.col_shift = len(lead) - (lead.rfind("\n") + 1)
        self.code, self.masked = _mask_call_names(stripped.rstrip())
        self.code, self.renamed = _rename_keyword_args(self.code)
        self.lines = self.code.split("\n")

    def parse(self) -> ast.expr:
        if not self.code:
            raise CallParseError("empty call string", self.text)
        try:
            return ast.parse(self.code, mode="eval").body
        except SyntaxError as exc:
            line, col = exc.lineno or 1, max((exc.offset or 1) - 1, 0)
            raise CallParseError(f"syntax error: {exc.msg}", self.text, *self._where(line, col)) from None
        except (RecursionError, MemoryError, ValueError) as exc:
            raise CallParseError(f"cannot parse: {type(exc).__name__}", self.text) from None

    def _where(self, line: int, col: int) -> tuple[int, int]:
        """(line, 0-based character column) in the parsed code -> 1-based position in the original text."""
        col -= sum(len(_KW_PREFIX) for (r, c) in self.renamed if r == line and c < col)
        if line == 1:
            col += self.col_shift
        return line + self.line_shift, col + 1

    def error(self, node: ast.AST, message: str) -> CallParseError:
        line = getattr(node, "lineno", 1)
        raw = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        # col_offset counts UTF-8 bytes; report characters.
        col = len(raw.encode()[: getattr(node, "col_offset", 0)].decode(errors="ignore"))
        return CallParseError(message, self.text, *self._where(line, col))

    def call(self, node: ast.Call, signatures: Signatures | None = None) -> Call:
        name = _dotted_name(node.func)
        if name is not None and isinstance(node.func, ast.Name):
            name = self.masked.get((node.func.lineno, node.func.col_offset), name)
        if name is None:
            base = node.func
            while isinstance(base, ast.Attribute):
                base = base.value
            raise self.error(base, f"the called name must be a (dotted) identifier, found {_describe(base)}")
        args = self.positional(node, name, signatures)
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(kw, "**mapping arguments are not allowed; write name=value")
            arg = kw.arg[len(_KW_PREFIX) :] if kw.arg.startswith(_KW_PREFIX) else kw.arg
            if arg in args:  # the parser leaves this to the compiler
                how = "given positionally and by name" if arg in list(args)[: len(node.args)] else "repeated"
                raise self.error(kw, f"argument {arg!r} is {how}")
            args[arg] = self.value(kw.value, f"argument {arg!r}", 0)
        return Call(name, args)

    def positional(self, node: ast.Call, name: str, signatures: Signatures | None) -> dict[str, Any]:
        """Positional arguments bound to the first parameter names of ``name``'s signature."""
        if not node.args:
            return {}
        if signatures is None:
            raise self.error(node.args[0], "positional arguments are not allowed; write name=value")
        starred = next((a for a in node.args if isinstance(a, ast.Starred)), None)
        if starred is not None:
            raise self.error(starred, "*unpacking arguments is not allowed; write name=value")
        params = signatures.get(name)
        if params is None:
            raise self.error(node.args[0], f"positional arguments need the signature of {name!r}, an unknown tool")
        params = list(params)
        if len(node.args) > len(params):
            takes = f"{len(params)} ({', '.join(params)})" if params else "none"
            raise self.error(
                node.args[len(params)], f"{name} takes at most {takes} positional arguments, got {len(node.args)}"
            )
        return {p: self.value(a, f"argument {p!r}", 0) for p, a in zip(params, node.args, strict=False)}

    def value(self, node: ast.expr, what: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.error(node, f"{what}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, ast.Constant):
            literal = node.value
            if literal is None or isinstance(literal, (bool, str, int)):
                return literal
            if isinstance(literal, float):
                if not math.isfinite(literal):
                    raise self.error(node, f"{what}: non-finite number {literal!r}")
                return literal
            raise self.error(node, f"{what}: {type(literal).__name__} literals are not allowed")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = node.operand
            if not (isinstance(inner, ast.Constant) and type(inner.value) in (int, float)):
                raise self.error(node, f"{what}: a sign may only precede a number")
            literal = -inner.value if isinstance(node.op, ast.USub) else inner.value
            if not math.isfinite(literal):
                raise self.error(node, f"{what}: non-finite number")
            return literal
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e, what, depth + 1) for e in node.elts]
        if isinstance(node, ast.Set):
            out: list[Any] = []
            for element in node.elts:
                literal = self.value(element, what, depth + 1)
                if not any(type(literal) is type(o) and literal == o for o in out):  # a set's duplicates collapse
                    out.append(literal)
            return out
        if isinstance(node, ast.Dict):
            mapping: dict[str, Any] = {}
            for k, literal in zip(node.keys, node.values, strict=True):
                if k is None:
                    raise self.error(literal, f"{what}: **mapping unpacking is not allowed")
                key = self.value(k, what, depth + 1)
                if not isinstance(key, str):
                    raise self.error(k, f"{what}: dict keys must be strings, got {key!r}")
                if key in mapping:
                    raise self.error(k, f"{what}: repeated dict key {key!r}")
                mapping[key] = self.value(literal, what, depth + 1)
            return mapping
        if isinstance(node, ast.Name):
            hint = {"true": "True", "false": "False", "null": "None", "none": "None"}.get(node.id)
            fix = f"did you mean {hint}?" if hint else f"quote strings: {node.id!r}"
            raise self.error(node, f"{what}: bare name {node.id!r} is not a literal ({fix})")
        raise self.error(node, f"{what}: {_describe(node)} is not allowed in values (only literals)")


def _dotted_name(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


_KINDS = {
    ast.Call: "a function call",
    ast.Attribute: "attribute access",
    ast.Lambda: "a lambda",
    ast.JoinedStr: "an f-string",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.Subscript: "subscripting",
    ast.Starred: "*unpacking",
    ast.BinOp: "an operator expression",
    ast.UnaryOp: "an operator expression",
    ast.BoolOp: "a boolean expression",
    ast.Compare: "a comparison",
    ast.IfExp: "a conditional expression",
    ast.NamedExpr: "an assignment expression",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Name: "a bare name",
    ast.Constant: "a literal value",
    ast.List: "a list",
    ast.Tuple: "a tuple",
    ast.Dict: "a dict",
    ast.Set: "a set",
}


def _describe(node: ast.AST) -> str:
    for kind, text in _KINDS.items():
        if isinstance(node, kind):
            return text
    return f"a {type(node).__name__} expression"


def _rename_keyword_args(code: str) -> tuple[str, list[tuple[int, int]]]:
    """Rename keyword argument names that are Python keywords (``from=``) so ast accepts them.

    Returns the new code and the (line, column) of each renamed name in it.
    A keyword followed by ``=`` right after ``(`` or ``,`` is never valid
    Python, so the rewrite cannot change the meaning of anything that parses.
    """
    if _KW_PREFIX not in code and not any(keyword.iskeyword(w) for w in re.findall(r"[A-Za-z_]+", code)):
        return code, []
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in _SKIP]
    except (tokenize.TokenError, SyntaxError):
        return code, []  # ast.parse will report the problem with its position
    if any(t.type == tokenize.NAME and t.string.startswith(_KW_PREFIX) for t in toks):
        return code, []  # a name of the reserved form: renaming could collide with it (a string holding it is fine)
    hits = [
        cur.start
        for prev, cur, nxt in zip(toks, toks[1:], toks[2:], strict=False)
        if cur.type == tokenize.NAME
        and keyword.iskeyword(cur.string)
        and nxt.string == "="
        and prev.string in ("(", ",")
    ]
    if not hits:
        return code, []
    lines = code.split("\n")
    renamed = []
    for row, col in reversed(hits):  # right to left keeps earlier columns valid
        line = lines[row - 1]
        lines[row - 1] = line[:col] + _KW_PREFIX + line[col:]
    for row, col in hits:  # columns in the renamed code
        renamed.append((row, col + len(_KW_PREFIX) * sum(1 for r, c in hits if r == row and c < col)))
    return "\n".join(lines), renamed


# A tool name as providers accept it (BFCL's dots too), and one right before its "(".
_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
_CALL_NAME = re.compile(r"([A-Za-z0-9_.-]{1,64})[ \t]*\(")
_QUOTES = ('"""', "'''", '"', "'")


def _mask_call_names(code: str) -> tuple[str, dict[tuple[int, int], str]]:
    """Replace each call name that is a provider's tool name but not a Python one (``get-x``, ``3d_print``) by ``_``
    of the same length, so ast parses the call and every reported column stays right.

    Only names in call position are masked: the start of the text, or an element of a top-level list; string
    literals are skipped. Returns the code and {(line, UTF-8 column): the original name}."""
    masked: dict[tuple[int, int], str] = {}
    out = list(code)
    depth, i, n = 0, 0, len(code)
    call_position = True
    while i < n:
        char = code[i]
        if char in "'\"":  # a string literal (triple-quoted too), escapes included
            quote = next(q for q in _QUOTES if code.startswith(q, i))
            j = i + len(quote)
            while j < n and not code.startswith(quote, j):
                j += 2 if code[j] == "\\" else 1
            i, call_position = j + len(quote), False
            continue
        if char in " \t\r\n":
            i += 1
            continue
        if call_position and depth <= 1:
            match = _CALL_NAME.match(code, i)
            name = match.group(1) if match else ""
            if match and _PROVIDER_NAME.fullmatch(name) and not all(part.isidentifier() for part in name.split(".")):
                out[i : i + len(name)] = "_" * len(name)
                start = code.rfind("\n", 0, i) + 1
                masked[(code.count("\n", 0, i) + 1, len(code[start:i].encode()))] = name
        call_position = False
        if char in "([{":
            depth += 1
            call_position = depth == 1 and char == "["
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 1:
            call_position = True
        i += 1
    return "".join(out), masked


_SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


# -- formatting ------------------------------------------------------------


def format_value(value: Any) -> str:
    """A literal that :func:`parse_literal` reads back as an equal value."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot format non-finite number {value!r}")
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise ValueError(f"cannot format dict key {k!r}: keys must be strings")
        return "{" + ", ".join(f"{k!r}: {format_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"cannot format {type(value).__name__} value {value!r}")


def _check_identifier(name: str, what: str) -> None:
    # Python reads identifiers NFKC-normalised, so only normalised ones round-trip.
    if not (isinstance(name, str) and name.isidentifier() and unicodedata.normalize("NFKC", name) == name):
        raise ValueError(f"cannot format {what} {name!r}: not an identifier")
    if name.startswith(_KW_PREFIX):
        raise ValueError(f"cannot format {what} {name!r}: the prefix {_KW_PREFIX!r} is reserved")


def format_call(name: str, args: dict[str, Any]) -> str:
    """``name(k=v, ...)`` such that ``parse_call(format_call(n, a)) == (n, a)``."""
    if not isinstance(name, str):
        raise ValueError(f"cannot format call name {name!r}")
    if _PROVIDER_NAME.fullmatch(name) and not all(part.isidentifier() for part in name.split(".")):
        # a provider's tool name (get-weather, 3d_print): parse_call reads it back in call position
        for arg in args:
            _check_identifier(arg, "argument name")
        return f"{name}(" + ", ".join(f"{k}={format_value(v)}" for k, v in args.items()) + ")"
    for part in name.split("."):
        _check_identifier(part, "call name part")
        if keyword.iskeyword(part):
            raise ValueError(f"cannot format call name {name!r}: {part!r} is a Python keyword")
    for arg in args:
        _check_identifier(arg, "argument name")
    return f"{name}(" + ", ".join(f"{k}={format_value(v)}" for k, v in args.items()) + ")"


def format_calls(calls: list[Call] | list[tuple[str, dict[str, Any]]]) -> str:
    """``[f(a=1), g(b='x')]``, read back by :func:`parse_calls`."""
    return "[" + ", ".join(format_call(n, a) for n, a in calls) + "]"
