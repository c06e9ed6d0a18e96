"""get_order: the order of a batch of mutually independent, ready tasks that best fits the user's workflow
(the paper's SP2)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from forethought.primitives import Check

from ..decoding import with_format
from .adapter import Label
from .base import Annotation, GenerationRules, PrimitiveSpec
from .shared import (
    MAX_TASKS,
    TaskRef,
)


class GetOrderInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: Annotated[str, Label("Request")]
    tasks: Annotated[list[TaskRef], Label("Independent tasks")]  # a batch of mutually independent, ready tasks


class GetOrderOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ordered_task_ids: list[str] = Field(description="Output exactly the given ids, each once; invent no ids.")


def _order_perm(inp: GetOrderInput, out: GetOrderOutput) -> str | None:
    want = sorted(task.id for task in inp.tasks)
    got = sorted(out.ordered_task_ids)
    if want != got:
        return f"must be a permutation of exactly {want}, got {out.ordered_task_ids}"
    return None


def _order_schema(inp: GetOrderInput, max_tasks: int = MAX_TASKS) -> dict[str, Any]:
    ids = [t.id for t in inp.tasks]
    if len(ids) <= 5:  # every permutation spelled out: the output is a permutation by construction
        order: dict[str, Any] = {"anyOf": [{"const": list(p)} for p in itertools.permutations(ids)]}
    else:  # too many to list: right ids and length, uniqueness left to the contract
        order = {"type": "array", "items": {"enum": ids}, "minItems": len(ids), "maxItems": len(ids)}
    return with_format(
        {
            "type": "object",
            "properties": {"ordered_task_ids": order},
            "required": ["ordered_task_ids"],
            "additionalProperties": False,
        }
    )


def _order_oracle(inp: GetOrderInput, ann: Annotation) -> dict[str, Any]:
    pos = {tid: i for i, tid in enumerate(ann.turn.order or [])}
    ids = [t.id for t in inp.tasks]
    return {"ordered_task_ids": sorted(ids, key=lambda t: (pos.get(t, len(pos)), ids.index(t)))}


def _order_corrupt(ans: dict[str, Any], rng: random.Random, tools: list[str]) -> str:
    ids = ans.get("ordered_task_ids", [])
    if len(ids) >= 2 and rng.random() < 0.5:
        i, j = rng.sample(range(len(ids)), 2)
        ids[i], ids[j] = ids[j], ids[i]
        return "swapped"
    ans["ordered_task_ids"] = ids[:-1]
    return "dropped_id"


def _order_shuffle(inp: GetOrderInput, target: Any, rng: random.Random) -> GetOrderInput:
    """The batch in a random order that is never the target order (copying the input never wins)."""
    if not isinstance(target, dict) or not isinstance(target.get("ordered_task_ids"), list):
        return inp
    tasks = list(inp.tasks)
    if len(tasks) < 2:
        return inp
    rng.shuffle(tasks)
    if [t.id for t in tasks] == list(target["ordered_task_ids"]):
        tasks = tasks[1:] + tasks[:1]
    return inp.model_copy(update={"tasks": tasks})


GET_ORDER = PrimitiveSpec(
    name="get_order",
    instructions=(
        "Given a batch of mutually independent tasks, output the order that best fits the user's workflow."
        # The prompt goes on with the description of ordered_task_ids.
    ),
    input_type=GetOrderInput,
    output_type=GetOrderOutput,
    checks=(Check("permutation_of_batch", "value", _order_perm),),
    canonical_fn=lambda out: list(out.ordered_task_ids),
    decoding_schema=_order_schema,
    oracle=_order_oracle,
    default_size=2000,
    gate_threshold=0.98,  # Table 5: 100
    noise_kinds=("swapped", "dropped_id"),
    corrupt=_order_corrupt,
    generation=GenerationRules(shuffle_input=_order_shuffle),
    # a batch's order is about the batch, not about its first task: keyed "batch t1, t2"
    keyed_by=lambda inp: "batch " + ", ".join(t.id for t in inp.tasks),
)


# get_order's permutation_of_batch check is the one implementation of this rule: verify (data_gen/verify.py) asks it
# too, so an annotation is held to exactly what the contract holds an answer to.
@dataclass(frozen=True)
class _Id:
    id: str


@dataclass(frozen=True)
class _Batch:
    tasks: Sequence[_Id]


@dataclass(frozen=True)
class _Order:
    ordered_task_ids: Sequence[str]


def permutation_problem(ids: Sequence[str], order: Sequence[str]) -> str | None:
    """``order`` holds exactly ``ids``, each once: get_order's ``permutation_of_batch`` check on plain ids."""
    return _order_perm(_Batch([_Id(i) for i in ids]), _Order(order))  # type: ignore[arg-type]
