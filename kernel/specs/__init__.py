"""The SLM primitives of the kernel, each defined once: this module is their registry.

For every primitive its :class:`PrimitiveSpec` holds the input and output
schema, the system prompt and input rendering, the output contract, the
canonical form used for exact match, the decoding schema, the oracle's answer
from a worked solution's annotation, the errors the noisy oracle injects, the
generation rules, the default dataset size and the gate threshold. Data
generation renders training examples only through these specs; training,
validation, packaging, evaluation and the kernel use the same ones, and every
list or table of primitive names (config types, conf tables, reports) is read
from :data:`SPECS` or checked against it. docs/primitives.md says how to add one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import itertools
import json
import random
import re
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from forethought.config import use_primitive_registry
from forethought.primitives import Check, Contract, Primitive, slm
from forethought.primitives.primitive import Message, default_parse

from .decoding import FREE_TEXT, SchemaBuilder, ValueSpace, with_format
from .grounding import Haystack, canonical, normalize
from .registry.model import entity_key, fact_of
from .scratchpad import bindable

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
    when: TaskCondition | None = None
    for_each: FanOut | None = None


class ProposedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_name: str
    parameters: dict[str, Any] = Field(default_factory=dict)


def _whole_numbers(value: Any) -> Any:
    """Integral floats as ints, everything else (key order included) as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    first = text.split(". ")[0]
    return first if len(first) <= n else first[: n - 1] + "…"


def _dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "), default=str)


# How a prompt shows a tool list (docs/primitives.md, "Tool rendering"). ``full``: every parameter with its type and
# the description's first sentence (up to 80 characters). ``compact``: a string parameter without its type (the
# usual one), and the description's first clause (up to 48 characters): about half the prompt tokens on the
# generated data (docs/training.md), for small models whose compute goes into reading prompts. The rendering is
# part of every spec's hash, recorded with the data, the adapters and the bundle, and the kernel renders as the
# bundle was trained (training and serving see the same prompt). ``focused``: compact, and check_prerequisites lists
# only the tools its contract admits for the key (the writers of the kind its outcome calls for, ``_prereq_writers``),
# not the whole registry: its grammar admits no other tool, so the rest of the list is prompt the model pays for and
# must learn to ignore (about a third of the prompt tokens on the generated data; docs/training.md).
# One rendering per process (not per context: the engine and the openai backend render in worker threads).
TOOL_RENDERINGS = ("full", "compact", "focused")
_COMPACT = ("compact", "focused")
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


def render_tools(tools: Sequence[ToolBrief]) -> str:
    compact = _TOOL_RENDERING[0] in _COMPACT
    lines = []
    for t in tools:
        if compact:
            ps = ", ".join(
                f"{p}{'' if p in t.required else '?'}{'' if ty == 'string' else ': ' + ty}"
                for p, ty in t.params.items()
            )
            lines.append(f"- {t.name}({ps}): {_clause(t.description, 48)}")
        else:
            ps = ", ".join(f"{p}{'' if p in t.required else '?'}: {ty}" for p, ty in t.params.items())
            lines.append(f"- {t.name}({ps}): {_short(t.description)}")
    return "\n".join(lines) or "(none)"


_LAST_MAP: list[Any] = [None, None]


def _tool_map(tools: Sequence[ToolBrief]) -> dict[str, ToolBrief]:
    # Contract checks ask for the same registry list many times in a row (it is shared per turn).
    if _LAST_MAP[0] is not tools:
        _LAST_MAP[0], _LAST_MAP[1] = tools, {t.name: t for t in tools}
    return _LAST_MAP[1]


# ------------------------------------------------------------------------ specs
_SPEC_HASHES: dict[str, str] = {}


@functools.cache
def _golden() -> dict[str, list[dict[str, Any]]]:
    return json.loads((Path(__file__).parent / "spec_golden.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Annotation:
    """One annotated turn of a worked solution (kernel/scenario.py's Turn), as a spec's oracle reads it."""

    turn: Any
    tasks: dict[str, Any]  # task id -> its TaskAnn

    @classmethod
    def of(cls, turn: Any) -> Annotation:
        tasks = {t.id: t for t in turn.tasks or []}
        for t in turn.tasks or []:  # a fan-out task's instances are answered as tasks of their own ("t2[0]", ...)
            tasks.update({i.id: i for i in t.instance_tasks()})
        return cls(turn, tasks)


@dataclass(frozen=True)
class GenerationRules:
    """How ``forethought generate`` (data_gen/generate.py) turns this primitive's decision points into examples."""

    # Variant changes (data_gen/augment.py's Variant flags "permuted", "renamed") after which the same
    # input would have another, equally right target: examples of such variants are not written.
    drop_variants: frozenset[str] = frozenset()
    # (input, target, rng) -> the input presented in another order, so that copying the input never wins.
    shuffle_input: Callable[[Any, Any, random.Random], Any] | None = None
    # (input, target, names) -> the input with the tools ``names`` (the target's and its alternatives) taken out
    # and the answer it then has, or None: train rows where no listed tool does the task (data.variations.without_target)
    without_target: Callable[[Any, Any, frozenset[str]], tuple[Any, Any] | None] | None = None


@dataclass(frozen=True)
class Derivation:
    """Decision points taken at another primitive's: every input of ``source`` the kernel asks the oracle
    during a replay gives one input of this primitive (``make_input``), answered by this spec's oracle.
    For a primitive whose kernel step does not run during replays (yet); see docs/primitives.md."""

    source: str
    make_input: Callable[[Any], BaseModel]


@dataclass(frozen=True)
class PrimitiveSpec:
    name: str
    system: str
    input_type: type[BaseModel]
    output_type: type[BaseModel]
    render_user: Callable[[Any], str]
    checks: tuple[Check, ...]
    canonical_fn: Callable[[Any], Any]
    # (input, max_tasks) -> the output's JSON schema specialised to the input, for constrained decoding.
    decoding: Callable[[Any, int], dict[str, Any]]
    # (input, annotation) -> the answer the annotations give (the oracle backend, and so every training target).
    oracle: Callable[[Any, Annotation], dict[str, Any]]
    default_size: int  # examples generated when data.sizes does not name the primitive
    gate_threshold: float  # exact-match gate when validate's thresholds do not name it
    # The noisy oracle's errors: ``corrupt(answer, rng, tool_names)`` changes the parsed answer in place by one
    # error typical of the primitive and returns its kind, one of ``noise_kinds``.
    noise_kinds: tuple[str, ...] = ()
    corrupt: Callable[[dict[str, Any], random.Random, list[str]], str] | None = None
    generation: GenerationRules = field(default_factory=GenerationRules)
    derived_from: Derivation | None = None
    # Golden inputs and targets ({"input", "target"}) for a spec that kernel/spec_golden.json does not list.
    golden_cases: tuple[dict[str, Any], ...] = ()

    def system_text(self) -> str:
        """The system prompt under the active tool rendering: whole, or (``compact``) its first sentence and its
        answer-format sentence only. A model fine-tuned on the primitive learns the rest from its examples; a
        small model trained here pays for every prompt token in every step (docs/training.md)."""
        if _TOOL_RENDERING[0] not in _COMPACT:
            return self.system
        sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(self.system.split()))
        answer = [x for x in sentences if x.startswith("Answer with JSON")]
        return " ".join([sentences[0], *[a for a in answer if a != sentences[0]]])

    def messages(self, inp: BaseModel, feedback: Sequence[str] = ()) -> list[Message]:
        msgs: list[Message] = [
            {"role": "system", "content": self.system_text()},
            {"role": "user", "content": self.render_user(inp)},
        ]
        if feedback:
            # Retries see the violations of their previous answer (never in training data).
            msgs[-1] = {
                "role": "user",
                "content": msgs[-1]["content"]
                + "\n\nYour previous answer was rejected:\n"
                + "\n".join(f"- {f}" for f in feedback)
                + "\nAnswer again with corrected JSON.",
            }
        return msgs

    def contract(self) -> Contract:
        return Contract(
            value=[c for c in self.checks if c.level == "value"],
            semantic=[c for c in self.checks if c.level == "semantic"],
        )

    def parse(self, text: str) -> Any:
        return default_parse(text)

    def target_text(self, output: BaseModel | dict[str, Any]) -> str:
        """The completion a model is trained to produce: compact JSON of the output, a whole number written as one
        (``20``, not ``20.0``: the grounded number, in the one form the decoding grammar offers)."""
        data = output.model_dump(mode="json") if isinstance(output, BaseModel) else output
        dumped = _whole_numbers(self.output_type.model_validate(data).model_dump(mode="json"))
        return json.dumps(dumped, ensure_ascii=False, separators=(", ", ": "))

    def canonical(self, output: BaseModel | dict[str, Any]) -> str:
        """Canonical string for exact match (same for prediction and target)."""
        out = output if isinstance(output, self.output_type) else self.output_type.model_validate(output)
        return canonical(self.canonical_fn(out))

    def exact_match(self, prediction: Any, target: Any) -> bool:
        try:
            return self.canonical(prediction) == self.canonical(target)
        except Exception:
            return False

    def check_output(self, inp: BaseModel | dict[str, Any], output: Any):
        """Type + value + semantic contract of one output (used by data generation and gates)."""
        inp_m = inp if isinstance(inp, self.input_type) else self.input_type.model_validate(inp)
        return self.contract().check(self.name, self.output_type, inp_m, output)

    def oracle_answer(self, inp: BaseModel, annotation: Annotation) -> dict[str, Any]:
        """What the worked solution's annotations answer for this input."""
        return self.oracle(inp, annotation)

    @property
    def spec_hash(self) -> str:
        """What the model sees and how its answer is judged, under the active tool rendering, hashed (cached; see
        :meth:`compute_spec_hash`)."""
        key = f"{self.name}:{_TOOL_RENDERING[0]}"
        if key not in _SPEC_HASHES:
            _SPEC_HASHES[key] = self.compute_spec_hash()
        return _SPEC_HASHES[key]

    def golden(self) -> list[tuple[BaseModel, BaseModel]]:
        """Fixed inputs and targets (kernel/spec_golden.json, else ``golden_cases``) whose rendering the spec hash covers."""
        cases = _golden().get(self.name) or list(self.golden_cases)
        if not cases:
            raise ValueError(
                f"primitive {self.name!r} has no golden cases (kernel/spec_golden.json or PrimitiveSpec.golden_cases)"
            )
        return [
            (self.input_type.model_validate(g["input"]), self.output_type.model_validate(g["target"])) for g in cases
        ]

    def golden_rendering(self) -> str:
        """Everything the model sees and is trained to answer for the golden inputs, as text.

        A prompt change anywhere (the system prompt, a helper such as render_tools,
        messages(), the retry feedback, target_text, the decoding schema or the
        canonical form) changes this text, so it changes the spec hash; the tests
        keep it as a snapshot, so the change is also a visible diff.
        """
        parts = [f"# {self.name}"]
        for i, (inp, target) in enumerate(self.golden()):
            parts.append(f"## golden {i}: messages")
            parts.append(json.dumps(self.messages(inp), ensure_ascii=False, indent=1))
            parts.append(f"## golden {i}: messages of a retry")
            parts.append(
                json.dumps(
                    self.messages(inp, ("[value] golden_check: an example violation",))[-1],
                    ensure_ascii=False,
                    indent=1,
                )
            )
            parts.append(f"## golden {i}: target text\n{self.target_text(target)}")
            parts.append(f"## golden {i}: canonical form\n{self.canonical(target)}")
            parts.append(
                f"## golden {i}: decoding schema\n{json.dumps(self.decoding_schema(inp), sort_keys=True, ensure_ascii=False)}"
            )
            parts.append(
                f"## golden {i}: contract verdict\n{json.dumps(self.check_output(inp, target).to_dict(), sort_keys=True, default=str)}"
            )
        return "\n".join(parts) + "\n"

    def compute_spec_hash(self) -> str:
        """Changes whenever the prompt, schemas, rendering, contract or canonical form change."""
        h = hashlib.sha256()
        h.update(self.golden_rendering().encode())
        h.update(json.dumps(self.input_type.model_json_schema(), sort_keys=True).encode())
        h.update(json.dumps(self.output_type.model_json_schema(), sort_keys=True).encode())
        # The contract's checks judge answers the golden targets may not exercise: their source too.
        for fn in [self.canonical_fn, *[c.fn for c in self.checks]]:
            try:
                h.update(inspect.getsource(fn).encode())
            except (OSError, TypeError):
                h.update(getattr(fn, "__qualname__", repr(fn)).encode())
        return h.hexdigest()[:16]

    def decoding_schema(self, inp: BaseModel, *, max_tasks: int = MAX_TASKS) -> dict[str, Any]:
        """The output schema specialised to this input, for constrained decoding.

        Names the model must copy (registered tools, batch task ids, the
        missing parameters) become enums or fixed keys, and free strings get a
        length bound, so decoding cannot produce them wrongly. ``max_tasks`` is
        the kernel's declared fan-out (KernelConfig.max_tasks).
        """
        return self.decoding(inp, max_tasks)

    def primitive(self, *, adapter: str | None = None, max_tasks: int = MAX_TASKS) -> Primitive:
        return slm(
            self.name,
            self.input_type,
            self.output_type,
            self.contract(),
            render=self.messages,
            parse=self.parse,
            json_schema=functools.partial(self.decoding_schema, max_tasks=max_tasks),
            adapter=adapter or self.name,
            version=self.spec_hash,
        )


def _tool_enum(tools: Sequence[ToolBrief], nullable: bool) -> dict[str, Any]:
    names: list[Any] = [t.name for t in tools]
    return {"enum": names + ([None] if nullable else [])}


def _hallucinated(rng: random.Random) -> str:
    return "hallucinated-" + str(rng.randint(100, 999))


def _grounded_params(
    tool: ToolBrief | None, params: dict[str, Any], hay: Haystack, enums: dict[str, list[str]]
) -> str | None:
    bad = [f"{k}={v!r}" for k, v in params.items() if not hay.contains(v, enums.get(k))]
    if bad:
        return "values not grounded in the request, context or scratchpad: " + ", ".join(bad)
    return None


_ENUMS: dict[int, tuple[ToolBrief, dict[str, list[str]]]] = {}


def _enums(tool: ToolBrief | None) -> dict[str, list[str]]:
    if tool is None:
        return {}
    hit = _ENUMS.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    out = {}
    for p, ty in tool.params.items():
        if ty.startswith("enum[") and ty.endswith("]"):
            out[p] = ty[5:-1].split("|")
    if len(_ENUMS) < 20000:
        _ENUMS[id(tool)] = (tool, out)
    return out


def _unknown_params(tool: ToolBrief, params: dict[str, Any]) -> list[str]:
    return [k for k in params if k not in tool.params]


# ---------------------------------------------------------------- 1. decompose
class DecomposeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str
    context: dict[str, Any] = Field(default_factory=dict)  # turn context tau
    state: dict[str, Any] = Field(default_factory=dict)  # scratchpad S (as seen this turn)
    tools: list[ToolBrief]


class DecomposeOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tasks: list[UnitTask]


def _render_decompose(x: DecomposeInput) -> str:
    return f"Request: {x.user}\nContext: {_dumps(x.context)}\nState: {_dumps(x.state)}\nTools:\n{render_tools(x.tools)}"


def _dec_ids(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    ids = [t.id for t in out.tasks]
    if len(set(ids)) != len(ids):
        return f"task ids are not unique: {ids}"
    for t in out.tasks:
        missing = [d for d in t.depends_on if d not in ids]
        if missing:
            return f"task {t.id} depends on unknown ids {missing}"
        if t.id in t.depends_on:
            return f"task {t.id} depends on itself"
    return None


def _dec_tools(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    tm = _tool_map(inp.tools)
    for t in out.tasks:
        if t.tool_name is None:
            continue
        if t.tool_name not in tm:
            return f"task {t.id}: tool {t.tool_name!r} is not in the registry"
        extra = _unknown_params(tm[t.tool_name], t.parameters)
        if extra:
            return f"task {t.id}: {t.tool_name} has no parameters {extra}"
    return None


def _dec_grounded(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    hay = Haystack([inp.user], [inp.context, bindable(inp.state)])
    tm = _tool_map(inp.tools)
    for t in out.tasks:
        msg = _grounded_params(tm.get(t.tool_name or ""), t.parameters, hay, _enums(tm.get(t.tool_name or "")))
        if msg:
            return f"task {t.id}: {msg}"
    return None


def _dec_conditions(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    """``when`` and ``for_each`` are well formed: a fan-out reads a task this one depends on and binds a parameter
    of its tool that decompose does not state; the predicates' values are grounded like parameter values."""
    tm = _tool_map(inp.tools)
    hay = Haystack([inp.user], [inp.context, bindable(inp.state)])
    for t in out.tasks:
        preds = []
        if t.when is not None:
            if not t.when.key:
                return f"task {t.id}: when needs the scratchpad key it tests"
            preds.append(("when", t.when.op, t.when.value))
        f = t.for_each
        if f is not None:
            if f.task not in t.depends_on:
                return f"task {t.id}: for_each reads task {f.task!r}, which is not in its depends_on {t.depends_on}"
            tool = tm.get(t.tool_name or "")
            if tool is not None and f.param not in tool.params:
                return f"task {t.id}: for_each binds {f.param!r}, which is not a parameter of {tool.name}"
            if t.parameters.get(f.param) is not None:
                return f"task {t.id}: for_each binds {f.param!r} per element, so its parameters must not state it"
            if f.where is not None:
                preds.append(("for_each.where", f.where.op, f.where.value))
        for where, op, value in preds:
            if op in ("truthy", "not_null"):
                if value is not None:
                    return f"task {t.id}: {where} op {op!r} takes no value, got {value!r}"
            elif value is None or not hay.contains(value):
                return f"task {t.id}: {where} value {value!r} is not grounded in the request, context or scratchpad"
    return None


def _dec_cover(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    if inp.user.strip() and not out.tasks:
        return "a non-empty request was decomposed into no tasks"
    return None


def _dec_canon(out: DecomposeOutput) -> Any:
    # The task text is explanatory; exact match compares the decisions.
    return [
        {
            "id": t.id,
            "tool_name": t.tool_name,
            "depends_on": sorted(t.depends_on),
            "parameters": normalize(t.parameters),
            **({"when": normalize(t.when.model_dump())} if t.when is not None else {}),
            **({"for_each": normalize(t.for_each.model_dump())} if t.for_each is not None else {}),
        }
        for t in out.tasks
    ]


_OPS = {"enum": list(typing.get_args(ConditionOp))}
_NAME_STR = {"type": "string", "maxLength": 80}
_ID = {"type": "string", "maxLength": 12}


def _dec_schema(inp: DecomposeInput, max_tasks: int) -> dict[str, Any]:
    """One variant per registered tool (its parameters, each grounded) and one for "no listed tool"."""
    b = SchemaBuilder(ValueSpace([inp.user], [inp.context, bindable(inp.state)]))
    value = {"anyOf": [b.scalar(), {"type": "array", "items": b.scalar(), "maxItems": 8}]}
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
    b.defs["condition"], b.defs["fan_out"] = condition, fan_out
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

    variants = [task(t.name, b.parameters(t.params)) for t in inp.tools]
    variants.append(task(None, {"type": "object", "properties": {}, "additionalProperties": False}))
    # No more tasks than the kernel's declared fan-out: a longer decomposition halts the turn anyway.
    tasks = {"type": "array", "items": {"anyOf": variants}, "maxItems": max_tasks}
    return b.finish(
        {"type": "object", "properties": {"tasks": tasks}, "required": ["tasks"], "additionalProperties": False}
    )


def _in_tool_order(tool: ToolBrief | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters in the tool's declared order (any it does not declare last): the one order the decoding grammar
    writes them in, so the target a model learns is always one it may decode."""
    rank = {p: i for i, p in enumerate(tool.params)} if tool is not None else {}
    return dict(sorted(params.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def _dec_oracle(inp: DecomposeInput, ann: Annotation) -> dict[str, Any]:
    tm = _tool_map(inp.tools)
    return {
        "tasks": [
            {
                "id": t.id,
                "text": t.text,
                "tool_name": t.tool,
                "depends_on": list(t.depends_on),
                "parameters": _in_tool_order(tm.get(t.tool or ""), t.parameters),
                "when": t.when.model_dump(mode="json") if t.when is not None else None,
                "for_each": t.for_each.model_dump(mode="json") if t.for_each is not None else None,
            }
            for t in ann.turn.tasks or []
        ]
    }


def _dec_corrupt(ans: dict[str, Any], rng: random.Random, tools: list[str]) -> str:
    tasks = ans.get("tasks", [])
    kind = rng.choice(["drop_task", "wrong_tool", "hallucinated_value", "cycle"])
    if kind == "drop_task" and tasks:
        tasks.pop(rng.randrange(len(tasks)))
    elif kind == "wrong_tool" and tasks:
        t = rng.choice(tasks)
        t["tool_name"] = rng.choice([x for x in tools if x != t.get("tool_name")] or ["unknown_tool"])
    elif kind == "hallucinated_value" and tasks:
        t = rng.choice(tasks)
        if t.get("parameters"):
            k = rng.choice(sorted(t["parameters"]))
            t["parameters"][k] = _hallucinated(rng)
        else:
            kind = "drop_task"
            tasks.remove(t)
    elif kind == "cycle" and len(tasks) >= 2:
        tasks[0]["depends_on"] = sorted(set(tasks[0].get("depends_on", [])) | {tasks[-1]["id"]})
        tasks[-1]["depends_on"] = sorted(set(tasks[-1].get("depends_on", [])) | {tasks[0]["id"]})
    return kind


DECOMPOSE = PrimitiveSpec(
    name="decompose",
    system=(
        "You decompose a user request into atomic unit tasks. Each task calls exactly one tool from the list "
        "(tool_name null if no listed tool can do it). Give each task an id, a short imperative text, the ids it "
        "depends on (a task that needs another's result or effect), and the parameter values stated in the "
        "request or context. Do not invent values and do not add tasks the user did not ask for. "
        'The state lists what earlier calls wrote, each result field as "<tool>.<field>"; a value that a task of '
        "this request will produce is left to that task's result, not copied from the state. "
        'An entry "unfinished.<tool>" is a task of an earlier turn that did not run (its bound arguments, what was '
        "missing, why): a request that completes it calls that tool again with only the values the request adds. "
        'A task the user wants only if something holds ("if the line is suspended, resume it") gets "when": '
        '{"key", "op", "value"}, a test of a state key or of a result field "<tool>.<field>" of a task it depends on, '
        "checked right before it runs. A task the user wants for every element of a list that another task returns "
        '("add each of them") gets "for_each": {"task", "field", "param", "item_field", "where"}: the id of that task '
        "(in depends_on), the list field of its result, the parameter each element binds to (not stated in parameters), "
        'the element field that is the value (null: the element itself) and an optional filter {"field", "op", "value"}. '
        "Ops: truthy, not_null, eq, ne, in, gt, gte, lt, lte, startswith, endswith, contains. Otherwise both are null. "
        'Answer with JSON: {"tasks": [{"id", "text", "tool_name", "depends_on", "parameters", "when", "for_each"}]}.'
    ),
    input_type=DecomposeInput,
    output_type=DecomposeOutput,
    render_user=_render_decompose,
    checks=(
        Check("ids_consistent", "value", _dec_ids),
        Check("tools_registered", "value", _dec_tools),
        Check("values_grounded", "value", _dec_grounded),
        Check("conditions_well_formed", "value", _dec_conditions),
        Check("covers_request", "semantic", _dec_cover),
    ),
    canonical_fn=_dec_canon,
    decoding=_dec_schema,
    oracle=_dec_oracle,
    default_size=6910,  # the paper's Table 4
    gate_threshold=0.90,  # a little under the paper's fine-tuned exact match (Table 5: 92.8)
    noise_kinds=("drop_task", "wrong_tool", "hallucinated_value", "cycle"),
    corrupt=_dec_corrupt,
    # The same request would get another task order / other ids: decompose targets stay canonical.
    generation=GenerationRules(drop_variants=frozenset({"permuted", "renamed"})),
)


# ---------------------------------------------------------------- 2. get_order
class GetOrderInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str
    tasks: list[TaskRef]  # a batch of mutually independent, ready tasks


class GetOrderOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ordered_task_ids: list[str]


def _render_order(x: GetOrderInput) -> str:
    ts = "\n".join(f"- {t.id}: {t.text}" for t in x.tasks)
    return f"Request: {x.user}\nIndependent tasks:\n{ts}"


def _order_perm(inp: GetOrderInput, out: GetOrderOutput) -> str | None:
    want = sorted(t.id for t in inp.tasks)
    got = sorted(out.ordered_task_ids)
    if want != got:
        return f"must be a permutation of exactly {want}, got {out.ordered_task_ids}"
    return None


def _order_schema(inp: GetOrderInput, max_tasks: int) -> dict[str, Any]:
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
    system=(
        "Given a batch of mutually independent tasks, output the order that best fits the user's workflow. "
        "Output exactly the given ids, each once; invent no ids. "
        'Answer with JSON: {"ordered_task_ids": [...]}.'
    ),
    input_type=GetOrderInput,
    output_type=GetOrderOutput,
    render_user=_render_order,
    checks=(Check("permutation_of_batch", "value", _order_perm),),
    canonical_fn=lambda out: list(out.ordered_task_ids),
    decoding=_order_schema,
    oracle=_order_oracle,
    default_size=2000,
    gate_threshold=0.98,  # Table 5: 100
    noise_kinds=("swapped", "dropped_id"),
    corrupt=_order_corrupt,
    generation=GenerationRules(shuffle_input=_order_shuffle),
)


# ---------------------------------------------------- 3. check_prerequisites
class CheckPrereqInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: TaskRef
    key: str
    outcome: Literal["absent", "not_met"]
    current: Any = None  # S(key) when not_met
    requirement: str = ""  # the predicate, in words
    context: dict[str, Any] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict)
    tools: list[ToolBrief]


class CheckPrereqOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: ProposedTask | None


def _render_prereq(x: CheckPrereqInput) -> str:
    cur = f" (current value: {_dumps(x.current)})" if x.outcome == "not_met" else ""
    return (
        f"Main task: {x.task.text}\n"
        f"Prerequisite: {x.key} is {x.outcome}{cur}; required: {x.requirement or 'present'}\n"
        f"Context: {_dumps(x.context)}\n"
        f"State: {_dumps(x.state)}\n"
        f"Tools:\n{render_tools(_prereq_writers(x) if _TOOL_RENDERING[0] == 'focused' else x.tools)}"
    )


def _prereq_tool(inp: CheckPrereqInput, out: CheckPrereqOutput) -> str | None:
    if out.task is None:
        return None
    tm = _tool_map(inp.tools)
    tool = tm.get(out.task.tool_name)
    if tool is None:
        return f"tool {out.task.tool_name!r} is not in the registry"
    extra = _unknown_params(tool, out.task.parameters)
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
    m = _PARAM_ENTITY.fullmatch(write[len(fact_of(write)) + 1 : -1])
    return m.group(1) if m else None


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
    tool = _tool_map(inp.tools).get(out.task.tool_name)
    if tool is None or tool in _prereq_writers(inp) or not establishes(tool.writes, inp.key):
        return None  # an unknown tool or one that does not establish the key: establishes_key says so
    others = ", ".join(t.name for t in _prereq_writers(inp))
    if inp.outcome == "not_met":
        return f"{tool.name} only reads {inp.key!r}, which is present but not met: {others} changes it"
    return f"{inp.key!r} is absent and {others} reads it without a side effect: retrieve it before {tool.name}"


def _prereq_grounded(inp: CheckPrereqInput, out: CheckPrereqOutput) -> str | None:
    if out.task is None:
        return None
    hay = Haystack([inp.task.text], [inp.context, bindable(inp.state)])
    tool = _tool_map(inp.tools).get(out.task.tool_name)
    return _grounded_params(tool, out.task.parameters, hay, _enums(tool))


def _prereq_schema(inp: CheckPrereqInput, max_tasks: int) -> dict[str, Any]:
    """A tool that establishes the key (none: only null), its parameters, each grounded in the task, context or state."""
    b = SchemaBuilder(ValueSpace([inp.task.text], [inp.context, bindable(inp.state)]))
    task = []
    for t in _prereq_writers(inp):
        params = b.parameters(t.params)
        bound = _bound_entity(t, inp.key)
        if bound is not None:  # the call must name the key's entity (establishes, given the parameters)
            params = {
                **params,
                "properties": {**params["properties"], bound[0]: {"const": bound[1]}},
                "required": [bound[0]],
            }
        task.append(
            {
                "type": "object",
                "properties": {"tool_name": {"const": t.name}, "parameters": params},
                "required": ["tool_name", "parameters"],
                "additionalProperties": False,
            }
        )
    return b.finish(
        {
            "type": "object",
            "properties": {"task": {"anyOf": [*task, {"type": "null"}]}},
            "required": ["task"],
            "additionalProperties": False,
        }
    )


def _prereq_oracle(inp: CheckPrereqInput, ann: Annotation) -> dict[str, Any]:
    t = ann.tasks.get(inp.task.id)
    for p in t.prerequisites if t is not None else []:
        if p.key != inp.key:
            continue
        task = p.retrieval if inp.outcome == "absent" else p.remediation
        if task is None:
            return {"task": None}
        return {
            "task": {
                "tool_name": task.tool_name,
                "parameters": _in_tool_order(_tool_map(inp.tools).get(task.tool_name), task.parameters),
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
    system=(
        "A task's prerequisite key is absent from the scratchpad or present but not met. Propose at most one "
        "unit task, calling a listed tool that establishes the key, with parameter values taken from the task, "
        "context or state; null if no listed tool can. "
        'Answer with JSON: {"task": {"tool_name", "parameters"} or null}.'
    ),
    input_type=CheckPrereqInput,
    output_type=CheckPrereqOutput,
    render_user=_render_prereq,
    checks=(
        Check("establishes_key", "value", _prereq_tool),
        Check("retrieval_before_remedy", "value", _prereq_kind),
        Check("values_grounded", "value", _prereq_grounded),
    ),
    canonical_fn=lambda out: (
        None if out.task is None else {"tool_name": out.task.tool_name, "parameters": normalize(out.task.parameters)}
    ),
    decoding=_prereq_schema,
    oracle=_prereq_oracle,
    default_size=4867,
    gate_threshold=0.85,  # Table 5: 87.4
    noise_kinds=("wrong_tool", "null"),
    corrupt=_prereq_corrupt,
)


# ---------------------------------------------------------------- 4. match_func
class MatchFuncInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: TaskRef
    tools: list[ToolBrief]


class MatchFuncOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_name: str | None


def _match_without_target(inp: MatchFuncInput, raw: Any, names: frozenset[str]) -> tuple[Any, Any] | None:
    """The task with its tool (and the tool's alternatives) taken off the list: no listed tool performs it, so the
    answer is null. Near-miss look-alikes stay: telling them apart from the missing tool is the point."""
    if not isinstance(raw, dict) or raw.get("tool_name") is None:
        return None
    tools = [t for t in inp.tools if t.name not in names]
    if len(tools) == len(inp.tools) or not tools:
        return None
    return inp.model_copy(update={"tools": tools}), {"tool_name": None}


def _render_match(x: MatchFuncInput) -> str:
    return f"Task: {x.task.text}\nTools:\n{render_tools(x.tools)}"


def _match_registered(inp: MatchFuncInput, out: MatchFuncOutput) -> str | None:
    if out.tool_name is not None and out.tool_name not in _tool_map(inp.tools):
        return f"tool {out.tool_name!r} is not in the registry"
    return None


def _match_schema(inp: MatchFuncInput, max_tasks: int) -> dict[str, Any]:
    return with_format(
        {
            "type": "object",
            "properties": {"tool_name": _tool_enum(inp.tools, True)},
            "required": ["tool_name"],
            "additionalProperties": False,
        }
    )


def _match_oracle(inp: MatchFuncInput, ann: Annotation) -> dict[str, Any]:
    t = ann.tasks.get(inp.task.id)
    return {"tool_name": t.match if t is not None else None}


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
    system=(
        "Given one unit task and a tool list, choose the one tool that performs it, spelled exactly as listed; "
        'null if none applies. Answer with JSON: {"tool_name": "..." or null}.'
    ),
    input_type=MatchFuncInput,
    output_type=MatchFuncOutput,
    render_user=_render_match,
    checks=(Check("tool_registered", "value", _match_registered),),
    canonical_fn=lambda out: out.tool_name,
    decoding=_match_schema,
    oracle=_match_oracle,
    default_size=1600,
    gate_threshold=0.95,  # Table 5: 96.9
    noise_kinds=("wrong_tool", "unregistered_tool", "null"),
    corrupt=_match_corrupt,
    generation=GenerationRules(without_target=_match_without_target),
)


# ---------------------------------------------------------------- 5. match_fill
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
    values: dict[str, Any]


def _render_fill(x: MatchFillInput) -> str:
    return (
        f"Task: {x.task.text}\n"
        f"Tool: {render_tools([x.tool])[2:]}\n"
        f"Missing: {', '.join(x.missing)}\n"
        f"Bound: {_dumps(x.bound)}\n"
        f"Context: {_dumps(x.context)}\n"
        f"State: {_dumps(x.state)}"
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
    hay = Haystack([inp.task.text], [inp.context, bindable(inp.state)])
    return _grounded_params(inp.tool, {k: v for k, v in out.values.items() if v is not None}, hay, _enums(inp.tool))


def _fill_schema(inp: MatchFillInput, max_tasks: int) -> dict[str, Any]:
    """Exactly the missing parameters, in order, each a grounded value of its type or null."""
    b = SchemaBuilder(ValueSpace([inp.task.text], [inp.context, bindable(inp.state)]))
    values = {
        "type": "object",
        "properties": {m: b.value(inp.tool.params.get(m, "any")) for m in inp.missing},
        "required": list(inp.missing),
        "additionalProperties": False,
    }
    return b.finish(
        {"type": "object", "properties": {"values": values}, "required": ["values"], "additionalProperties": False}
    )


def _fill_oracle(inp: MatchFillInput, ann: Annotation) -> dict[str, Any]:
    # fill_from "scratchpad:<key>" reads the scratchpad in the input, so replays re-derive values that depend on it.
    t = ann.tasks.get(inp.task.id)
    values: dict[str, Any] = {}
    for m in inp.missing:
        b = t.bindings.get(m) if t is not None else None
        v = None
        if b is not None and b.source == "fill":
            ff = b.fill_from or "literal"
            if ff.startswith("scratchpad:"):
                v = inp.state.get(ff.removeprefix("scratchpad:"))
            elif ff.startswith("request:"):
                v = inp.context.get(ff.removeprefix("request:"))
            else:
                v = b.value
        values[m] = v
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
        vals[rng.choice(sorted(vals))] = _hallucinated(rng)
    return kind


MATCH_FILL = PrimitiveSpec(
    name="match_fill",
    system=(
        "Propose values only for the missing parameters of the tool, grounded in the task text, the turn context "
        "or the scratchpad state; a value that must come from state is read from the state, never invented. "
        'The state shows each committed call\'s result fields as "<tool>.<field>", those of the tasks this one '
        'depends on among them; a field shown as {"$truncated": ...} was too long to keep and is no value. '
        'Use null for a value you cannot ground. Answer with JSON: {"values": {"<param>": value}}.'
    ),
    input_type=MatchFillInput,
    output_type=MatchFillOutput,
    render_user=_render_fill,
    checks=(
        Check("names_missing_exactly", "value", _fill_keys),
        Check("values_grounded", "value", _fill_grounded),
    ),
    canonical_fn=lambda out: normalize(out.values),
    decoding=_fill_schema,
    oracle=_fill_oracle,
    default_size=1125,
    gate_threshold=0.90,  # Table 5: 93.0
    noise_kinds=("hallucinated_value", "null", "extra_key"),
    corrupt=_fill_corrupt,
)


# -------------------------------------------------------------------- registry
# Every registered primitive, in registration order (the order of reports and tables). Read it live:
# register_spec adds to this very dict, so a registered primitive is seen by every module that imported it.
SPECS: dict[str, PrimitiveSpec] = {}

# Words that a config may use where it names primitives ("primitive=all", "primitive=base").
RESERVED_NAMES = ("all", "base")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


class _RegisteredNames(SequenceABC):
    """The registered primitive names, read live from :data:`SPECS` (a tuple-like, read-only view)."""

    def __getitem__(self, i: Any) -> Any:
        return tuple(SPECS)[i]

    def __len__(self) -> int:
        return len(SPECS)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(SPECS))

    def __contains__(self, name: object) -> bool:
        return name in SPECS

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, list, _RegisteredNames)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # it changes with the registry

    def __repr__(self) -> str:
        return repr(tuple(SPECS))


PRIMITIVE_NAMES: Sequence[str] = _RegisteredNames()
use_primitive_registry(lambda: list(SPECS))  # conf tables (forethought.config) check their keys against it


def _spec_problems(spec: PrimitiveSpec) -> list[str]:
    problems = []
    if not isinstance(spec.name, str) or not _NAME.fullmatch(spec.name):
        problems.append(
            f"name {spec.name!r} must be lower-case letters, digits and underscores, starting with a letter"
        )
    elif spec.name in RESERVED_NAMES:
        problems.append(f"name {spec.name!r} is reserved (configs say primitive={spec.name})")
    elif spec.name in SPECS and SPECS[spec.name] is not spec:
        problems.append(f"a primitive named {spec.name!r} is already registered")
    for attr in ("input_type", "output_type"):
        t = getattr(spec, attr)
        if not (isinstance(t, type) and issubclass(t, BaseModel)):
            problems.append(f"{attr} must be a pydantic model class, got {t!r}")
    for attr in ("render_user", "canonical_fn", "decoding", "oracle"):
        if not callable(getattr(spec, attr)):
            problems.append(f"{attr} must be callable")
    if isinstance(spec.default_size, bool) or not isinstance(spec.default_size, int) or spec.default_size < 0:
        problems.append(f"default_size must be a non-negative integer, got {spec.default_size!r}")
    if (
        isinstance(spec.gate_threshold, bool)
        or not isinstance(spec.gate_threshold, (int, float))
        or not 0 <= spec.gate_threshold <= 1
    ):
        problems.append(f"gate_threshold must be a number in [0, 1], got {spec.gate_threshold!r}")
    if bool(spec.noise_kinds) != (spec.corrupt is not None):
        problems.append("noise_kinds and corrupt go together: declare both (the noisy oracle's errors) or neither")
    unknown_drop = sorted(set(spec.generation.drop_variants) - {"permuted", "renamed"})
    if unknown_drop:
        problems.append(
            f"generation.drop_variants names unknown variant changes {unknown_drop} (known: permuted, renamed)"
        )
    if spec.derived_from is not None and spec.derived_from.source not in SPECS:
        problems.append(f"derived_from names {spec.derived_from.source!r}, which is not a registered primitive")
    if not problems and not (_golden().get(spec.name) or spec.golden_cases):
        problems.append(
            "no golden cases: list some in kernel/spec_golden.json or PrimitiveSpec.golden_cases (the spec hash covers their rendering)"
        )
    return problems


def register_spec(spec: PrimitiveSpec) -> PrimitiveSpec:
    """Add a primitive to the registry: data generation, training, validation, packaging and the backends
    then know it (docs/primitives.md). Raises ValueError listing every problem of the spec."""
    problems = _spec_problems(spec)
    if problems:
        raise ValueError(f"cannot register primitive {getattr(spec, 'name', spec)!r}: " + "; ".join(problems))
    _forget_hashes(spec.name)
    SPECS[spec.name] = spec
    return spec


def _forget_hashes(name: str) -> None:
    for style in TOOL_RENDERINGS:
        _SPEC_HASHES.pop(f"{name}:{style}", None)


def unregister_spec(name: str) -> None:
    """Remove a registered primitive (for tests); another primitive derived from it must go first."""
    get_spec(name)
    users = [s.name for s in SPECS.values() if s.derived_from is not None and s.derived_from.source == name]
    if users:
        raise ValueError(f"cannot unregister {name!r}: {users} derive their decision points from it")
    del SPECS[name]
    _forget_hashes(name)


@contextlib.contextmanager
def registered(spec: PrimitiveSpec) -> Iterator[PrimitiveSpec]:
    """``with registered(spec):`` the primitive is registered inside the block only."""
    register_spec(spec)
    try:
        yield spec
    finally:
        unregister_spec(spec.name)


for _spec in (DECOMPOSE, GET_ORDER, CHECK_PREREQUISITES, MATCH_FUNC, MATCH_FILL):
    register_spec(_spec)


def get_spec(name: str) -> PrimitiveSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown primitive {name!r}; expected one of {list(SPECS)}") from None


# ------------------------------------------------- the task-graph checks, once
# decompose's ids_consistent and get_order's permutation_of_batch checks are the one implementation of these
# rules: worked solutions (kernel/scenario.py) and verify (data_gen/verify.py) ask them too, so an annotation
# is held to exactly what the contract holds a model's answer to.
@dataclass(frozen=True)
class _Tasks:
    tasks: Sequence[Any]


@dataclass(frozen=True)
class _Id:
    id: str


@dataclass(frozen=True)
class _Order:
    ordered_task_ids: Sequence[str]


def task_ids_problem(tasks: Sequence[Any]) -> str | None:
    """Unique ids, dependencies on known ids only, none on itself: decompose's ``ids_consistent`` check on
    any tasks with ``id`` and ``depends_on`` (a decomposition, or a worked solution's annotated tasks)."""
    return _dec_ids(None, _Tasks(tasks))  # type: ignore[arg-type]  # the check reads only out.tasks


def permutation_problem(ids: Sequence[str], order: Sequence[str]) -> str | None:
    """``order`` holds exactly ``ids``, each once: get_order's ``permutation_of_batch`` check on plain ids."""
    return _order_perm(_Tasks([_Id(i) for i in ids]), _Order(order))  # type: ignore[arg-type]


def derived_specs(source: str) -> list[PrimitiveSpec]:
    """The registered primitives whose decision points are taken at ``source``'s."""
    return [s for s in SPECS.values() if s.derived_from is not None and s.derived_from.source == source]


# ------------------------------------------------------- names in config types
def _one_of(names: Sequence[str]) -> str:
    """The list of choices as pydantic words a Literal's: 'a', 'b' or 'c'."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def name_validator(*extra: str) -> Callable[[str], str]:
    """A validator accepting a registered primitive's name (or one of ``extra``), checked against the registry
    when the config is validated, with a Literal's error (so a misspelt name lists the choices)."""

    def check(v: str) -> str:
        if v in SPECS or v in extra:
            return v
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": _one_of([*SPECS, *extra])}
        )

    return check


# The name of a registered primitive, as a config type (keys of per-primitive tables, lists of primitives).
PrimitiveName = Annotated[str, AfterValidator(name_validator())]

V = TypeVar("V")


def per_primitive(table: Mapping[str, V], default: Callable[[PrimitiveSpec], V]) -> dict[str, V]:
    """A per-primitive config table completed from the registry: every registered primitive, in registry order;
    one the table does not name takes ``default(spec)`` (its spec's declared value, never an implicit 0).
    The table's keys are validated as :data:`PrimitiveName` before this is called."""
    return {n: table[n] if n in table else default(s) for n, s in SPECS.items()}


def default_sizes() -> dict[str, int]:
    """Examples per primitive when data.sizes names none (the paper's Table 4 for the five)."""
    return {n: s.default_size for n, s in SPECS.items()}


def default_thresholds() -> dict[str, float]:
    """Exact-match gates per primitive when validate's thresholds name none."""
    return {n: s.gate_threshold for n, s in SPECS.items()}


def _short_type(schema: dict[str, Any]) -> str:
    if "const" in schema and "enum" not in schema:  # a one-value Literal renders as const
        return f"enum[{schema['const']}]"
    if "enum" in schema:
        return "enum[" + "|".join(str(v) for v in schema["enum"]) + "]"
    t = schema.get("type")
    if isinstance(t, list):
        t = "|".join(x for x in t if x != "null")
    if t == "array":
        item = schema.get("items", {})
        return f"list[{_short_type(item) if item else 'any'}]"
    if t is None and "anyOf" in schema:
        return "|".join(_short_type(s) for s in schema["anyOf"] if s.get("type") != "null")
    return t or "any"


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


def spec_hashes() -> dict[str, str]:
    """Each primitive's current spec hash, in canonical order: what a bundle's adapters must have been trained under."""
    return {name: SPECS[name].spec_hash for name in PRIMITIVE_NAMES}
