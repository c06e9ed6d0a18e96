"""Check a call's arguments against its tool's parameter schema.

Used as a ToolGate precondition, so :func:`validate_args` never raises: every
problem, including a schema that cannot be evaluated, comes back as an
error string (fail closed: a call whose arguments cannot be checked is not
let through). Validators are compiled once per distinct parameter schema.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import Draft202012Validator, validator_for
from referencing import Registry as RefRegistry

from .model import ToolSpec
from .schema_normalize import suggest, type_name

_MAX_CACHE = 4096
_MAX_MESSAGE = 240
# canonical schema JSON -> (validator, None) or (None, why it cannot be used)
_cache: dict[str, tuple[Any, str | None]] = {}


def validate_args(tool: ToolSpec, args: Any) -> list[str]:
    """Error messages for ``args`` as a call of ``tool``; an empty list means valid."""
    try:
        return _validate(tool, args)
    except Exception as exc:  # noqa: BLE001 - a precondition must fail closed, not raise
        name = getattr(tool, "name", "?")
        return [f"cannot validate arguments of {name!r}: {type(exc).__name__}: {_short(str(exc))}"]


def _validate(tool: ToolSpec, args: Any) -> list[str]:
    if not isinstance(args, dict):
        return [f"arguments must be an object of name=value pairs, got {type_name(args)}"]
    bad_keys = [k for k in args if not isinstance(k, str)]
    if bad_keys:
        return [f"argument names must be strings, got {bad_keys[0]!r}"]
    schema = tool.parameters
    validator, why = _compiled(schema)
    if validator is None:
        return [f"tool {tool.name!r} has an unusable parameter schema: {why}"]

    props = schema.get("properties", {})
    errors = [f"missing required parameter {r!r}" for r in schema.get("required", []) if r not in args]
    # JSON Schema allows extra names unless told otherwise; a tool call must not.
    extra_ok = schema.get("additionalProperties", False) is not False or "patternProperties" in schema
    if not extra_ok:
        errors += [f"unknown parameter {k!r}{suggest(k, props)}" for k in args if k not in props]

    for err in validator.iter_errors(args):
        at = list(err.absolute_path)
        if not at and err.validator in ("required", "additionalProperties"):
            continue  # reported above, in plainer words
        where = f"parameter {_path(at)!r}" if at else "arguments"
        msg = f"{where}: {_short(err.message)}"
        if msg not in errors:
            errors.append(msg)
    return errors


_by_id: dict[int, tuple[dict, tuple[Any, str | None]]] = {}


def _compiled(schema: dict) -> tuple[Any, str | None]:
    # Fast path: the same schema object as last time (tools are long-lived); the
    # stored reference keeps the id from being reused by another object.
    hit_id = _by_id.get(id(schema))
    if hit_id is not None and hit_id[0] is schema:
        return hit_id[1]
    result = _compiled_by_content(schema)
    if len(_by_id) < _MAX_CACHE:
        _by_id[id(schema)] = (schema, result)
    return result


def _compiled_by_content(schema: dict) -> tuple[Any, str | None]:
    key = json.dumps(schema, sort_keys=True, default=repr)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
        # An empty reference registry: jsonschema would otherwise fetch a
        # remote $ref over the network; unresolvable refs fail closed instead.
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=RefRegistry())
        result: tuple[Any, str | None] = (validator, None)
    except SchemaError as exc:
        result = (None, _short(exc.message))
    except Exception as exc:  # noqa: BLE001 - any failure to compile is a failure to validate
        result = (None, f"{type(exc).__name__}: {_short(str(exc))}")
    if len(_cache) >= _MAX_CACHE:
        _cache.clear()
    _cache[key] = result
    return result


def _path(parts: list[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
