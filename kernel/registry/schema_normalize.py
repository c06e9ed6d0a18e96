"""Normalise one tool's JSON Schema (parameters or output) to plain, checked JSON Schema.

What "normalised" means here:

* every local ``$ref`` is inlined (a recursive one is kept as a ``$ref`` into
  ``$defs``/``definitions``, which then stay on the root);
* ``anyOf``/``oneOf`` of a single schema and ``{"type": "null"}`` (pydantic's
  ``Optional[X]``) and OpenAPI's ``nullable: true`` become ``type: [X, "null"]``
  (with ``None`` added to an ``enum``);
* BFCL's Python-ish type names (``dict``, ``float``, ``tuple``, ``any`` ...) are
  mapped to JSON Schema ones when the dialect is ``"bfcl"``, and its
  ``"default": "None"`` (Python's None written as text) becomes a null
  default on a nullable type;
* draft-07 list-form ``items`` becomes ``prefixItems`` unless the schema
  declares an older draft;
* unknown keywords are an error rather than being passed on and then ignored
  by the validator (that is how a typo like ``requried`` silently disables a
  check); ``x-...`` extension keywords are kept as they are.

The result is then checked against its draft's meta-schema, so a value of the
wrong shape (``minimum: "5"``, a bad regex) is reported here, at import time,
with the path of the offending field. Errors are :class:`SchemaPathError`
carrying a dotted path such as ``parameters.properties.unit.type``.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any, Literal

from jsonschema.exceptions import best_match
from jsonschema.validators import Draft202012Validator, validator_for

Dialect = Literal["json", "bfcl"]

JSON_TYPES = ("string", "number", "integer", "boolean", "array", "object", "null")

# BFCL's type names (its Python categories, plus the Java/JavaScript ones its
# other categories use). ``None`` means "any value": no type constraint.
BFCL_TYPES: dict[str, str | None] = {
    **{t: t for t in JSON_TYPES},
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "any": None,
    "int": "integer",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "double": "number",
    "long": "integer",
    "short": "integer",
    "byte": "integer",
    "char": "string",
    "String": "string",
    "Any": None,
    "Array": "array",
    "ArrayList": "array",
    "HashMap": "object",
    "Hashtable": "object",
}

# Keywords that only describe; they may sit next to ``$ref`` or be merged
# over an Optional's inner schema without changing what validates.
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
)

_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "not", "if", "then", "else", "contains", "propertyNames", "additionalProperties",
    "unevaluatedItems", "unevaluatedProperties", "contentSchema",
)  # fmt: skip
# Passed through unchanged; the meta-schema check validates their values.
_PLAIN = frozenset(
    {
        "$schema", "$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$vocabulary",
        "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains",
        "minContains", "maxProperties", "minProperties", "dependentRequired", "dependencies",
        "format", "contentEncoding", "contentMediaType",
    }
)  # fmt: skip
KNOWN_KEYWORDS = frozenset(
    {"type", "nullable", "$ref", "$defs", "definitions", "items", "additionalItems", "required", "enum"}
    | set(_SCHEMA_MAPS)
    | set(_SCHEMA_LISTS)
    | set(_SCHEMA_ONE)
    | _PLAIN
    | ANNOTATIONS
)
_OLD_DRAFTS = ("draft-04", "draft-06", "draft-07")


class SchemaPathError(ValueError):
    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for py, name in ((dict, "object"), (list, "array"), (str, "string"), (int, "integer"), (float, "number")):
        if isinstance(value, py):
            return name
    return type(value).__name__


def suggest(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def normalize_schema(schema: Any, *, path: str, dialect: Dialect = "json", require_object: bool = False) -> dict:
    """Return a normalised copy of ``schema``; raise :class:`SchemaPathError` on anything not understood.

    ``path`` names the schema's root in messages (``parameters``,
    ``inputSchema``). ``require_object`` demands a tool-parameters schema: an
    object (a missing root ``type`` is taken as ``object``) whose ``required``
    names are all declared properties.
    """
    if not isinstance(schema, dict):
        raise SchemaPathError(path, f"expected a JSON Schema object, got {type_name(schema)}")
    draft = str(schema.get("$schema", ""))
    norm = _Normalizer(schema, path, dialect, old_draft=any(d in draft for d in _OLD_DRAFTS))
    out = norm.run()
    if require_object:
        _check_object_root(out, path)
    _check_meta(out, path)
    _check_defaults(out, path)
    return out


class _Normalizer:
    def __init__(self, root: dict, path: str, dialect: Dialect, *, old_draft: bool):
        self.root = root
        self.root_path = path
        self.dialect = dialect
        self.old_draft = old_draft
        self.stack = ["#"]  # refs being expanded; one met again is recursive
        self.recursive: dict[str, str] = {}  # ref -> error path, for recursive refs kept as $ref

    def run(self) -> dict:
        out = self.schema(self.root, self.root_path)
        assert isinstance(out, dict)
        done: set[str] = set()
        # A recursive ref stays a $ref, so its target must stay on the root;
        # normalising a target can reveal further recursive refs, hence the loop.
        while set(self.recursive) - done:
            ref = sorted(set(self.recursive) - done)[0]
            done.add(ref)
            if ref == "#":
                continue
            parts = _pointer_parts(ref, self.recursive[ref])
            if len(parts) != 2 or parts[0] not in ("$defs", "definitions"):
                raise SchemaPathError(self.recursive[ref], f"recursive $ref {ref!r} is only supported into $defs")
            self.stack.append(ref)
            target = self.schema(self._resolve(ref, self.recursive[ref]), f"{self.root_path}.{parts[0]}.{parts[1]}")
            self.stack.pop()
            out.setdefault(parts[0], {})[parts[1]] = target
        return out

    # -- one schema node -------------------------------------------------
    def schema(self, node: Any, path: str) -> dict | bool:
        if isinstance(node, bool):  # true/false are valid (sub)schemas
            return node
        if not isinstance(node, dict):
            raise SchemaPathError(path, f"expected a schema object, got {type_name(node)}")
        if "$ref" in node:
            return self._ref(node, path)
        out: dict[str, Any] = {}
        nullable = False
        for key, value in node.items():
            if not isinstance(key, str):
                raise SchemaPathError(path, f"keyword {key!r} is not a string")
            at = f"{path}.{key}"
            if key.startswith("x-"):
                out[key] = copy.deepcopy(value)
            elif key == "type":
                normalized = self._type(value, at)
                if normalized is not None:
                    out["type"] = normalized
            elif key == "nullable":
                if not isinstance(value, bool):
                    raise SchemaPathError(at, f"must be true or false, got {value!r}")
                nullable = value
            elif key in ("$defs", "definitions"):
                # Inlined where referenced; a recursive target is put back by run().
                if not isinstance(value, dict):
                    raise SchemaPathError(at, f"expected an object of schemas, got {type_name(value)}")
            elif key in _SCHEMA_MAPS:
                if not isinstance(value, dict):
                    raise SchemaPathError(at, f"expected an object of schemas, got {type_name(value)}")
                out[key] = {k: self.schema(v, f"{at}.{k}") for k, v in value.items()}
            elif key in _SCHEMA_LISTS:
                if not isinstance(value, list) or not value:
                    raise SchemaPathError(at, f"expected a non-empty array of schemas, got {value!r}")
                out[key] = [self.schema(v, f"{at}[{i}]") for i, v in enumerate(value)]
            elif key in _SCHEMA_ONE:
                out[key] = self.schema(value, at)
            elif key == "items":
                if isinstance(value, list):
                    items = [self.schema(v, f"{at}[{i}]") for i, v in enumerate(value)]
                    out["items" if self.old_draft else "prefixItems"] = items
                else:
                    out["items"] = self.schema(value, at)
            elif key == "additionalItems":
                # Only meaningful after a list-form ``items``; it then becomes
                # 2020-12's ``items``. With a single ``items`` schema it has no
                # effect in any draft.
                if isinstance(node.get("items"), list):
                    out["additionalItems" if self.old_draft else "items"] = self.schema(value, at)
            elif key == "required":
                if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
                    raise SchemaPathError(at, f"expected an array of property names, got {value!r}")
                if len(set(value)) != len(value):
                    raise SchemaPathError(at, f"repeated names in {value!r}")
                out[key] = list(value)
            elif key == "enum":
                if not isinstance(value, list) or not value:
                    raise SchemaPathError(at, f"expected a non-empty array, got {value!r}")
                out[key] = copy.deepcopy(value)
            elif key in ("title", "description"):
                if not isinstance(value, str):
                    raise SchemaPathError(at, f"expected a string, got {type_name(value)}")
                out[key] = value
            elif key in KNOWN_KEYWORDS:
                out[key] = copy.deepcopy(value)
            else:
                raise SchemaPathError(at, f"unknown JSON Schema keyword {key!r}{suggest(key, KNOWN_KEYWORDS)}")
        self._check_required_declared(out, path)
        if self.dialect == "bfcl" and out.get("default") == "None":
            # BFCL writes a Python signature's defaults as text; "None" is the
            # default None, so the parameter also accepts null (it is what an
            # omitted argument means to the function).
            out["default"] = None
            nullable = True
        if nullable:
            _make_nullable(out)
        return _collapse_optional(out)

    def _type(self, value: Any, at: str) -> str | list[str] | None:
        names = value if isinstance(value, list) else [value]
        if not names or not all(isinstance(n, str) for n in names):
            raise SchemaPathError(at, f"expected a type name or an array of them, got {value!r}")
        mapped: list[str] = []
        for n in names:
            if self.dialect == "bfcl":
                if n not in BFCL_TYPES:
                    raise SchemaPathError(at, f"unknown type {n!r}{suggest(n, BFCL_TYPES)}")
                json_type = BFCL_TYPES[n]
                if json_type is None:  # "any" anywhere in a union: no constraint at all
                    return None
            else:
                if n not in JSON_TYPES:
                    hint = " (a BFCL type name; pass fmt=bfcl)" if n in BFCL_TYPES else suggest(n, JSON_TYPES)
                    raise SchemaPathError(at, f"unknown type {n!r}{hint}")
                json_type = n
            if json_type not in mapped:
                mapped.append(json_type)
        return mapped[0] if len(mapped) == 1 and not isinstance(value, list) else mapped

    def _check_required_declared(self, out: dict, path: str) -> None:
        # A required name that no property, pattern or additionalProperties
        # schema can satisfy is almost always a typo.
        props = out.get("properties")
        if props is None or "patternProperties" in out or out.get("additionalProperties") not in (None, False):
            return
        for name in out.get("required", []):
            if name not in props:
                raise SchemaPathError(f"{path}.required", f"{name!r} is not a declared property{suggest(name, props)}")

    # -- $ref ------------------------------------------------------------
    def _ref(self, node: dict, path: str) -> dict:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaPathError(f"{path}.$ref", f"only local references ('#/...') are supported, got {ref!r}")
        siblings = self.schema({k: v for k, v in node.items() if k != "$ref"}, path)
        assert isinstance(siblings, dict)
        if ref in self.stack:
            # Kept as a reference (2020-12 allows keywords beside $ref).
            self.recursive.setdefault(ref, f"{path}.$ref")
            return {**siblings, "$ref": ref}
        resolved = self._resolve(ref, f"{path}.$ref")
        self.stack.append(ref)
        target = self.schema(resolved, ".".join([self.root_path, *_pointer_parts(ref, f"{path}.$ref")]))
        self.stack.pop()
        if not siblings:
            return target if isinstance(target, dict) else {"allOf": [target]}
        if set(siblings) <= ANNOTATIONS and isinstance(target, dict):
            return {**target, **siblings}  # the referring site's description/default win
        notes = {k: v for k, v in siblings.items() if k in ANNOTATIONS}
        rest = {k: v for k, v in siblings.items() if k not in ANNOTATIONS}
        return {**notes, "allOf": [target, rest] if rest else [target]}

    def _resolve(self, ref: str, at: str) -> Any:
        node: Any = self.root
        for part in _pointer_parts(ref, at):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaPathError(at, f"unresolvable reference {ref!r}")
        return node


def _pointer_parts(ref: str, at: str) -> list[str]:
    pointer = ref[1:]
    if not pointer:
        return []
    if not pointer.startswith("/"):
        raise SchemaPathError(at, f"only JSON-pointer references ('#/...') are supported, got {ref!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def _is_null_schema(schema: Any) -> bool:
    return (
        isinstance(schema, dict) and schema.get("type") in ("null", ["null"]) and set(schema) - ANNOTATIONS == {"type"}
    )


def _make_nullable(schema: dict) -> None:
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        schema["type"] = types + ["null"] if "null" not in types else types
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    if "const" in schema:
        schema["enum"] = [schema.pop("const"), None]


def _collapse_optional(schema: dict) -> dict:
    """``{anyOf: [X, {type: null}], ...}`` -> X made nullable, with the outer annotations over it."""
    for comb in ("anyOf", "oneOf"):
        branches = schema.get(comb)
        if not isinstance(branches, list) or len(branches) != 2:
            continue
        nulls = [b for b in branches if _is_null_schema(b)]
        others = [b for b in branches if not _is_null_schema(b)]
        if len(nulls) != 1 or len(others) != 1 or not isinstance(others[0], dict):
            continue
        inner, outer = others[0], {k: v for k, v in schema.items() if k != comb}
        # Only merge when the two sides cannot disagree on validation.
        if set(inner) & set(outer) - ANNOTATIONS or not ({"type", "enum", "const"} & set(inner)) or "$ref" in inner:
            continue
        merged = {**inner, **outer}
        _make_nullable(merged)
        return merged
    return schema


def _check_object_root(out: dict, path: str) -> None:
    root_type = out.setdefault("type", "object")
    if root_type != "object":
        raise SchemaPathError(f"{path}.type", f"a tool's parameters must be an object schema, got {root_type!r}")
    out.setdefault("properties", {})
    props, required = out["properties"], out.setdefault("required", [])
    for name in required:
        if name not in props:
            raise SchemaPathError(f"{path}.required", f"{name!r} is not a declared property{suggest(name, props)}")


def _check_meta(out: dict, path: str) -> None:
    cls = validator_for(out, default=Draft202012Validator)
    err = best_match(cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER).iter_errors(out))
    if err is not None:
        where = path + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        raise SchemaPathError(where, err.message)


def _check_defaults(out: dict, path: str) -> None:
    """Every ``default`` must be valid for the schema it sits in: an integer parameter whose default is "5" would hand a
    tool a value its own schema refuses whenever the argument is left out. Local ``$ref``s resolve against the root."""
    cls = validator_for(out, default=Draft202012Validator)
    root = cls(out, format_checker=cls.FORMAT_CHECKER)
    stack: list[tuple[Any, str]] = [(out, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, dict):
            if "default" in node:
                rest = {k: v for k, v in node.items() if k != "default"}
                err = best_match(root.evolve(schema=rest).iter_errors(node["default"]))
                if err is not None:
                    raise SchemaPathError(
                        f"{at}.default", f"{node['default']!r} does not fit its own schema: {err.message}"
                    )
            for k, value in node.items():
                if k in _SCHEMA_MAPS or k in ("$defs", "definitions"):
                    if isinstance(value, dict):
                        stack.extend((sub, f"{at}.{k}.{name}") for name, sub in value.items())
                elif k in _SCHEMA_LISTS and isinstance(value, list):
                    stack.extend((sub, f"{at}.{k}[{i}]") for i, sub in enumerate(value))
                elif k in _SCHEMA_ONE or k == "items":
                    stack.append((value, f"{at}.{k}"))
