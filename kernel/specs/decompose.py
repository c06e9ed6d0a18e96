"""decompose: a user request into atomic unit tasks, each calling one listed tool, with their dependencies,
parameters, conditions and fan-outs (the paper's SP1)."""

from __future__ import annotations

import random
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from forethought.primitives import Check

from ..decoding import FREE_TEXT, SchemaBuilder, ValueSpace
from ..grounding import Haystack, normalize
from ..scratchpad import bindable
from .adapter import Label
from .base import Annotation, GenerationRules, PrimitiveSpec
from .shared import (
    MAX_TASKS,
    ConditionOp,
    ToolBrief,
    UnitTask,
    grounded_params,
    hallucinated,
    in_tool_order,
    tool_enums,
    tool_map,
    unknown_params,
)


class DecomposeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: Annotated[str, Label("Request")]
    context: dict[str, Any] = Field(default_factory=dict)  # turn context tau
    state: dict[str, Any] = Field(default_factory=dict)  # scratchpad S (as seen this turn)
    tools: list[ToolBrief]


class DecomposeOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tasks: list[UnitTask]


def _dec_ids(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    ids = [task.id for task in out.tasks]
    if len(set(ids)) != len(ids):
        return f"task ids are not unique: {ids}"
    for task in out.tasks:
        missing = [dependency for dependency in task.depends_on if dependency not in ids]
        if missing:
            return f"task {task.id} depends on unknown ids {missing}"
        if task.id in task.depends_on:
            return f"task {task.id} depends on itself"
    return None


def _dec_tools(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    tools_by_name = tool_map(inp.tools)
    for task in out.tasks:
        if task.tool_name is None:
            continue
        if task.tool_name not in tools_by_name:
            return f"task {task.id}: tool {task.tool_name!r} is not in the registry"
        extra = unknown_params(tools_by_name[task.tool_name], task.parameters)
        if extra:
            return f"task {task.id}: {task.tool_name} has no parameters {extra}"
    return None


def _dec_grounded(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    haystack = Haystack([inp.user], [inp.context, bindable(inp.state)])
    tools_by_name = tool_map(inp.tools)
    for task in out.tasks:
        tool = tools_by_name.get(task.tool_name or "")
        problem = grounded_params(tool, task.parameters, haystack, tool_enums(tool))
        if problem:
            return f"task {task.id}: {problem}"
    return None


def _dec_conditions(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    """``when`` and ``for_each`` are well formed: a fan-out reads a task this one depends on and binds a parameter
    of its tool that decompose does not state; the predicates' values are grounded like parameter values."""
    tools_by_name = tool_map(inp.tools)
    haystack = Haystack([inp.user], [inp.context, bindable(inp.state)])
    for task in out.tasks:
        predicates = []
        if task.when is not None:
            if not task.when.key:
                return f"task {task.id}: when needs the scratchpad key it tests"
            predicates.append(("when", task.when.op, task.when.value))
        fan_out = task.for_each
        if fan_out is not None:
            if fan_out.task not in task.depends_on:
                return (
                    f"task {task.id}: for_each reads task {fan_out.task!r}, which is not in its depends_on "
                    f"{task.depends_on}"
                )
            tool = tools_by_name.get(task.tool_name or "")
            if tool is not None and fan_out.param not in tool.params:
                return f"task {task.id}: for_each binds {fan_out.param!r}, which is not a parameter of {tool.name}"
            if task.parameters.get(fan_out.param) is not None:
                return (
                    f"task {task.id}: for_each binds {fan_out.param!r} per element, so its parameters must not state it"
                )
            if fan_out.where is not None:
                predicates.append(("for_each.where", fan_out.where.op, fan_out.where.value))
        for where, op, value in predicates:
            if op in ("truthy", "not_null"):
                if value is not None:
                    return f"task {task.id}: {where} op {op!r} takes no value, got {value!r}"
            elif value is None or not haystack.contains(value):
                return f"task {task.id}: {where} value {value!r} is not grounded in the request, context or scratchpad"
    return None


def _dec_cover(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    if inp.user.strip() and not out.tasks:
        return "a non-empty request was decomposed into no tasks"
    return None


def _dec_canon(out: DecomposeOutput) -> Any:
    # The task text is explanatory; exact match compares the decisions.
    return [
        {
            "id": task.id,
            "tool_name": task.tool_name,
            "depends_on": sorted(task.depends_on),
            "parameters": normalize(task.parameters),
            **({"when": normalize(task.when.model_dump())} if task.when is not None else {}),
            **({"for_each": normalize(task.for_each.model_dump())} if task.for_each is not None else {}),
        }
        for task in out.tasks
    ]


_OPS = {"enum": list(typing.get_args(ConditionOp))}
_NAME_STR = {"type": "string", "maxLength": 80}
_ID = {"type": "string", "maxLength": 12}


def _dec_schema(inp: DecomposeInput, max_tasks: int = MAX_TASKS) -> dict[str, Any]:
    """One variant per registered tool (its parameters, each grounded) and one for "no listed tool"."""
    builder = SchemaBuilder(ValueSpace([inp.user], [inp.context, bindable(inp.state)]))
    value = {"anyOf": [builder.scalar(), {"type": "array", "items": builder.scalar(), "maxItems": 8}]}
    condition = {
        "type": "object",
        "properties": {"key": _NAME_STR, "op": _OPS, "value": value},
        "required": ["key", "op", "value"],
        "additionalProperties": False,
    }
    item_filter = {
        "type": "object",
        "properties": {"field": {"anyOf": [_NAME_STR, {"type": "null"}]}, "op": _OPS, "value": value},
        "required": ["field", "op", "value"],
        "additionalProperties": False,
    }
    fan_out = {
        "type": "object",
        "properties": {
            "task": _ID,
            "field": _NAME_STR,
            "param": _NAME_STR,
            "item_field": {"anyOf": [_NAME_STR, {"type": "null"}]},
            "where": {"anyOf": [item_filter, {"type": "null"}]},
        },
        "required": ["task", "field", "param", "item_field", "where"],
        "additionalProperties": False,
    }
    builder.defs["condition"], builder.defs["fan_out"] = condition, fan_out
    common = {"depends_on": {"type": "array", "items": _ID, "maxItems": 8}}
    tail = {
        "when": {"anyOf": [{"$ref": "#/$defs/condition"}, {"type": "null"}]},
        "for_each": {"anyOf": [{"$ref": "#/$defs/fan_out"}, {"type": "null"}]},
    }
    keys = ["id", "text", "tool_name", "depends_on", "parameters", "when", "for_each"]

    def task(tool_name: Any, parameters: dict[str, Any]) -> dict[str, Any]:
        props = {
            "id": _ID,
            "text": FREE_TEXT,
            "tool_name": {"const": tool_name},
            **common,
            "parameters": parameters,
            **tail,
        }
        return {"type": "object", "properties": props, "required": keys, "additionalProperties": False}

    variants = [task(t.name, builder.parameters(t.params)) for t in inp.tools]
    variants.append(task(None, {"type": "object", "properties": {}, "additionalProperties": False}))
    # No more tasks than the kernel's declared fan-out: a longer decomposition halts the turn anyway.
    tasks = {"type": "array", "items": {"anyOf": variants}, "maxItems": max_tasks}
    return builder.finish(
        {"type": "object", "properties": {"tasks": tasks}, "required": ["tasks"], "additionalProperties": False}
    )


def _dec_oracle(inp: DecomposeInput, ann: Annotation) -> dict[str, Any]:
    tools_by_name = tool_map(inp.tools)
    return {
        "tasks": [
            {
                "id": annotated.id,
                "text": annotated.text,
                "tool_name": annotated.tool,
                "depends_on": list(annotated.depends_on),
                "parameters": in_tool_order(tools_by_name.get(annotated.tool or ""), annotated.parameters),
                "when": annotated.when.model_dump(mode="json") if annotated.when is not None else None,
                "for_each": annotated.for_each.model_dump(mode="json") if annotated.for_each is not None else None,
            }
            for annotated in ann.turn.tasks or []
        ]
    }


def _dec_corrupt(ans: dict[str, Any], rng: random.Random, tools: list[str]) -> str:
    tasks = ans.get("tasks", [])
    kind = rng.choice(["drop_task", "wrong_tool", "hallucinated_value", "cycle"])
    if kind == "drop_task" and tasks:
        tasks.pop(rng.randrange(len(tasks)))
    elif kind == "wrong_tool" and tasks:
        task = rng.choice(tasks)
        task["tool_name"] = rng.choice([x for x in tools if x != task.get("tool_name")] or ["unknown_tool"])
    elif kind == "hallucinated_value" and tasks:
        task = rng.choice(tasks)
        if task.get("parameters"):
            param = rng.choice(sorted(task["parameters"]))
            task["parameters"][param] = hallucinated(rng)
        else:
            kind = "drop_task"
            tasks.remove(task)
    elif kind == "cycle" and len(tasks) >= 2:
        tasks[0]["depends_on"] = sorted(set(tasks[0].get("depends_on", [])) | {tasks[-1]["id"]})
        tasks[-1]["depends_on"] = sorted(set(tasks[-1].get("depends_on", [])) | {tasks[0]["id"]})
    return kind


DECOMPOSE = PrimitiveSpec(
    name="decompose",
    instructions=(
        "You decompose a user request into atomic unit tasks. Each task calls exactly one tool from the list "
        "(tool_name null if no listed tool can do it). Give each task an id, a short imperative text, the ids it "
        "depends on (a task that needs another's result or effect), and the parameter values stated in the "
        "request or context. Do not invent values and do not add tasks the user did not ask for. "
        'The state lists what earlier calls wrote, each result field as "<tool>.<field>"; a value that a task of '
        "this request will produce is left to that task's result, not copied from the state. "
        'An entry "unfinished.<tool>" is a task of an earlier turn that did not run (its bound arguments, what was '
        "missing, why): a request that completes it calls that tool again with only the values the request adds."
        # The prompt goes on with the descriptions of UnitTask's fields when and for_each (kernel/specs/shared.py).
    ),
    input_type=DecomposeInput,
    output_type=DecomposeOutput,
    checks=(
        Check("ids_consistent", "value", _dec_ids),
        Check("tools_registered", "value", _dec_tools),
        Check("values_grounded", "value", _dec_grounded),
        Check("conditions_well_formed", "value", _dec_conditions),
        Check("covers_request", "semantic", _dec_cover),
    ),
    canonical_fn=_dec_canon,
    decoding_schema=_dec_schema,
    oracle=_dec_oracle,
    default_size=6910,  # the paper's Table 4
    gate_threshold=0.90,  # a little under the paper's fine-tuned exact match (Table 5: 92.8)
    noise_kinds=("drop_task", "wrong_tool", "hallucinated_value", "cycle"),
    corrupt=_dec_corrupt,
    # The same request would get another task order / other ids: decompose targets stay canonical.
    generation=GenerationRules(drop_variants=frozenset({"permuted", "renamed"})),
)


# decompose's ids_consistent check is the one implementation of this rule: worked solutions (kernel/scenario.py) and
# verify (data_gen/verify.py) ask it too, so an annotation is held to exactly what the contract holds an answer to.
@dataclass(frozen=True)
class _Tasks:
    tasks: Sequence[Any]


def task_ids_problem(tasks: Sequence[Any]) -> str | None:
    """Unique ids, dependencies on known ids only, none on itself: decompose's ``ids_consistent`` check on
    any tasks with ``id`` and ``depends_on`` (a decomposition, or a worked solution's annotated tasks)."""
    return _dec_ids(None, _Tasks(tasks))  # type: ignore[arg-type]  # the check reads only out.tasks
