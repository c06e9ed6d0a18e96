"""The one internal tool schema every registry format is imported into.

A tool's parameters are a JSON Schema object (``type: object`` with
``properties`` and ``required``). Kernel-specific facts ride along:
prerequisites (ToolGate preconditions on the scratchpad), the scratchpad keys
a successful call writes, declared alternative tools, and whether the call
has side effects.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SatOp = Literal["truthy", "not_null", "eq", "ne", "in", "gt", "gte", "lt", "lte"]


class Sat(BaseModel):
    """A symbolic satisfaction predicate on one scratchpad value."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    op: SatOp = "truthy"
    value: Any = None


class Prerequisite(BaseModel):
    """A fact a tool needs in the scratchpad before it may run."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str
    sat: Sat = Field(default_factory=Sat)
    description: str = ""


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
    domain: str | None = None
    source: str = "internal"  # internal | openai | mcp | bfcl | domain

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v or not isinstance(v, str):
            raise ValueError("tool name must be a non-empty string")
        return v

    @field_validator("parameters")
    @classmethod
    def _params(cls, v: dict[str, Any]) -> dict[str, Any]:
        if v.get("type", "object") != "object":
            raise ValueError(f"parameters must be a JSON Schema object, got type {v.get('type')!r}")
        props = v.setdefault("properties", {})
        if not isinstance(props, dict):
            raise ValueError("parameters.properties must be an object")
        req = v.setdefault("required", [])
        missing = [r for r in req if r not in props]
        if missing:
            raise ValueError(f"required parameters not in properties: {missing}")
        v["type"] = "object"
        return v

    @property
    def param_names(self) -> list[str]:
        return list(self.parameters.get("properties", {}))

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    def param_schema(self, name: str) -> dict[str, Any]:
        return self.parameters.get("properties", {}).get(name, {})
