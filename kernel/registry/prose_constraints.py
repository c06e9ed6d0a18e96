"""Enums and defaults that BFCL function docs state only in prose.

BFCL descriptions say things like "One of ['celsius', 'fahrenheit'].",
"Default is 'celsius'.", "Default: 5", "(default: true)" or "Possible
values: START, STOP". Stated once and clearly, they become the property's
``enum`` / ``default``; the prose stays in the description. Anything unclear
is left alone: several mentions that disagree, a value that does not fit the
property's type or enum, an open-ended phrase ("Default is the current
directory."), or a keyword the schema already has. "Default is None" only
says the parameter is optional, so it adds nothing.

BFCL's multi-turn docs (bfcl-eval 2026.3.23) state their enums in three
colon-introduced forms, 12 parameters in the 8 classes' docs:
``[Enum]: ["START", "STOP"]``, ``[Enum]: USD, RMB, EUR`` (items may hold
spaces: "Sunset Valley") and ``Options are: economy, business, first.`` /
``Here are the options: read_write, read, write``. An array parameter's
enum constrains its items (``lockDoors(door=[...])``). A nullable property
(``type: [X, "null"]``) keeps ``None`` in its enum, as the schema allowed it.
"""

from __future__ import annotations

import re
from typing import Any

from jsonschema.validators import Draft202012Validator
from referencing import Registry as RefRegistry

from .callparse import CallParseError, parse_literal

_END = r"(?=\s*(?:\.(?=\s|$)|[;,)\n]|$))"  # a value must end its clause
_WORD = r"[\w\-+/]+(?:\.[\w\-+/]+)*"  # a sentence's final period is not part of it
_ITEM = rf"'[^'\n]*'|\"[^\"\n]*\"|{_WORD}"
_SEP = r"\s*(?:,\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+)\s*"
_BRACKETS = r"\[[^\[\]\n]*\]"

_INTRO = (
    r"(?:must\s+be\s+)?(?:one\s+of|(?:possible|allowed|valid|supported|accepted)\s+values(?:\s+(?:are|is|include))?)"
)
_ENUM = re.compile(
    rf"\b{_INTRO}\s*:?\s*(?:(?P<brackets>{_BRACKETS})|(?P<items>(?:{_ITEM})(?:{_SEP}(?:{_ITEM}))+){_END})", re.I
)
# After a colon the list is plainly a list, so an item may be several words
# ("Sunset Valley", "Hong Kong"); items are separated by commas only.
_COLON_INTRO = r"(?:\[enum\]|(?:here\s+are\s+)?the\s+options(?:\s+are)?|options\s+are)\s*:"
_PHRASE = r"[A-Za-z0-9_][\w\-]*(?: (?!(?:or|and)\b)[\w\-]+)*"  # "b or c" is not one item
_COLON_ITEM = rf"'[^'\n]*'|\"[^\"\n]*\"|{_PHRASE}"
_COLON_ENUM = re.compile(
    rf"(?:^|(?<=\s)|(?<=\W)){_COLON_INTRO}\s*(?:(?P<brackets>{_BRACKETS})"
    rf"|(?P<items>(?:{_COLON_ITEM})(?:\s*,\s*(?:or\s+|and\s+)?(?:{_COLON_ITEM}))+)){_END}",
    re.I,
)
_DEFAULT = re.compile(
    rf"\bdefaults?(?:\s+value)?\s*(?:\s+is|\s+to|:|=)\s*"
    rf"(?P<val>'[^'\n]*'|\"[^\"\n]*\"|{_BRACKETS}|\{{[^{{}}\n]*\}}|{_WORD}){_END}",
    re.I,
)
_NULLS = ("none", "null")


def add_prose_constraints(schema: dict) -> dict:
    """Fill ``enum``/``default`` from the descriptions of ``schema``'s properties, recursively; mutates and returns it."""
    for prop in (schema.get("properties") or {}).values():
        if isinstance(prop, dict):
            _one(prop)
            add_prose_constraints(prop)
    items = schema.get("items")
    if isinstance(items, dict):
        add_prose_constraints(items)
    return schema


def _one(prop: dict) -> None:
    text = prop.get("description")
    if not isinstance(text, str):
        return
    kind = _main_type(prop)
    items = prop.get("items")
    # An array of scalars: the stated values are what each item may be.
    target = items if kind == "array" and isinstance(items, dict) else prop
    item_kind = _main_type(target)
    if "enum" not in target and item_kind in ("string", "integer", "number", "boolean", None):
        found = [_enum_values(m, item_kind) for m in _ENUM.finditer(text)]
        found += [_colon_enum_values(m, item_kind) for m in _COLON_ENUM.finditer(text)]
        values = _agreed(found)
        if values and len(values) > 1 and all(_fits(target, v) for v in values):
            types = target.get("type")
            if isinstance(types, list) and "null" in types and None not in values:
                values = [*values, None]
            target["enum"] = values
    if "default" not in prop:
        value = _agreed([_default_value(m.group("val"), kind) for m in _DEFAULT.finditer(text)])
        if value is not None and _fits(prop, value):
            prop["default"] = value


def _main_type(prop: dict) -> str | None:
    declared = prop.get("type")
    if isinstance(declared, list):
        rest = [x for x in declared if x != "null"]
        return rest[0] if len(rest) == 1 else None
    return declared


def _agreed(found: list[Any]) -> Any:
    """The one value every mention gives, else None (nothing found, or ambiguous)."""
    if not found or any(f is None for f in found):
        return None
    first = found[0]
    return first if all(f == first and type(f) is type(first) for f in found) else None


def _enum_values(match: re.Match, kind: str | None) -> list[Any] | None:
    if match.group("brackets"):
        try:
            values = parse_literal(match.group("brackets"))
        except CallParseError:
            return None
        return values if all(isinstance(v, (str, int, float, bool)) for v in values) else None
    items = re.findall(_ITEM, match.group("items"))
    items = [i for i in items if i.lower() not in ("or", "and")]
    quoted = all(i[0] in "'\"" for i in items)
    # "one of the following ..." is prose: after "one of", bare words count
    # only when a colon introduces them.
    intro = match.group(0)[: match.start("items") - match.start()]
    if not quoted and intro.lower().lstrip().startswith(("one", "must")) and ":" not in intro:
        return None
    out = [_scalar(i, kind) for i in items]
    return None if any(v is None for v in out) else out


def _colon_enum_values(match: re.Match, kind: str | None) -> list[Any] | None:
    if match.group("brackets"):
        return _enum_values(match, kind)
    raw = [i.strip() for i in re.split(r"\s*,\s*(?:or\s+|and\s+)?", match.group("items"))]
    out = [_scalar(i, kind) if i[0] in "'\"" or kind != "string" else i for i in raw]
    return None if any(v is None for v in out) or len(set(map(repr, out))) != len(out) else out


def _default_value(raw: str, kind: str | None) -> Any:
    if raw[0] in "[{":
        try:
            return parse_literal(raw)
        except CallParseError:
            return None
    if raw.lower() in _NULLS:
        return None
    return _scalar(raw, kind)


def _scalar(raw: str, kind: str | None) -> Any:
    """A quoted or bare token read as a value of ``kind``; None when it does not read as one."""
    if raw[0] in "'\"":
        return raw[1:-1] if kind in ("string", None) else None
    low = raw.lower()
    if kind == "boolean" or (kind is None and low in ("true", "false")):
        return {"true": True, "false": False}.get(low)
    if kind in ("integer", "number") or (kind is None and re.fullmatch(r"[-+]?\d+(\.\d+)?", raw)):
        try:
            return int(raw) if re.fullmatch(r"[-+]?\d+", raw) else float(raw)
        except ValueError:
            return None
    # A bare word as a string; bare numbers and booleans are too ambiguous.
    if re.fullmatch(r"[A-Za-z_][\w\-./]*", raw) and low not in ("true", "false", *_NULLS):
        return raw
    return None


def _fits(prop: dict, value: Any) -> bool:
    try:
        return Draft202012Validator(prop, registry=RefRegistry()).is_valid(value)  # never fetch a remote $ref
    except Exception:  # an odd schema: extract nothing rather than guess
        return False
