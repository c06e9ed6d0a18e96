"""ToolGate-style contracts on tools over the typed state (scratchpad + world).

Precondition: the arguments are valid against the tool's schema and every
prerequisite fact the tool declares is present and satisfied in S.
Postcondition: the result is not an error (``{"error": ...}``), matches the declared output
schema, and passes the tool's semantic checks. Contracts fail closed: a
condition that cannot be evaluated counts as violated. A result that is not an object
(None, a list, a string) is checked and written as ``{"result": value}``; for imported
registries a schema mismatch is a warning unless ``strict_output_schema`` is set.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from .domains import DomainTool
from .registry.model import Prerequisite, Sat, ToolSpec, entity_key
from .scratchpad import Scratchpad, truncation_marker

_MISSING = object()


def sat(predicate: Sat, value: Any) -> bool:
    """Evaluate a satisfaction predicate; anything unevaluable is False (fail closed)."""
    try:
        if predicate.op == "truthy":
            return bool(value)
        if predicate.op == "not_null":
            return value is not None
        if predicate.op == "eq":
            return value == predicate.value
        if predicate.op == "ne":
            return value is not None and value != predicate.value
        if predicate.op == "in":
            return value in predicate.value
        if value is None:
            return False
        if predicate.op == "gt":
            return value > predicate.value
        if predicate.op == "gte":
            return value >= predicate.value
        if predicate.op == "lt":
            return value < predicate.value
        if predicate.op == "lte":
            return value <= predicate.value
    except Exception:
        return False
    return False


def describe(prerequisite: Prerequisite) -> str:
    if prerequisite.description:
        return prerequisite.description
    op, value = prerequisite.sat.op, prerequisite.sat.value
    return {"truthy": "true", "not_null": "present"}.get(op, f"{op} {json.dumps(value)}")


def check(prerequisite: Prerequisite, scratchpad: Scratchpad, key: str | None = None) -> str:
    """Three-valued Check(p, S): met / not_met / absent. ``key``: the entry to consult, for a per-entity
    prerequisite the entity's (:func:`prerequisite_key`); the plain key otherwise."""
    key = prerequisite.key if key is None else key
    if key not in scratchpad:
        return "absent"
    return "met" if sat(prerequisite.sat, scratchpad.get(key)) else "not_met"


def prerequisite_key(prerequisite: Prerequisite, entity_value: Any = None) -> str:
    """The scratchpad key Check consults for ``p``: its plain key, or for a per-entity prerequisite the
    entry of the entity ``entity_value`` names (``line_status[L-9009]``; ``line_status[]`` when no value
    is known, which no write produces, so Check gives Absent)."""
    return prerequisite.key if prerequisite.entity is None else entity_key(prerequisite.key, entity_value)


def _validate_args(spec: ToolSpec, args: dict[str, Any]) -> list[str]:
    from .registry.validate import validate_args

    try:
        return list(validate_args(spec, args))
    except Exception as exc:  # fail closed
        return [f"argument validation could not be evaluated: {exc!r}"]


def precondition(spec: ToolSpec, args: dict[str, Any], scratchpad: Scratchpad) -> list[str]:
    errors = _validate_args(spec, args)
    for prerequisite in spec.prerequisites:
        key = prerequisite_key(
            prerequisite,
            args.get(prerequisite.entity) if prerequisite.entity is not None and isinstance(args, dict) else None,
        )
        outcome = check(prerequisite, scratchpad, key)
        if outcome != "met":
            errors.append(f"prerequisite {key!r} is {outcome} (needs {describe(prerequisite)})")
    return errors


@functools.lru_cache(maxsize=512)
def _output_validator(schema_json: str):
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# Registries imported from another format (OpenAI, MCP, BFCL) describe results that nobody checked
# against the tools: BFCL's send_message docs promise `message_id` while the class returns `new_id`.
# For those, an output-schema mismatch is a warning by default (KernelConfig.strict_output_schema
# makes it a rejection); our own domains' hand-written schemas stay strict.
IMPORTED_SOURCES = frozenset({"openai", "mcp", "bfcl"})


def as_result_object(result: Any) -> dict[str, Any]:
    """The object a postcondition and the scratchpad see: a dict as it is, anything else under ``result``.

    Real tools return None (BFCL's ``cd`` on some paths, ``mkdir``) or lists (``ls``); wrapping
    them keeps the value rather than rejecting every call that does not return an object."""
    return result if isinstance(result, dict) else {"result": result}


def is_error(result: Any) -> bool:
    """A tool that reports ``{"error": ...}`` failed: nothing it staged is committed."""
    return isinstance(result, dict) and "error" in result


class PostconditionReport(list):
    """The rejections (a non-empty report means the call is not committed), plus ``warnings``:
    findings recorded in the trace that let the call stand."""

    def __init__(self, rejected: list[str], warnings: list[str]):
        super().__init__(rejected)
        self.warnings = warnings


def postcondition(
    spec: ToolSpec,
    tool: DomainTool | None,
    args: dict[str, Any],
    result: Any,
    state: Any,
    *,
    strict_output_schema: bool = False,
) -> PostconditionReport:
    """Check a staged call's result. ``result`` is the tool's raw return value."""
    if is_error(result):
        return PostconditionReport([f"tool reported an error: {result['error']}"], [])
    obj = as_result_object(result)
    errors: list[str] = []
    schema_errors: list[str] = []
    if spec.output_schema is not None:
        try:
            validator = _output_validator(json.dumps(spec.output_schema, sort_keys=True))
            schema_errors = [
                f"result{''.join(f'[{p!r}]' for p in e.path)}: {e.message}" for e in validator.iter_errors(obj)
            ]
        except Exception as exc:
            errors.append(f"output schema could not be evaluated: {exc!r}")
    warnings: list[str] = []
    if spec.source in IMPORTED_SOURCES and not strict_output_schema:
        warnings = [f"{e} (output schema of an imported registry: not enforced)" for e in schema_errors]
    else:
        errors += schema_errors
    for check_fn in tool.post if tool is not None else []:
        try:
            msg = check_fn(args, result, state)
        except Exception as exc:
            msg = f"postcondition {getattr(check_fn, '__name__', 'check')} could not be evaluated: {exc!r}"
        if msg:
            errors.append(
                msg if isinstance(msg, str) else f"postcondition {getattr(check_fn, '__name__', 'check')} failed"
            )
    return PostconditionReport(errors, warnings)


def resolve_path(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict):
            if part not in cur:
                return _MISSING
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                return _MISSING
        else:
            return _MISSING
    return cur


# Result entries (docs/kernel.md, "Results in S"): every committed call's result reaches S, one entry per
# top-level field under "<tool>.<field>", so that two tools' fields never collide and no tool has to declare
# what it writes (an imported registry declares nothing). A field whose JSON is longer than the cap is
# stored as a truncation marker: a long_context `ls` or `cat` must not flood every prompt's state view.
RESULT_ENTRY_MAX_CHARS = 600  # KernelConfig.result_entry_max_chars; every BFCL multi_turn_base field fits


def result_key(tool: str, field: str) -> str:
    return f"{tool}.{field}"


def result_entries(tool: str, result: dict[str, Any], max_chars: int = RESULT_ENTRY_MAX_CHARS) -> dict[str, Any]:
    """The entries of S a committed call's (wrapped) result produces: ``<tool>.<field>`` for every top-level field.

    The fields are the ones the tool returned, not the ones its output schema documents: an imported
    doc can be wrong (BFCL's send_message promises ``message_id`` and returns ``new_id``) and a missing
    field must not be invented."""
    out: dict[str, Any] = {}
    for name, value in result.items():
        text = json.dumps(value, ensure_ascii=False, default=str)
        out[result_key(tool, str(name))] = value if len(text) <= max_chars else truncation_marker(text)
    return out


def writes(
    spec: ToolSpec, args: dict[str, Any], result: dict[str, Any], max_chars: int = RESULT_ENTRY_MAX_CHARS
) -> dict[str, Any]:
    """Scratchpad entries a committed call produces, in the order they are written: the result entries
    (``<tool>.<field>``), then :func:`declared_writes` (its arguments and the tool's declared writes),
    last, so that these stay the most recent entries of the view, as before result entries existed.
    """
    # a result that echoes a credential under its parameter's name stays out of S too
    out: dict[str, Any] = {
        k: v
        for k, v in result_entries(spec.name, result, max_chars).items()
        if k not in {result_key(spec.name, s) for s in spec.secret}
    }
    out.update(declared_writes(spec, args, result))
    return out


def declared_writes(spec: ToolSpec, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """A committed call's bound arguments (not secret ones) plus the tool's declared writes.

    Declared keys may be templates over the arguments and the result, e.g. ``airport:{params.city}``, or a
    per-entity fact ``line_status[{params.line_id}]``, ``ticket_status[{result.tickets.0.id}]`` (a dotted path
    as in the value expressions); a key whose path does not resolve (a bill has no line_id) is not written.
    """
    out: dict[str, Any] = {k: v for k, v in args.items() if k not in spec.secret}  # credentials stay out of S
    env = {"params": args, "result": result}
    for key_t, expr in spec.writes.items():
        key = key_t
        if "{" in key_t:
            try:
                key = _TEMPLATE_FIELD.sub(lambda m: _template_value(env, m.group(1)), key_t)
            except Exception:
                continue
        if expr.startswith("const:"):
            try:
                out[key] = json.loads(expr[6:])
            except json.JSONDecodeError:
                out[key] = expr[6:]
            continue
        root, _, rest = expr.partition(".")
        if root not in env:
            continue
        val = resolve_path(env[root], rest) if rest else env[root]
        if val is not _MISSING:
            out[key] = val
    return out


_TEMPLATE_FIELD = re.compile(r"\{([^{}]+)\}")


def _template_value(env: dict[str, Any], path: str) -> str:
    """``{params.city}`` -> str(args['city']); ``{result.tickets.0.id}`` follows the path as resolve_path does.
    A path that does not resolve, or a null or container value, raises: the templated write is skipped."""
    root, _, rest = path.partition(".")
    val = resolve_path(env[root], rest) if root in env and rest else _MISSING
    if val is _MISSING or val is None or isinstance(val, (dict, list)):
        raise KeyError(path)
    return str(val)
