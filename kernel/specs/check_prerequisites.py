"""check_prerequisites: for a task's prerequisite key that is absent or not met, the one unit task that establishes
it (a retrieval, or a remedy), or null (the paper's SP4)."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forethought.primitives import Check

from ..decoding import SchemaBuilder, ValueSpace
from ..grounding import Haystack, normalize
from ..registry.model import entity_key, fact_of
from ..scratchpad import bindable
from .adapter import NOT_SHOWN, Label
from .base import Annotation, PrimitiveSpec
from .shared import (
    FOCUSED_RENDERINGS,
    MAX_TASKS,
    ProposedTask,
    TaskRef,
    ToolBrief,
    ToolLines,
    active_tool_rendering,
    grounded_params,
    in_tool_order,
    inline_json,
    render_tools,
    tool_enums,
    tool_map,
    unknown_params,
)


class CheckPrereqInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: Annotated[TaskRef, Label("Main task")]
    key: Annotated[str, Label("Prerequisite")]  # its line also shows outcome, current and requirement
    outcome: Literal["absent", "not_met"]
    current: Any = None  # S(key) when not_met
    requirement: str = ""  # the predicate, in words
    context: dict[str, Any] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict)
    tools: list[ToolBrief]


class CheckPrereqOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: ProposedTask | None


def _prerequisite_line(inp: CheckPrereqInput) -> str:
    """The key, its outcome, S's value when not met and the requirement, in one line (the "Prerequisite" line)."""
    cur = f" (current value: {inline_json(inp.current)})" if inp.outcome == "not_met" else ""
    return f"{inp.key} is {inp.outcome}{cur}; required: {inp.requirement or 'present'}"


def _shown_tools(inp: CheckPrereqInput) -> list[ToolBrief] | ToolLines:
    # the focused renderings list only the tools the contract admits for the key (docs/primitives.md); valued also
    # writes the context's value beside each string parameter it names
    style = active_tool_rendering()
    if style == "valued":
        return ToolLines(render_tools(_prereq_writers(inp), values=inp.context))
    return _prereq_writers(inp) if style in FOCUSED_RENDERINGS else inp.tools


def _prereq_tool(inp: CheckPrereqInput, out: CheckPrereqOutput) -> str | None:
    if out.task is None:
        return None
    tool = tool_map(inp.tools).get(out.task.tool_name)
    if tool is None:
        return f"tool {out.task.tool_name!r} is not in the registry"
    extra = unknown_params(tool, out.task.parameters)
    if extra:
        return f"{tool.name} has no parameters {extra}"
    if not establishes(tool.writes, inp.key, out.task.parameters):
        return f"{tool.name} does not establish {inp.key!r} with these parameters (it sets {tool.writes or 'nothing'})"
    return None


def establishes(writes: Sequence[str], key: str, params: Mapping[str, Any] | None = None) -> bool:
    """Whether a tool whose declared writes are ``writes`` establishes the scratchpad key ``key``: the key itself,
    or for a per-entity key (``line_status[L-9009]``) a per-entity write of the same fact (``line_status[{params.line_id}]``).

    Given the call's ``params``, a write templated by a parameter must name the key's entity: ``get_ticket`` with
    ``ticket_id`` 57 sets ``ticket_status[57]``, not ``ticket_status[15]``. A write templated by the result
    (``line_status[{result.line_id}]``) names its entity only after the call, so it is taken on trust."""
    if key in writes:
        return True
    if fact_of(key) == key:
        return False
    return any(_entity_write_names(w, key, params) for w in writes if fact_of(w) == fact_of(key) and fact_of(w) != w)


_PARAM_ENTITY = re.compile(r"\{params\.([A-Za-z_][A-Za-z0-9_]*)\}")


def _entity_param(write: str) -> str | None:
    """The parameter a per-entity write's entity is (``line_status[{params.line_id}]`` -> ``line_id``), if it is one."""
    match = _PARAM_ENTITY.fullmatch(write[len(fact_of(write)) + 1 : -1])
    return match.group(1) if match else None


def _entity_write_names(write: str, key: str, params: Mapping[str, Any] | None) -> bool:
    name = _entity_param(write)
    if name is None or params is None or key.endswith("[]"):  # key[]: no entity known, none to name
        return True
    return name in params and entity_key(fact_of(key), params[name]) == key


def _bound_entity(tool: ToolBrief, key: str) -> tuple[str, Any] | None:
    """The parameter a tool must set, and its value, so that its call establishes the per-entity ``key``: when every
    write of the key's fact is templated by that one parameter; or, when they are templated by the result
    (``line_status[{result.line_id}]``), when the tool's one parameter is a required identifier (``id``, ``*_id``):
    a lookup by id names the entity it reports on (``get_details_by_id`` of ``L-9009`` for ``line_status[L-9009]``;
    every such target of the worked solutions does, docs/kernel.md). A lookup by anything else (a phone number)
    is left to the contract, which takes a result-templated write on trust."""
    writes = [w for w in tool.writes if fact_of(w) == fact_of(key) and fact_of(w) != w]
    names = {_entity_param(w) for w in writes}
    if key in tool.writes or not writes or key.endswith("[]"):
        return None
    by_result = (
        names == {None}
        and list(tool.params) == list(tool.required) == [p for p in tool.params if p == "id" or p.endswith("_id")]
        and len(tool.params) == 1
    )
    if by_result:
        names = set(tool.params)
    if len(names) != 1 or None in names:
        return None
    (name,) = names
    entity = key[len(fact_of(key)) + 1 : -1]
    kind = tool.params.get(name, "")
    if kind == "integer" and re.fullmatch(r"-?\d+", entity):
        return name, int(entity)
    if kind == "number" and re.fullmatch(r"-?\d+(\.\d+)?", entity):
        return name, float(entity) if "." in entity else int(entity)
    if by_result and kind != "string":
        return None  # the one parameter cannot hold this entity as written: the contract judges the call
    return name, entity


def _prereq_writers(inp: CheckPrereqInput) -> list[ToolBrief]:
    """The listed tools that may answer: those that establish the key, of the kind its outcome calls for.

    A fact about one entity (``line_status[L-9009]``, ``ticket_status[21]``) that is *absent* is read before it is
    changed: when a read-only tool establishes it, only those may be proposed (the remedy comes, if it must, once
    the retrieval shows the value not met). A session flag (``trading_logged_in``) is not: logging in is how it is
    learnt, and the worked solutions do so. A key present but *not met* is not changed by reading it again: when a
    tool with a side effect establishes it, only those may be proposed (with none, another read-only lookup may:
    a user not found by email is looked up by name)."""
    writers = [t for t in inp.tools if establishes(t.writes, inp.key)]
    if inp.outcome == "not_met":
        kind = [t for t in writers if t.side_effect]
    elif fact_of(inp.key) != inp.key:
        kind = [t for t in writers if not t.side_effect]
    else:
        kind = []
    return kind or writers


def _prereq_kind(inp: CheckPrereqInput, out: CheckPrereqOutput) -> str | None:
    if out.task is None:
        return None
    tool = tool_map(inp.tools).get(out.task.tool_name)
    if tool is None or tool in _prereq_writers(inp) or not establishes(tool.writes, inp.key):
        return None  # an unknown tool or one that does not establish the key: establishes_key says so
    others = ", ".join(writer.name for writer in _prereq_writers(inp))
    if inp.outcome == "not_met":
        return f"{tool.name} only reads {inp.key!r}, which is present but not met: {others} changes it"
    return f"{inp.key!r} is absent and {others} reads it without a side effect: retrieve it before {tool.name}"


def _prereq_grounded(inp: CheckPrereqInput, out: CheckPrereqOutput) -> str | None:
    if out.task is None:
        return None
    haystack = Haystack([inp.task.text], [inp.context, bindable(inp.state)])
    tool = tool_map(inp.tools).get(out.task.tool_name)
    return grounded_params(tool, out.task.parameters, haystack, tool_enums(tool))


def _prereq_schema(inp: CheckPrereqInput, max_tasks: int = MAX_TASKS) -> dict[str, Any]:
    """A tool that establishes the key (none: only null), its parameters, each grounded in the task, context or state."""
    builder = SchemaBuilder(ValueSpace([inp.task.text], [inp.context, bindable(inp.state)]))
    task = []
    for tool in _prereq_writers(inp):
        params = builder.parameters(tool.params)
        bound = _bound_entity(tool, inp.key)
        if bound is not None:  # the call must name the key's entity (establishes, given the parameters)
            params = {
                **params,
                "properties": {**params["properties"], bound[0]: {"const": bound[1]}},
                "required": [bound[0]],
            }
        task.append(
            {
                "type": "object",
                "properties": {"tool_name": {"const": tool.name}, "parameters": params},
                "required": ["tool_name", "parameters"],
                "additionalProperties": False,
            }
        )
    return builder.finish(
        {
            "type": "object",
            "properties": {"task": {"anyOf": [*task, {"type": "null"}]}},
            "required": ["task"],
            "additionalProperties": False,
        }
    )


def _prereq_oracle(inp: CheckPrereqInput, ann: Annotation) -> dict[str, Any]:
    annotated = ann.tasks.get(inp.task.id)
    for prerequisite in annotated.prerequisites if annotated is not None else []:
        if prerequisite.key != inp.key:
            continue
        task = prerequisite.retrieval if inp.outcome == "absent" else prerequisite.remediation
        if task is None:
            return {"task": None}
        return {
            "task": {
                "tool_name": task.tool_name,
                "parameters": in_tool_order(tool_map(inp.tools).get(task.tool_name), task.parameters),
            }
        }
    return {"task": None}


def _prereq_corrupt(ans: dict[str, Any], rng: random.Random, tools: list[str]) -> str:
    if ans.get("task") is None or rng.random() < 0.4:
        ans["task"] = {"tool_name": rng.choice(tools or ["x"]), "parameters": {}}
        return "wrong_tool"
    ans["task"] = None
    return "null"


CHECK_PREREQUISITES = PrimitiveSpec(
    name="check_prerequisites",
    instructions=(
        "A task's prerequisite key is absent from the scratchpad or present but not met. Propose at most one "
        "unit task, calling a listed tool that establishes the key, with parameter values taken from the task, "
        "context or state; null if no listed tool can."
    ),
    input_type=CheckPrereqInput,
    output_type=CheckPrereqOutput,
    checks=(
        Check("establishes_key", "value", _prereq_tool),
        Check("retrieval_before_remedy", "value", _prereq_kind),
        Check("values_grounded", "value", _prereq_grounded),
    ),
    canonical_fn=lambda out: (
        None if out.task is None else {"tool_name": out.task.tool_name, "parameters": normalize(out.task.parameters)}
    ),
    decoding_schema=_prereq_schema,
    oracle=_prereq_oracle,
    default_size=4867,
    gate_threshold=0.85,  # Table 5: 87.4
    noise_kinds=("wrong_tool", "null"),
    corrupt=_prereq_corrupt,
    shown_as={
        "key": _prerequisite_line,
        "outcome": lambda x: NOT_SHOWN,
        "current": lambda x: NOT_SHOWN,
        "requirement": lambda x: NOT_SHOWN,
        "tools": _shown_tools,
    },
    # one task may be asked about several keys, and about one key twice (absent, then not met after the retrieval)
    keyed_by=lambda inp: f"{inp.task.id} {inp.key} {inp.outcome}",
)
