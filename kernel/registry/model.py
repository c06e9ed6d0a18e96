"""The one internal tool schema every registry format is imported into.

A tool's parameters are a JSON Schema object (``type: object`` with
``properties`` and ``required``). Kernel-specific facts ride along:
prerequisites (ToolGate preconditions on the scratchpad), the scratchpad keys
a successful call writes, declared alternative tools, and whether the call
has side effects.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

SatOp = Literal["truthy", "not_null", "eq", "ne", "in", "gt", "gte", "lt", "lte"]


class Sat(BaseModel):
    """A symbolic satisfaction predicate on one scratchpad value."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    op: SatOp = "truthy"
    value: Any = None


class Prerequisite(BaseModel):
    """A fact a tool needs in the scratchpad before it may run.

    ``entity`` names the tool parameter that identifies what the fact is about (``line_id`` for a line's
    status): the fact is then checked per entity, under the key ``<key>[<value>]`` (:func:`entity_key`),
    not under the plain ``key`` that the latest read of any entity overwrites (docs/kernel.md,
    "Per-entity prerequisites")."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str
    sat: Sat = Field(default_factory=Sat)
    description: str = ""
    entity: str | None = None


# The entity value of a per-entity key when no value is known: no write ever produces it (an entity-keyed
# write needs the value), so Check finds it Absent.
UNKNOWN_ENTITY = ""


def entity_key(key: str, value: Any) -> str:
    """The scratchpad key of ``key``'s fact about one entity: ``line_status[L-9009]``, ``ticket_status[57]``.

    The value is written as ``str`` does (as a declared write's template ``{params.line_id}`` renders it),
    so a ticket id given as 57 or as "57" names the same entry; None gives ``key[]`` (no entity known)."""
    return f"{key}[{UNKNOWN_ENTITY if value is None else value}]"


def fact_of(key: str) -> str:
    """The fact a scratchpad key is about: ``line_status`` for ``line_status[L-9009]`` and for ``line_status``."""
    head, bracket, _ = key.partition("[")
    return head if bracket and key.endswith("]") else key


# A tool name every major provider accepts (OpenAI's rule; Anthropic's and Gemini's admit the same names) and so one a
# model can be offered. BFCL's function docs name some functions with a dot (``math.factorial``): a tool imported from
# them keeps its name, and is offered to a provider as provider_name() maps it, a reply's name mapped back
# (Registry.tool_for_provider_name).
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
DOTTED_TOOL_NAME = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
DOTTED_SOURCES = ("bfcl",)


def tool_name_problem(name: str, source: str = "internal") -> str | None:
    """Why ``name`` cannot be a tool's name, or None: it must match ``^[a-zA-Z0-9_-]{1,64}$`` (with '.' too for a format
    that uses dotted names, BFCL's), and not be a Python keyword (the kernel writes and reads calls as ``name(arg=value)``)."""
    dotted = source in DOTTED_SOURCES
    if not (DOTTED_TOOL_NAME if dotted else TOOL_NAME).fullmatch(name):
        odd = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "_-" or (dotted and c == ".")))})
        shown = ", ".join(repr(c) + ("" if c.isascii() else f" (U+{ord(c):04X})") for c in odd)
        return (
            f"{name!r} is not a tool name providers accept: 1 to 64 ASCII letters, digits, '_' or '-'"
            + (" or '.'" if dotted else "")
            + (f"; it has {shown}" if odd else f"; it has {len(name)} characters")
        )
    if keyword.iskeyword(name):
        return f"{name!r} is a Python keyword: the kernel's calls (name(arg=value)) cannot name it"
    return None


def provider_name(name: str) -> str:
    """The name a tool is offered under to an OpenAI-compatible provider: a dotted (BFCL) name with '_' for '.'."""
    return name.replace(".", "_")


class ToolSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}, "required": []})
    output_schema: dict[str, Any] | None = None
    side_effect: bool = False
    prerequisites: list[Prerequisite] = Field(default_factory=list)
    # scratchpad key -> "params.<name>" | "result.<dotted.path>" | "const:<json>"
    writes: dict[str, str] = Field(default_factory=dict)
    alternatives: list[str] = Field(default_factory=list)
    # Credentials: passed to the tool but never written to the scratchpad (so never shown to a
    # primitive afterwards). Parameters marked "writeOnly": true in the schema count too.
    secret: list[str] = Field(default_factory=list)
    domain: str | None = None
    source: str = "internal"  # internal | openai | mcp | bfcl | domain
    # What an importer found out, not what a registry file declares: private attributes, so that
    # they stay out of the model's fields and so out of the solution-file schema generated from it
    # (data_gen/solutions/schema.json). Set with record_import().
    _hints: dict[str, bool] = PrivateAttr(default_factory=dict)
    _notes: list[str] = PrivateAttr(default_factory=list)

    def record_import(self, *, hints: dict[str, bool], notes: list[str]) -> ToolSpec:
        self._hints, self._notes = dict(hints), list(notes)
        return self

    @property
    def hints(self) -> dict[str, bool]:
        """MCP's behaviour hints (readOnlyHint, destructiveHint, idempotentHint, openWorldHint) as the
        server sent them over the spec's defaults; empty for other sources. Advisory, as the spec
        says; the kernel acts on side_effect, which an MCP import sets to "not readOnlyHint"."""
        return dict(self._hints)

    @property
    def notes(self) -> list[str]:
        """What the importer noticed and did not act on (a field it does not know, an assumed
        flag), for ``forethought registry check`` to show."""
        return list(self._notes)

    @model_validator(mode="after")
    def _name(self) -> ToolSpec:
        problem = tool_name_problem(self.name, self.source)
        if problem:
            raise ValueError(problem)
        return self

    @field_validator("parameters")
    @classmethod
    def _params(cls, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("type", "object") != "object":
            raise ValueError(f"parameters must be a JSON Schema object, got type {params.get('type')!r}")
        props = params.setdefault("properties", {})
        if not isinstance(props, dict):
            raise ValueError("parameters.properties must be an object")
        req = params.setdefault("required", [])
        missing = [r for r in req if r not in props]
        if missing:
            raise ValueError(f"required parameters not in properties: {missing}")
        params["type"] = "object"
        return params

    @model_validator(mode="after")
    def _secrets(self) -> ToolSpec:
        props = self.parameters.get("properties", {})
        unknown = [p for p in self.secret if p not in props]
        if unknown:
            raise ValueError(f"secret names unknown parameters {unknown}")
        for secret_name in self.secret:
            props[secret_name]["writeOnly"] = True
        self.secret = [p for p, sch in props.items() if isinstance(sch, dict) and sch.get("writeOnly") is True]
        return self

    @model_validator(mode="after")
    def _entities(self) -> ToolSpec:
        props = self.parameters.get("properties", {})
        for i, prerequisite in enumerate(self.prerequisites):
            if prerequisite.entity is not None and prerequisite.entity not in props:
                raise ValueError(
                    f"prerequisites[{i}] ({prerequisite.key!r}): entity {prerequisite.entity!r} is not a parameter of tool "
                    f"{self.name!r} (parameters: {sorted(props)})"
                )
        return self

    @model_validator(mode="after")
    def _writes(self) -> ToolSpec:
        """Each declared write is checked where it is declared: a value expression the kernel can evaluate
        (``params.<parameter>``, ``result[.<path>]``, ``const:<JSON>``) and key fields over ``params.<parameter>``
        or ``result``; a slip (``param.city``, ``const:{bad``) would otherwise write nothing, or a string, at run time."""
        props = self.parameters.get("properties", {})

        def problem(path: str) -> str | None:
            root, _, rest = path.partition(".")
            if root == "result":
                return None
            if root == "params":
                if not rest:  # the whole arguments object
                    return None
                name = rest.split(".", 1)[0]
                return None if name in props else f"{name!r} is not a parameter (parameters: {sorted(props)})"
            return f"{root!r} is neither params.<parameter> nor result"

        for key, expr in self.writes.items():
            if expr.startswith("const:"):
                try:
                    json.loads(expr[len("const:") :])
                except ValueError as exc:
                    raise ValueError(f"writes[{key!r}]: {expr!r} is not const:<JSON> ({exc})") from None
                why = None
            else:
                why = problem(expr)
            why = why or next((problem(f) for f in re.findall(r"\{([^{}]+)\}", key) if problem(f)), None)
            if why:
                raise ValueError(f"writes[{key!r}]: {expr!r}: {why}")
        return self

    @property
    def param_names(self) -> list[str]:
        return list(self.parameters.get("properties", {}))

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    def param_schema(self, name: str) -> dict[str, Any]:
        return self.parameters.get("properties", {}).get(name, {})
