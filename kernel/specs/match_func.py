"""match_func: the one listed tool that performs a unit task, or null (the paper's SP5, Match)."""

from __future__ import annotations

import random
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict

from forethought.primitives import Check

from ..decoding import with_format
from .adapter import NOT_SHOWN, Label
from .base import Annotation, GenerationRules, PrimitiveSpec, Retrieval
from .demonstrations import Demonstration
from .shared import (
    MAX_TASKS,
    Lines,
    TaskRef,
    ToolBrief,
    inline_json,
    tool_enum,
    tool_map,
)


class MatchFuncInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: TaskRef
    # Train solutions' tasks nearest to this one, each with its tool (kernel/specs/demonstrations.py); None: no
    # store is active, and the prompt has no such line.
    similar_tasks: Annotated[list[Demonstration] | None, Label("Similar tasks")] = None
    tools: list[ToolBrief]


def _similar_lines(inp: MatchFuncInput) -> Any:
    if inp.similar_tasks is None:
        return NOT_SHOWN
    return Lines("\n".join(f"- {d.task}: {inline_json(d.tool_name)}" for d in inp.similar_tasks))


def _match_stored(inp: MatchFuncInput, target: MatchFuncOutput) -> tuple[str, str] | None:
    """A train decision's task and its tool (a null answer is not a demonstration of any tool)."""
    return (inp.task.text, target.tool_name) if target.tool_name is not None else None


def _match_query(inp: MatchFuncInput) -> tuple[str, list[str]]:
    return inp.task.text, [t.name for t in inp.tools]


class MatchFuncOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_name: Annotated[str | None, Label("function")]  # the trace views' name for the decision


def _match_without_target(inp: MatchFuncInput, raw: Any, names: frozenset[str]) -> tuple[Any, Any] | None:
    """The task with its tool (and the tool's alternatives) taken off the list: no listed tool performs it, so the
    answer is null. Near-miss look-alikes stay: telling them apart from the missing tool is the point."""
    if not isinstance(raw, dict) or raw.get("tool_name") is None:
        return None
    tools = [t for t in inp.tools if t.name not in names]
    if len(tools) == len(inp.tools) or not tools:
        return None
    return inp.model_copy(update={"tools": tools}), {"tool_name": None}


def _match_described(inp: MatchFuncInput, pick: float) -> tuple[Any, Any] | None:
    """The task written as one listed tool's own description, answered with that tool. A tool whose description
    another listed tool shares is never picked (the answer would be ambiguous)."""
    descriptions = [tool.description for tool in inp.tools]
    described = [tool for tool in inp.tools if tool.description and descriptions.count(tool.description) == 1]
    if not described:
        return None
    tool = described[int(pick * len(described))]
    task = inp.task.model_copy(update={"text": tool.description, "tool_name": None})
    return inp.model_copy(update={"task": task}), {"tool_name": tool.name}


def _match_registered(inp: MatchFuncInput, out: MatchFuncOutput) -> str | None:
    if out.tool_name is not None and out.tool_name not in tool_map(inp.tools):
        return f"tool {out.tool_name!r} is not in the registry"
    return None


def _match_schema(inp: MatchFuncInput, max_tasks: int = MAX_TASKS) -> dict[str, Any]:
    return with_format(
        {
            "type": "object",
            "properties": {"tool_name": tool_enum(inp.tools, True)},
            "required": ["tool_name"],
            "additionalProperties": False,
        }
    )


def _match_oracle(inp: MatchFuncInput, ann: Annotation) -> dict[str, Any]:
    annotated = ann.tasks.get(inp.task.id)
    return {"tool_name": annotated.match if annotated is not None else None}


def _match_corrupt(ans: dict[str, Any], rng: random.Random, tools: list[str]) -> str:
    kind = rng.choice(["wrong_tool", "unregistered_tool", "null"])
    cur = ans.get("tool_name")
    ans["tool_name"] = {
        "wrong_tool": rng.choice([x for x in tools if x != cur] or [None]),
        "unregistered_tool": (cur or "tool") + "_v2",
        "null": None,
    }[kind]
    return kind


MATCH_FUNC = PrimitiveSpec(
    name="match_func",
    instructions=(
        "Given one unit task and a tool list, choose the one tool that performs it, spelled exactly as listed; "
        "null if none applies."
    ),
    input_type=MatchFuncInput,
    output_type=MatchFuncOutput,
    checks=(Check("tool_registered", "value", _match_registered),),
    canonical_fn=lambda out: out.tool_name,
    decoding_schema=_match_schema,
    oracle=_match_oracle,
    default_size=1600,
    gate_threshold=0.95,  # Table 5: 96.9
    noise_kinds=("wrong_tool", "unregistered_tool", "null"),
    corrupt=_match_corrupt,
    generation=GenerationRules(without_target=_match_without_target, tool_description=_match_described),
    shown_as={"similar_tasks": _similar_lines},
    retrieval=Retrieval(field="similar_tasks", stored=_match_stored, query=_match_query),
)
