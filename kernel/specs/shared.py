"""What the primitives share: the models they read and write (tools, tasks, conditions), how a prompt shows a tool
list (the process's tool rendering), and the grounding helpers of their contracts and decoding schemas."""

from __future__ import annotations

import contextlib
import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from ..grounding import Haystack

# The declared fan-out of a turn (KernelConfig.max_tasks' default): decompose's decoding schema bounds its task list by it.
MAX_TASKS = 12


# ----------------------------------------------------------------- shared models
class ToolBrief(BaseModel):
    """What a primitive sees of a tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    params: dict[str, str] = Field(default_factory=dict)  # name -> short type ("string", "number", "enum[a|b]")
    required: list[str] = Field(default_factory=list)
    writes: list[str] = Field(default_factory=list)  # scratchpad keys a successful call sets
    # whether a call changes the world (the registry's side_effect): check_prerequisites' contract reads it, the
    # prompt does not show it (the tool's name and description say it to the model)
    side_effect: bool = False


class TaskRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str
    tool_name: str | None = None


# Conditional and fan-out tasks (docs/kernel.md, "Conditional and fan-out tasks"). The predicates take the
# prerequisites' operators (kernel/registry/model.py SatOp) plus three on strings, for filtering names.
ConditionOp = Literal[
    "truthy", "not_null", "eq", "ne", "in", "gt", "gte", "lt", "lte", "startswith", "endswith", "contains"
]


class TaskCondition(BaseModel):
    """``when``: the task runs only if S's value under ``key`` satisfies ``op`` ``value``; evaluated right before it runs."""

    model_config = ConfigDict(extra="forbid")
    key: str  # a scratchpad key: a declared write ("line_status") or a result entry ("get_details_by_id.line_status")
    op: ConditionOp = "truthy"
    value: Any = None


class ItemFilter(BaseModel):
    """``for_each.where``: keep an element whose ``field`` (the element itself when null) satisfies ``op`` ``value``."""

    model_config = ConfigDict(extra="forbid")
    field: str | None = None
    op: ConditionOp = "truthy"
    value: Any = None


class FanOut(BaseModel):
    """``for_each``: run the task once per element of the list field ``field`` of task ``task``'s result,
    the element (or its ``item_field``) bound to parameter ``param`` of that instance."""

    model_config = ConfigDict(extra="forbid")
    task: str  # an id in the task's depends_on
    field: str  # a field of that task's result (S entry "<tool>.<field>", as its call wrote it)
    param: str  # the parameter each element binds to
    item_field: str | None = None  # for elements that are objects: the field that is the value
    where: ItemFilter | None = None


class UnitTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str
    tool_name: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
    # decompose's system prompt ends with these two descriptions (kernel/specs/adapter.py), after its instructions;
    # the last two sentences of for_each's are about both fields.
    when: TaskCondition | None = Field(
        default=None,
        description='A task the user wants only if something holds ("if the line is suspended, resume it") gets '
        '"when": {"key", "op", "value"}, a test of a state key or of a result field "<tool>.<field>" of a task it '
        "depends on, checked right before it runs.",
    )
    for_each: FanOut | None = Field(
        default=None,
        description="A task the user wants for every element of a list that another task returns "
        '("add each of them") gets "for_each": {"task", "field", "param", "item_field", "where"}: the id of that task '
        "(in depends_on), the list field of its result, the parameter each element binds to (not stated in "
        "parameters), the element field that is the value (null: the element itself) and an optional filter "
        '{"field", "op", "value"}. Ops: ' + ", ".join(get_args(ConditionOp)) + ". Otherwise both are null.",
    )


class ProposedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_name: str
    parameters: dict[str, Any] = Field(default_factory=dict)


def whole_numbers(value: Any) -> Any:
    """Integral floats as ints, everything else (key order included) as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    first = text.split(". ")[0]
    return first if len(first) <= n else first[: n - 1] + "…"


def inline_json(value: Any) -> str:
    """A value as a prompt line writes it: JSON on one line, ``, `` and ``: `` between items."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


# How a prompt shows a tool list (docs/primitives.md, "Tool rendering"). ``full``: every parameter with its type and
# the description's first sentence (up to 80 characters). ``compact``: a string parameter without its type (the
# usual one), and the description's first clause (up to 48 characters): about half the prompt tokens on the
# generated data (docs/training.md), for small models whose compute goes into reading prompts. The rendering is
# part of every spec's hash, recorded with the data, the adapters and the bundle, and the kernel renders as the
# bundle was trained (training and serving see the same prompt). ``focused``: compact, and check_prerequisites lists
# only the tools its contract admits for the key (the writers of the kind its outcome calls for, ``_prereq_writers``),
# not the whole registry: its grammar admits no other tool, so the rest of the list is prompt the model pays for and
# must learn to ignore (about a third of the prompt tokens on the generated data; docs/training.md).
# ``valued``: focused, and check_prerequisites writes beside each string parameter of a listed tool that the turn's
# context names that value (``get_customer_by_phone(phone_number="555-263-1192")``): the proposal's parameters come
# from the context by name in 99.3 % of its train targets, and a small model shown the pair instead of two distant
# lines sends the right ones more often (docs/training.md, "Probe after run #6": 85.2 against 81.0 % dev exact match).
# One rendering per process (not per context: the engine and the openai backend render in worker threads).
TOOL_RENDERINGS = ("full", "compact", "focused", "valued")
COMPACT_RENDERINGS = ("compact", "focused", "valued")
FOCUSED_RENDERINGS = ("focused", "valued")  # check_prerequisites lists only the tools its contract admits
_TOOL_RENDERING = ["full"]


def active_tool_rendering() -> str:
    return _TOOL_RENDERING[0]


def set_tool_rendering(style: str) -> None:
    """Render every prompt of this process with ``style``; a command sets it from the data or the bundle it works
    on, before it renders or hashes anything."""
    if style not in TOOL_RENDERINGS:
        raise ValueError(f"unknown tool rendering {style!r}; expected one of {', '.join(TOOL_RENDERINGS)}")
    _TOOL_RENDERING[0] = style


@contextlib.contextmanager
def tool_rendering(style: str) -> Iterator[None]:
    """``with tool_rendering("compact"):`` prompts and spec hashes inside the block use that rendering."""
    before = active_tool_rendering()
    set_tool_rendering(style)
    try:
        yield
    finally:
        _TOOL_RENDERING[0] = before


def _clause(text: str, n: int) -> str:
    text = " ".join(text.split())
    first = re.split(r"[.;:(]\s|, (?:and |or |which |so |but )|\s[-–—]\s", text, maxsplit=1)[0].rstrip(".;:, ")
    return first if len(first) <= n else first[: n - 1].rstrip() + "…"


class Lines(str):
    """A field's value already written as its lines: the adapter puts it below the label (``(none)`` when empty)."""


class ToolLines(Lines):
    """A tool list already written as its lines (a primitive that renders its list itself): the adapter puts it
    below the label, as it does a list of :class:`ToolBrief`."""


def render_tools(tools: Sequence[ToolBrief], values: Mapping[str, Any] | None = None) -> str:
    """The tool list's lines; ``values``: a string parameter named there is written with that value
    (``phone_number="555-263-1192"``)."""
    compact = _TOOL_RENDERING[0] in COMPACT_RENDERINGS
    values = values or {}
    lines = []
    for tool in tools:
        if compact:
            ps = ", ".join(
                f"{p}{'' if p in tool.required else '?'}"
                + ("" if ty == "string" else ": " + ty)
                + (f"={inline_json(values[p])}" if ty == "string" and p in values else "")
                for p, ty in tool.params.items()
            )
            lines.append(f"- {tool.name}({ps}): {_clause(tool.description, 48)}")
        else:
            ps = ", ".join(f"{p}{'' if p in tool.required else '?'}: {ty}" for p, ty in tool.params.items())
            lines.append(f"- {tool.name}({ps}): {_short(tool.description)}")
    return "\n".join(lines) or "(none)"


_LAST_MAP: list[Any] = [None, None]


def tool_map(tools: Sequence[ToolBrief]) -> dict[str, ToolBrief]:
    # Contract checks ask for the same registry list many times in a row (it is shared per turn).
    if _LAST_MAP[0] is not tools:
        _LAST_MAP[0], _LAST_MAP[1] = tools, {t.name: t for t in tools}
    return _LAST_MAP[1]


def tool_enum(tools: Sequence[ToolBrief], nullable: bool) -> dict[str, Any]:
    names: list[Any] = [t.name for t in tools]
    return {"enum": names + ([None] if nullable else [])}


def hallucinated(rng: random.Random) -> str:
    return "hallucinated-" + str(rng.randint(100, 999))


def grounded_params(
    tool: ToolBrief | None, params: dict[str, Any], hay: Haystack, enums: dict[str, list[str]]
) -> str | None:
    bad = [f"{k}={v!r}" for k, v in params.items() if not hay.contains(v, enums.get(k))]
    if bad:
        return "values not grounded in the request, context or scratchpad: " + ", ".join(bad)
    return None


_ENUMS: dict[int, tuple[ToolBrief, dict[str, list[str]]]] = {}


def tool_enums(tool: ToolBrief | None) -> dict[str, list[str]]:
    if tool is None:
        return {}
    hit = _ENUMS.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    out = {}
    for param, kind in tool.params.items():
        if kind.startswith("enum[") and kind.endswith("]"):
            out[param] = kind[5:-1].split("|")
    if len(_ENUMS) < 20000:
        _ENUMS[id(tool)] = (tool, out)
    return out


def unknown_params(tool: ToolBrief, params: dict[str, Any]) -> list[str]:
    return [k for k in params if k not in tool.params]


def in_tool_order(tool: ToolBrief | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters in the tool's declared order (any it does not declare last): the one order the decoding grammar
    writes them in, so the target a model learns is always one it may decode."""
    rank = {p: i for i, p in enumerate(tool.params)} if tool is not None else {}
    return dict(sorted(params.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def _short_type(schema: dict[str, Any]) -> str:
    if "const" in schema and "enum" not in schema:  # a one-value Literal renders as const
        return f"enum[{schema['const']}]"
    if "enum" in schema:
        return "enum[" + "|".join(str(v) for v in schema["enum"]) + "]"
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "|".join(x for x in kind if x != "null")
    if kind == "array":
        item = schema.get("items", {})
        return f"list[{_short_type(item) if item else 'any'}]"
    if kind is None and "anyOf" in schema:
        return "|".join(_short_type(s) for s in schema["anyOf"] if s.get("type") != "null")
    return kind or "any"


_BRIEFS: dict[int, tuple[Any, ToolBrief]] = {}


def tool_brief(spec: Any) -> ToolBrief:
    """The view of a registry ToolSpec that primitives see (cached per spec object)."""
    hit = _BRIEFS.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    brief = _make_brief(spec)
    if len(_BRIEFS) < 20000:
        _BRIEFS[id(spec)] = (spec, brief)
    return brief


def _make_brief(spec: Any) -> ToolBrief:
    props = spec.parameters.get("properties", {})
    return ToolBrief(
        name=spec.name,
        description=_short(spec.description, 100),
        params={p: _short_type(s) for p, s in props.items()},
        required=list(spec.parameters.get("required", [])),
        writes=sorted(spec.writes),
        side_effect=bool(spec.side_effect),
    )
