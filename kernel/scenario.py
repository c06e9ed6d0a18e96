"""Scenario and worked-solution format (one model; annotations are optional).

A *scenario* is what ``forethought run`` executes: domains, initial state,
configuration and the user turns. A *worked solution* is a scenario whose
turns also carry every sub-process decision (unit tasks, order,
prerequisite checks, function matches, parameter values and their sources),
the reference calls and state assertions, so that ``forethought verify`` can
replay it. The JSON Schema is written by ``python -m kernel.scenario``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from forethought.errors import UserError

from .registry.model import ToolSpec

PATTERN_TAGS = (
    "cross_turn_state",  # a later turn uses state established by an earlier one
    "dependency_chain",  # multi-step chain of dependent tasks
    "prereq_absent_retrieve",  # a prerequisite is absent and retrieved inline
    "prereq_not_met_blocked",  # a prerequisite is not met: task blocked with a remediation
    "tau_over_s",  # turn context wins over the scratchpad; unmentioned fields preserved
    "setup_call",  # a setup call the user did not name (authenticate, resolve a code)
    "no_matching_function",  # no registry tool can do a task
    "missing_parameter",  # a required value cannot be grounded
    "no_side_effect",  # the request must not trigger an unrequested side-effecting call
    "parallel_tasks",  # independent tasks ordered by get_order
    "cyclic_dependency",  # the decomposition is cyclic: the turn halts
)
Outcome = Literal["executed", "blocked", "missing_function", "missing_param", "tool_failed", "skipped"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProposedTaskAnn(_Strict):
    tool_name: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class PrereqAnn(_Strict):
    """One Check(p, S) decision and what followed it."""

    key: str
    outcome: Literal["met", "not_met", "absent"]
    retrieval: ProposedTaskAnn | None = None  # absent: the task proposed to establish the key
    recheck: Literal["met", "not_met"] | None = None  # absent: Check after the retrieval
    remediation: ProposedTaskAnn | None = None  # not met (at first or on recheck): the proposed fix

    @model_validator(mode="after")
    def _consistent(self) -> PrereqAnn:
        if self.outcome != "absent" and (self.retrieval is not None or self.recheck is not None):
            raise ValueError("retrieval/recheck only apply when the outcome is 'absent'")
        if self.outcome == "absent" and self.recheck is None:
            raise ValueError("an 'absent' prerequisite needs its recheck outcome ('met' or 'not_met')")
        if self.remediation is not None and "not_met" not in (self.outcome, self.recheck):
            raise ValueError("a remediation only follows a 'not_met' outcome")
        return self


class BindingAnn(_Strict):
    """How one parameter got its value: Lookup in tau, then S, else match_fill."""

    source: Literal["tau", "S", "fill", "missing"]
    value: Any = None
    # For source=fill, where the value comes from: "S:<key>", "tau:<key>", or "literal" (value itself).
    fill_from: str | None = None

    @model_validator(mode="after")
    def _fill(self) -> BindingAnn:
        if self.source == "fill":
            ff = self.fill_from or "literal"
            if not (ff == "literal" or ff.startswith("S:") or ff.startswith("tau:")):
                raise ValueError(f"fill_from must be 'S:<key>', 'tau:<key>' or 'literal', got {ff!r}")
        return self


class TaskAnn(_Strict):
    id: str
    text: str
    tool: str | None  # decompose's tool_name (null: no registry tool does this)
    depends_on: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)  # values decompose grounds in the request
    match: str | None = None  # match_func's answer; defaults to `tool`
    prerequisites: list[PrereqAnn] = Field(default_factory=list)
    bindings: dict[str, BindingAnn] = Field(default_factory=dict)
    outcome: Outcome = "executed"
    setup: bool = False  # a task the user did not name (authenticate, resolve a code, navigate first)

    @model_validator(mode="after")
    def _default_match(self) -> TaskAnn:
        if "match" not in self.model_fields_set:
            self.match = self.tool
        return self


class StateAssertion(_Strict):
    path: str  # "/"-separated path into the environment snapshot, e.g. "file_system/cwd"
    equals: Any = None
    absent: bool = False  # the path must not exist


class RefCall(_Strict):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class Turn(_Strict):
    user: str
    paraphrases: list[str] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)  # turn context tau
    config: dict[str, Any] = Field(default_factory=dict)  # configuration added at this turn
    # ---- annotations (worked solutions) ----
    tasks: list[TaskAnn] | None = None
    order: list[str] | None = None
    # Reference calls actually committed, in order: "cd(folder='x')" strings or {tool, args} objects.
    calls: list[str | RefCall] | None = None
    halt: Literal["cycle"] | None = None
    state: list[StateAssertion] = Field(default_factory=list)
    scratchpad: dict[str, Any] = Field(default_factory=dict)  # expected entries of S after the turn
    notes: str = ""

    @model_validator(mode="after")
    def _references_resolve(self) -> Turn:
        """Task ids, dependencies and the order refer to this turn's tasks; call strings parse."""
        from .registry.callparse import CallParseError, parse_call

        if self.tasks is not None:
            ids = [t.id for t in self.tasks]
            dup = sorted({i for i in ids if ids.count(i) > 1})
            if dup:
                raise ValueError(f"task ids are not unique: {dup}")
            for t in self.tasks:
                unknown = [d for d in t.depends_on if d not in ids]
                if unknown:
                    raise ValueError(f"task {t.id!r} depends on unknown task ids {unknown}")
            unknown = [o for o in self.order or [] if o not in ids]
            if unknown:
                raise ValueError(f"order names unknown task ids {unknown} (tasks: {ids})")
        for i, c in enumerate(self.calls or []):
            if isinstance(c, str):
                try:
                    parse_call(c)
                except CallParseError as exc:
                    raise ValueError(f"calls[{i}] {c!r} is not a call: {exc}") from None
        return self

    @property
    def annotated(self) -> bool:
        return self.tasks is not None

    def reference_calls(self) -> list[RefCall]:
        """The reference calls as structured objects (call strings are parsed safely, never evaluated)."""
        from .registry.callparse import parse_call

        out = []
        for c in self.calls or []:
            if isinstance(c, RefCall):
                out.append(c)
            else:
                pc = parse_call(c)
                out.append(RefCall(tool=pc.name, args=pc.args))
        return out


class SlotDef(_Strict):
    type: str
    value: Any


class RegistryRef(_Strict):
    domains: list[str] | None = None  # default: the solution's domains
    include: list[str] | None = None  # only these tools
    exclude: list[str] = Field(default_factory=list)
    extra: list[ToolSpec] = Field(default_factory=list)  # tools with no implementation (distractors)


class Solution(_Strict):
    id: str
    title: str = ""
    description: str = ""
    domains: list[str]
    tags: list[str] = Field(default_factory=list)
    slots: dict[str, SlotDef] = Field(default_factory=dict)
    registry: RegistryRef = Field(default_factory=RegistryRef)
    initial_state: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    turns: list[Turn]
    source_file: str | None = Field(default=None, exclude=True)

    @property
    def annotated(self) -> bool:
        return all(t.annotated for t in self.turns)

    def rendered(self, values: dict[str, Any] | None = None) -> Solution:
        """Substitute ``${slot}`` placeholders everywhere (optionally with new slot values)."""
        vals = {k: s.value for k, s in self.slots.items()}
        vals.update(values or {})
        data = self.model_dump(mode="json", exclude={"slots", "source_file"})
        out = render_slots(data, vals, where=self.id)
        out["slots"] = {k: {"type": s.type, "value": vals[k]} for k, s in self.slots.items()}
        sol = Solution.model_validate(out)
        sol.source_file = self.source_file
        return sol


_SLOT = re.compile(r"\$\{(\w+)\}")


def render_slots(obj: Any, values: dict[str, Any], where: str = "") -> Any:
    if isinstance(obj, str):
        m = _SLOT.fullmatch(obj)
        if m:
            if m.group(1) not in values:
                raise KeyError(f"{where}: undefined slot ${{{m.group(1)}}}")
            return values[m.group(1)]

        def sub(mm: re.Match[str]) -> str:
            if mm.group(1) not in values:
                raise KeyError(f"{where}: undefined slot ${{{mm.group(1)}}}")
            return str(values[mm.group(1)])

        return _SLOT.sub(sub, obj)
    if isinstance(obj, dict):
        return {render_slots(k, values, where): render_slots(v, values, where) for k, v in obj.items()}
    if isinstance(obj, list):
        return [render_slots(v, values, where) for v in obj]
    return obj


def _format_error(exc: ValidationError, path: str) -> str:
    lines = []
    for e in exc.errors()[:10]:
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        msg = "unknown field" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"{loc}: {msg}")
    more = f" (+{len(exc.errors()) - 10} more)" if len(exc.errors()) > 10 else ""
    return "; ".join(lines) + more


def parse_solution(data: Any, path: str = "<data>") -> Solution:
    if not isinstance(data, dict):
        raise UserError("a solution must be a JSON/YAML object", path)
    try:
        sol = Solution.model_validate(data)
    except ValidationError as exc:
        raise UserError(_format_error(exc, path), path) from None
    sol.source_file = path
    try:
        sol.rendered()
    except KeyError as exc:
        raise UserError(str(exc.args[0]), path) from None
    return sol


def load_solution(path: str | Path) -> Solution:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", str(p)) from None
    try:
        data = yaml.safe_load(text) if p.suffix in (".yaml", ".yml") else json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", str(p)) from None
    except yaml.YAMLError as exc:
        raise UserError(f"not valid YAML: {exc}", str(p)) from None
    return parse_solution(data, str(p))


def solution_files(paths: list[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(x for x in p.rglob("*") if x.suffix in (".json", ".yaml", ".yml") and x.name != "schema.json"))
        elif p.exists():
            out.append(p)
        else:
            raise UserError("no such file or directory", str(p))
    return out


def json_schema() -> dict[str, Any]:
    schema = Solution.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "forethought worked solution / scenario"
    schema.get("properties", {}).pop("source_file", None)
    return schema


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(json_schema(), indent=2))
