"""The plugin interface for simulated tool domains.

A domain is a folder ``kernel/domains/<name>/`` whose ``__init__.py`` exposes
``DOMAIN``: a :class:`Domain` with a pydantic state model, tools registered
with :meth:`Domain.tool` (schema from the signature and docstring, ToolGate
prerequisites, scratchpad writes, semantic postconditions), an initial-state
loader and a JSON snapshot for state comparison; its reference data, the state
its tools start from, is ``data.json`` in the folder. Domains are
deterministic: no real file system, network or clock (the data file is read
once, when the domain is made).

What several domains share lives here too: :func:`find` (an entity by id, or
the "not found" ToolError), :func:`status_is` (a status postcondition) and
:class:`ReferenceData` (a state whose values come from the domain's reference
data, the file ``data.json`` beside its state model, an initial state merged
over them).
A new folder is picked up by tests/test_domains_together.py, which also asks
for worked solutions in data_gen/solutions/<name>/ and a
tests/test_domain_<name>.py that replays them.
"""

from __future__ import annotations

import inspect
import pickle
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError, ValidationInfo, create_model, model_validator

from forethought.errors import UserError

from ..domain_data import data_file_of, read_data_file, refused
from ..registry.model import Prerequisite, Sat, ToolSpec
from ..registry.registry import Registry

PostCheck = Callable[[dict[str, Any], dict[str, Any], Any], "str | None"]
V = TypeVar("V")


class ToolError(Exception):
    """A domain-level failure; the tool returns ``{"error": message}`` (BFCL style)."""


@dataclass
class DomainTool:
    spec: ToolSpec
    fn: Callable[..., Any]
    post: list[PostCheck] = field(default_factory=list)
    domain: str = ""

    def __call__(self, state: Any, args: dict[str, Any]) -> dict[str, Any]:
        try:
            out = self.fn(state, **args)
        except ToolError as exc:
            return {"error": str(exc)}
        if out is None:
            out = {}
        if not isinstance(out, dict):
            out = {"result": out}
        return out


_ARG_LINE = re.compile(r"^\s{2,}(\w+)\s*(?:\([^)]*\))?:\s*(.*)$")


def doc_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    desc_lines, params, cur, in_args = [], {}, None, False
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if line.strip() in ("Returns:", "Raises:"):
                in_args = False
                continue
            match = _ARG_LINE.match("  " + line if not line.startswith("  ") else line)
            if match and not line.startswith("      "):
                cur = match.group(1)
                params[cur] = match.group(2).strip()
            elif cur and line.strip():
                params[cur] += " " + line.strip()
        else:
            desc_lines.append(line)
    return " ".join(x.strip() for x in desc_lines if x.strip()), params


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        """Inline local refs and drop pydantic's generated ``title`` annotations (not properties named title)."""
        if isinstance(node, dict):
            if "$ref" in node and node["$ref"].startswith("#/$defs/"):
                return walk(dict(defs[node["$ref"].split("/")[-1]]))
            out = {}
            for k, value in node.items():
                if k == "title" and isinstance(value, str):
                    continue
                out[k] = (
                    {name: walk(sub) for name, sub in value.items()}
                    if k == "properties" and isinstance(value, dict)
                    else walk(value)
                )
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def schema_from_signature(
    fn: Callable[..., Any], descriptions: dict[str, str], *, skip_first: bool = True
) -> dict[str, Any]:
    """The JSON Schema of ``fn``'s parameters (after the first, the domain state or ``self``, unless ``skip_first`` is
    False), each described from the docstring."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    fields = {}
    for i, (pname, parameter) in enumerate(sig.parameters.items()):
        if i == 0 and skip_first:  # the domain state
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ValueError(
                f"{fn.__qualname__}: *{pname} / **{pname} cannot be a tool's parameter (a schema names each one)"
            )
        ann = hints.get(pname, Any)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[pname] = (ann, default)
    model = create_model(f"{fn.__name__}_params", **fields)  # type: ignore[call-overload]
    schema = _inline_refs(model.model_json_schema())
    schema.pop("title", None)
    for pname, prop in schema.get("properties", {}).items():
        if pname in descriptions:
            prop["description"] = descriptions[pname]
        # Optional[X] = None renders as anyOf[X, null]; keep it simple for prompts.
        if "anyOf" in prop and any(s.get("type") == "null" for s in prop["anyOf"]):
            rest = [s for s in prop["anyOf"] if s.get("type") != "null"]
            if len(rest) == 1:
                del prop["anyOf"]
                prop.update(rest[0])
                prop["nullable"] = True
    schema.setdefault("required", [])
    schema["type"] = "object"
    return schema


def find(table: Mapping[Any, V], key: Any, what: str) -> V:
    """``table[key]``, or the ToolError every domain gives for an id it does not hold: ``<what> <key!r> not found``."""
    found = table.get(key)
    if found is None:
        raise ToolError(f"{what} {key!r} not found")
    return found


def status_is(table: str, id_param: str, status: str, what: str, *, name: str, quote: bool = False) -> PostCheck:
    """A postcondition: the entity that the ``id_param`` argument names in ``state.<table>`` has ``status`` now.

    The message names it as ``<what> <id> is not <status>`` (``quote``: the id as its repr); ``name`` is the
    check's name in a report that it could not be evaluated."""

    def check(args: dict[str, Any], result: dict[str, Any], state: Any) -> str | None:
        key = args[id_param]
        entity = getattr(state, table).get(key)
        if entity is None or entity.status != status:
            return f"{what} {key!r} is not {status}" if quote else f"{what} {key} is not {status}"
        return None

    check.__name__ = name
    return check


# The validation context that checks a data file as written: nothing is filled in from the file while it is checked.
_AS_WRITTEN = "reference_data_as_written"
_REFERENCE: dict[type, dict[str, Any]] = {}
_REFERENCE_PICKLED: dict[type, bytes] = {}


class ReferenceData(BaseModel):
    """A domain state, or one record of it, whose values start from the domain's reference data: the JSON file
    ``data.json`` beside the module that defines the model (read by kernel/domain_data.py, once). The model holds
    structure only, the file the values.

    A field the input leaves out takes the file's value. A table named in ``merged_tables`` that the input gives is
    merged over the file's (an entry under the same key replaced), so an initial state lists only what it adds or
    changes; any other field the input gives replaces the file's. ``data_section`` is where the model's values sit in
    the file: ``()`` for the domain's state, which checks the whole file against itself when its domain is made, a
    field name for a record of it (``("account",)``)."""

    data_section: ClassVar[tuple[str, ...]] = ()
    merged_tables: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        unknown = [name for name in cls.merged_tables if name not in cls.model_fields]
        if unknown:
            raise TypeError(f"{cls.__name__}.merged_tables names {unknown}: not fields of the model")

    @classmethod
    def reference_data(cls) -> dict[str, Any]:
        """The model's values in its data file, checked against the model where the model is the whole file
        (a :class:`~forethought.errors.UserError` naming the file and the field it refuses)."""
        cached = _REFERENCE.get(cls)
        if cached is not None:
            return cached
        path = data_file_of(cls.__module__)
        values: Any = read_data_file(path)
        for key in cls.data_section:
            values = values.get(key) if isinstance(values, dict) else None
        if not isinstance(values, dict):
            section = ".".join(cls.data_section)
            raise UserError(f"{section}: missing or not an object (the fields of {cls.__name__})", str(path))
        if not cls.data_section:
            try:
                cls.model_validate(values, context={_AS_WRITTEN: True})
            except ValidationError as exc:
                raise refused(path, exc) from None
        _REFERENCE[cls] = values
        _REFERENCE_PICKLED[cls] = pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)
        return values

    @classmethod
    def reference_data_copy(cls) -> dict[str, Any]:
        """A fresh copy of :meth:`reference_data`, for a state to own (a pickle round trip: faster than a deep copy)."""
        if cls not in _REFERENCE_PICKLED:
            cls.reference_data()
        return pickle.loads(_REFERENCE_PICKLED[cls])

    @model_validator(mode="before")
    @classmethod
    def _start_from_reference_data(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or (info.context or {}).get(_AS_WRITTEN):
            return data
        filled = dict(data)
        for key, value in cls.reference_data_copy().items():
            if key not in filled:
                filled[key] = value
            elif key in cls.merged_tables and isinstance(filled[key], dict) and isinstance(value, dict):
                filled[key] = {**value, **filled[key]}
        return filled


class Domain:
    def __init__(self, name: str, state_model: type[BaseModel], description: str = ""):
        self.name = name
        self.state_model = state_model
        self.description = description
        self.tools: dict[str, DomainTool] = {}
        if issubclass(state_model, ReferenceData):  # read and checked now: a domain reads no file while it runs
            state_model.reference_data()

    def tool(
        self,
        *,
        side_effect: bool = False,
        prerequisites: Iterable[Prerequisite | str] = (),
        writes: dict[str, str] | None = None,
        post: Iterable[PostCheck] = (),
        output_schema: dict[str, Any] | None = None,
        alternatives: Iterable[str] = (),
        secret: Iterable[str] = (),
        name: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a tool; its schema comes from the signature (first parameter: the state)."""

        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            tname = name or fn.__name__
            if tname in self.tools:
                raise ValueError(f"domain {self.name!r}: duplicate tool {tname!r}")
            desc, pdesc = doc_parts(fn)
            prereqs = [p if isinstance(p, Prerequisite) else Prerequisite(key=p, sat=Sat()) for p in prerequisites]
            try:
                spec = ToolSpec(
                    name=tname,
                    description=desc,
                    parameters=schema_from_signature(fn, pdesc),
                    output_schema=output_schema,
                    side_effect=side_effect,
                    prerequisites=prereqs,
                    writes=dict(writes or {}),
                    alternatives=list(alternatives),
                    secret=list(secret),
                    domain=self.name,
                    source="domain",
                )
            except ValidationError as exc:  # e.g. a per-entity prerequisite naming a parameter the tool lacks
                first = exc.errors()[0]
                raise ValueError(f"domain {self.name!r}, tool {tname!r} ({fn.__module__}): {first['msg']}") from None
            self.tools[tname] = DomainTool(spec, fn, list(post), self.name)
            return fn

        return wrap

    # -------------------------------------------------------------- state
    def load_state(self, data: dict[str, Any] | None) -> BaseModel:
        try:
            return self.state_model.model_validate(data or {})
        except ValidationError as exc:
            error = exc.errors()[0]
            loc = ".".join(str(p) for p in error["loc"])
            raise ValueError(f"initial state of domain {self.name!r}: {loc}: {error['msg']}") from None

    def snapshot(self, state: BaseModel) -> dict[str, Any]:
        return state.model_dump(mode="json")

    def copy_state(self, state: BaseModel) -> BaseModel:
        """An exact, independent copy to stage a call on.

        A pickle round trip: faster than ``model_copy(deep=True)`` here, and unlike
        dump + validate it runs no validators (a state validator that merges
        reference data would otherwise resurrect entities a tool removed).
        """
        return pickle.loads(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))

    def registry(self, names: Iterable[str] | None = None) -> Registry:
        chosen = list(names) if names is not None else list(self.tools)
        unknown = [n for n in chosen if n not in self.tools]
        if unknown:
            raise KeyError(f"domain {self.name!r} has no tools {unknown}")
        return Registry((self.tools[n].spec for n in chosen), name=self.name)
