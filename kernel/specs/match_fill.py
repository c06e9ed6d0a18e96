"""match_fill: values for the parameters of the matched tool that neither the request nor the scratchpad bound,
each grounded in the task, the turn context or the state, or null (the paper's SP5, TaskToGet)."""

from __future__ import annotations

import random
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from forethought.primitives import Check

from ..decoding import SchemaBuilder, ValueSpace
from ..grounding import Haystack, normalize
from ..scratchpad import bindable
from .adapter import Placeholder
from .base import Annotation, PrimitiveSpec
from .shared import MAX_TASKS, TaskRef, ToolBrief, grounded_params, hallucinated, tool_enums


class MatchFillInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: TaskRef
    tool: ToolBrief
    missing: list[str]
    bound: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict)


class MatchFillOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    values: dict[Annotated[str, Placeholder("<param>")], Any] = Field(
        description="Use null for a value you cannot ground."
    )


def _fill_keys(inp: MatchFillInput, out: MatchFillOutput) -> str | None:
    want, got = set(inp.missing), set(out.values)
    if want != got:
        extra, lacking = sorted(got - want), sorted(want - got)
        return (
            f"values must name exactly the missing parameters {sorted(want)}"
            + (f"; extra {extra}" if extra else "")
            + (f"; lacking {lacking}" if lacking else "")
        )
    return None


def _fill_grounded(inp: MatchFillInput, out: MatchFillOutput) -> str | None:
    haystack = Haystack([inp.task.text], [inp.context, bindable(inp.state)])
    stated = {param: value for param, value in out.values.items() if value is not None}
    return grounded_params(inp.tool, stated, haystack, tool_enums(inp.tool))


def _fill_schema(inp: MatchFillInput, max_tasks: int = MAX_TASKS) -> dict[str, Any]:
    """Exactly the missing parameters, in order, each a grounded value of its type or null."""
    builder = SchemaBuilder(ValueSpace([inp.task.text], [inp.context, bindable(inp.state)]))
    values = {
        "type": "object",
        "properties": {m: builder.value(inp.tool.params.get(m, "any")) for m in inp.missing},
        "required": list(inp.missing),
        "additionalProperties": False,
    }
    return builder.finish(
        {"type": "object", "properties": {"values": values}, "required": ["values"], "additionalProperties": False}
    )


def _fill_oracle(inp: MatchFillInput, ann: Annotation) -> dict[str, Any]:
    # fill_from "scratchpad:<key>" reads the scratchpad in the input, so replays re-derive values that depend on it.
    annotated = ann.tasks.get(inp.task.id)
    values: dict[str, Any] = {}
    for param in inp.missing:
        binding = annotated.bindings.get(param) if annotated is not None else None
        value = None
        if binding is not None and binding.source == "fill":
            fill_from = binding.fill_from or "literal"
            if fill_from.startswith("scratchpad:"):
                value = inp.state.get(fill_from.removeprefix("scratchpad:"))
            elif fill_from.startswith("request:"):
                value = inp.context.get(fill_from.removeprefix("request:"))
            else:
                value = binding.value
        values[param] = value
    return {"values": values}


def _fill_corrupt(ans: dict[str, Any], rng: random.Random, tools: list[str]) -> str:
    vals = ans.get("values", {})
    kind = rng.choice(["hallucinated_value", "null", "extra_key"])
    if kind == "extra_key" or not vals:
        vals["unrequested_param"] = "x"
        kind = "extra_key"
    elif kind == "null":
        vals[rng.choice(sorted(vals))] = None
    else:
        vals[rng.choice(sorted(vals))] = hallucinated(rng)
    return kind


MATCH_FILL = PrimitiveSpec(
    name="match_fill",
    instructions=(
        "Propose values only for the missing parameters of the tool, grounded in the task text, the turn context "
        "or the scratchpad state; a value that must come from state is read from the state, never invented. "
        'The state shows each committed call\'s result fields as "<tool>.<field>", those of the tasks this one '
        'depends on among them; a field shown as {"$truncated": ...} was too long to keep and is no value.'
        # The prompt goes on with the description of values.
    ),
    input_type=MatchFillInput,
    output_type=MatchFillOutput,
    checks=(
        Check("names_missing_exactly", "value", _fill_keys),
        Check("values_grounded", "value", _fill_grounded),
    ),
    canonical_fn=lambda out: normalize(out.values),
    decoding_schema=_fill_schema,
    oracle=_fill_oracle,
    default_size=1125,
    gate_threshold=0.90,  # Table 5: 93.0
    noise_kinds=("hallucinated_value", "null", "extra_key"),
    corrupt=_fill_corrupt,
)
