"""The five SLM primitives of the kernel, each defined once.

For every primitive this module holds its input and output schema, its
system prompt and input rendering, its output contract, and the canonical
form used for exact match. Data generation renders training examples only
through these specs; training, validation and the kernel use the same ones.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forethought.primitives import Check, Contract, Primitive, slm
from forethought.primitives.primitive import Message, default_parse

from .grounding import Haystack, canonical, normalize

PRIMITIVE_NAMES = ("decompose", "get_order", "check_prerequisites", "match_func", "match_fill")


# ----------------------------------------------------------------- shared models
class ToolBrief(BaseModel):
    """What a primitive sees of a tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    params: dict[str, str] = Field(default_factory=dict)  # name -> short type ("string", "number", "enum[a|b]")
    required: list[str] = Field(default_factory=list)
    writes: list[str] = Field(default_factory=list)  # scratchpad keys a successful call sets


class TaskRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str
    tool_name: str | None = None


class UnitTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str
    tool_name: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)


class ProposedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_name: str
    parameters: dict[str, Any] = Field(default_factory=dict)


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    first = text.split(". ")[0]
    return first if len(first) <= n else first[: n - 1] + "…"


def _dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "), default=str)


def render_tools(tools: Sequence[ToolBrief]) -> str:
    lines = []
    for t in tools:
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
class PrimitiveSpec:
    name: str
    system: str
    input_type: type[BaseModel]
    output_type: type[BaseModel]
    render_user: Callable[[Any], str]
    checks: tuple[Check, ...]
    canonical_fn: Callable[[Any], Any]

    def messages(self, inp: BaseModel, feedback: Sequence[str] = ()) -> list[Message]:
        msgs: list[Message] = [
            {"role": "system", "content": self.system},
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
        """The completion a model is trained to produce: compact JSON of the output."""
        data = output.model_dump(mode="json") if isinstance(output, BaseModel) else output
        return json.dumps(self.output_type.model_validate(data).model_dump(mode="json"), ensure_ascii=False, separators=(", ", ": "))

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

    @property
    def spec_hash(self) -> str:
        """What the model sees and how its answer is judged, hashed (cached; see :meth:`compute_spec_hash`)."""
        if self.name not in _SPEC_HASHES:
            _SPEC_HASHES[self.name] = self.compute_spec_hash()
        return _SPEC_HASHES[self.name]

    def golden(self) -> list[tuple[BaseModel, BaseModel]]:
        """Fixed inputs and targets (kernel/spec_golden.json) whose rendering the spec hash covers."""
        return [(self.input_type.model_validate(g["input"]), self.output_type.model_validate(g["target"])) for g in _golden()[self.name]]

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
            parts.append(json.dumps(self.messages(inp, ("[value] golden_check: an example violation",))[-1], ensure_ascii=False, indent=1))
            parts.append(f"## golden {i}: target text\n{self.target_text(target)}")
            parts.append(f"## golden {i}: canonical form\n{self.canonical(target)}")
            parts.append(f"## golden {i}: decoding schema\n{json.dumps(self.decoding_schema(inp), sort_keys=True, ensure_ascii=False)}")
            parts.append(f"## golden {i}: contract verdict\n{json.dumps(self.check_output(inp, target).to_dict(), sort_keys=True, default=str)}")
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

    def decoding_schema(self, inp: BaseModel) -> dict[str, Any]:
        """The output schema specialised to this input, for constrained decoding.

        Names the model must copy (registered tools, batch task ids, the
        missing parameters) become enums or fixed keys, and free strings get a
        length bound, so decoding cannot produce them wrongly.
        """
        return _decoding_schema(self.name, inp)

    def primitive(self, *, adapter: str | None = None) -> Primitive:
        return slm(
            self.name,
            self.input_type,
            self.output_type,
            self.contract(),
            render=self.messages,
            parse=self.parse,
            json_schema=self.decoding_schema,
            adapter=adapter or self.name,
            version=self.spec_hash,
        )


def _grounded_params(tool: ToolBrief | None, params: dict[str, Any], hay: Haystack, enums: dict[str, list[str]]) -> str | None:
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
    return (
        f"Request: {x.user}\n"
        f"Context: {_dumps(x.context)}\n"
        f"State: {_dumps(x.state)}\n"
        f"Tools:\n{render_tools(x.tools)}"
    )


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
    hay = Haystack([inp.user], [inp.context, inp.state])
    tm = _tool_map(inp.tools)
    for t in out.tasks:
        msg = _grounded_params(tm.get(t.tool_name or ""), t.parameters, hay, _enums(tm.get(t.tool_name or "")))
        if msg:
            return f"task {t.id}: {msg}"
    return None


def _dec_cover(inp: DecomposeInput, out: DecomposeOutput) -> str | None:
    if inp.user.strip() and not out.tasks:
        return "a non-empty request was decomposed into no tasks"
    return None


def _dec_canon(out: DecomposeOutput) -> Any:
    # The task text is explanatory; exact match compares the decisions.
    return [
        {"id": t.id, "tool_name": t.tool_name, "depends_on": sorted(t.depends_on), "parameters": normalize(t.parameters)}
        for t in out.tasks
    ]


DECOMPOSE = PrimitiveSpec(
    name="decompose",
    system=(
        "You decompose a user request into atomic unit tasks. Each task calls exactly one tool from the list "
        "(tool_name null if no listed tool can do it). Give each task an id, a short imperative text, the ids it "
        "depends on (a task that needs another's result or effect), and the parameter values stated in the "
        "request or context. Do not invent values and do not add tasks the user did not ask for. "
        'Answer with JSON: {"tasks": [{"id", "text", "tool_name", "depends_on", "parameters"}]}.'
    ),
    input_type=DecomposeInput,
    output_type=DecomposeOutput,
    render_user=_render_decompose,
    checks=(
        Check("ids_consistent", "value", _dec_ids),
        Check("tools_registered", "value", _dec_tools),
        Check("values_grounded", "value", _dec_grounded),
        Check("covers_request", "semantic", _dec_cover),
    ),
    canonical_fn=_dec_canon,
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
        f"Tools:\n{render_tools(x.tools)}"
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
    if inp.key not in tool.writes:
        return f"{tool.name} does not establish {inp.key!r} (it sets {tool.writes or 'nothing'})"
    return None


def _prereq_grounded(inp: CheckPrereqInput, out: CheckPrereqOutput) -> str | None:
    if out.task is None:
        return None
    hay = Haystack([inp.task.text], [inp.context, inp.state])
    tool = _tool_map(inp.tools).get(out.task.tool_name)
    return _grounded_params(tool, out.task.parameters, hay, _enums(tool))


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
        Check("values_grounded", "value", _prereq_grounded),
    ),
    canonical_fn=lambda out: None if out.task is None else {"tool_name": out.task.tool_name, "parameters": normalize(out.task.parameters)},
)


# ---------------------------------------------------------------- 4. match_func
class MatchFuncInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: TaskRef
    tools: list[ToolBrief]


class MatchFuncOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_name: str | None


def _render_match(x: MatchFuncInput) -> str:
    return f"Task: {x.task.text}\nTools:\n{render_tools(x.tools)}"


def _match_registered(inp: MatchFuncInput, out: MatchFuncOutput) -> str | None:
    if out.tool_name is not None and out.tool_name not in _tool_map(inp.tools):
        return f"tool {out.tool_name!r} is not in the registry"
    return None


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
        return f"values must name exactly the missing parameters {sorted(want)}" + (
            f"; extra {extra}" if extra else ""
        ) + (f"; lacking {lacking}" if lacking else "")
    return None


def _fill_grounded(inp: MatchFillInput, out: MatchFillOutput) -> str | None:
    hay = Haystack([inp.task.text], [inp.context, inp.state])
    return _grounded_params(inp.tool, {k: v for k, v in out.values.items() if v is not None}, hay, _enums(inp.tool))


MATCH_FILL = PrimitiveSpec(
    name="match_fill",
    system=(
        "Propose values only for the missing parameters of the tool, grounded in the task text, the turn context "
        "or the scratchpad state; a value that must come from state is read from the state, never invented. "
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
)


SPECS: dict[str, PrimitiveSpec] = {
    s.name: s for s in (DECOMPOSE, GET_ORDER, CHECK_PREREQUISITES, MATCH_FUNC, MATCH_FILL)
}


def get_spec(name: str) -> PrimitiveSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown primitive {name!r}; expected one of {list(SPECS)}") from None


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
    )


_STR = {"type": "string", "maxLength": 160}
_ANY_VALUE = {"anyOf": [_STR, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
                        {"type": "array", "items": {"anyOf": [_STR, {"type": "number"}, {"type": "boolean"}]}, "maxItems": 8}]}


def _tool_enum(tools: Sequence[ToolBrief], nullable: bool) -> dict[str, Any]:
    names: list[Any] = [t.name for t in tools]
    return {"enum": names + ([None] if nullable else [])}


def _params_object(tool: ToolBrief | None) -> dict[str, Any]:
    if tool is None:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    return {"type": "object", "properties": {p: _ANY_VALUE for p in tool.params}, "additionalProperties": False}


def _decoding_schema(name: str, inp: Any) -> dict[str, Any]:
    if name == "match_func":
        return {"type": "object", "properties": {"tool_name": _tool_enum(inp.tools, True)}, "required": ["tool_name"], "additionalProperties": False}
    if name == "get_order":
        ids = [t.id for t in inp.tasks]
        if len(ids) <= 5:  # every permutation spelled out: the output is a permutation by construction
            import itertools

            order: dict[str, Any] = {"anyOf": [{"const": list(p)} for p in itertools.permutations(ids)]}
        else:  # too many to list: right ids and length, uniqueness left to the contract
            order = {"type": "array", "items": {"enum": ids}, "minItems": len(ids), "maxItems": len(ids)}
        return {"type": "object", "properties": {"ordered_task_ids": order}, "required": ["ordered_task_ids"], "additionalProperties": False}
    if name == "match_fill":
        return {
            "type": "object",
            "properties": {"values": {"type": "object", "properties": {m: _ANY_VALUE for m in inp.missing},
                                      "required": list(inp.missing), "additionalProperties": False}},
            "required": ["values"],
            "additionalProperties": False,
        }
    if name == "check_prerequisites":
        writers = [t for t in inp.tools if inp.key in t.writes] or list(inp.tools)
        task = {"anyOf": [{"type": "object", "properties": {"tool_name": {"const": t.name}, "parameters": _params_object(t)},
                           "required": ["tool_name", "parameters"], "additionalProperties": False} for t in writers]}
        return {"type": "object", "properties": {"task": {"anyOf": [task, {"type": "null"}]}}, "required": ["task"], "additionalProperties": False}
    if name == "decompose":
        item = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "maxLength": 12},
                "text": _STR,
                "tool_name": _tool_enum(inp.tools, True),
                "depends_on": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 8},
                "parameters": {"type": "object", "additionalProperties": _ANY_VALUE},
            },
            "required": ["id", "text", "tool_name", "depends_on", "parameters"],
            "additionalProperties": False,
        }
        return {"type": "object", "properties": {"tasks": {"type": "array", "items": item, "maxItems": 12}}, "required": ["tasks"], "additionalProperties": False}
    raise KeyError(name)


def spec_hashes() -> dict[str, str]:
    """Each primitive's current spec hash, in canonical order: what a bundle's adapters must have been trained under."""
    return {name: SPECS[name].spec_hash for name in PRIMITIVE_NAMES}
