"""Scenario and worked-solution format (one model; annotations are optional).

A *scenario* is what ``forethought run`` executes: domains, initial state,
configuration and the user turns. A *worked solution* is a scenario whose
turns also carry every sub-process decision (unit tasks, order,
prerequisite checks, function matches, parameter values and their sources),
the reference calls and state assertions, so that ``forethought verify`` can
replay it. The JSON Schema is written by ``python -m forethought.kernel.scenario``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from .registry.model import ToolSpec
from .solution_format import CHANGES, FORMAT_VERSION
from .specs import FanOut, TaskCondition

PATTERN_TAGS = (
    "cross_turn_state",  # a later turn uses state established by an earlier one
    "dependency_chain",  # multi-step chain of dependent tasks
    "prereq_absent_retrieve",  # a prerequisite is absent and retrieved inline
    "prereq_not_met_blocked",  # a prerequisite is not met: task blocked with a remediation
    "request_over_scratchpad",  # the request (turn context) wins over the scratchpad; unmentioned fields preserved
    "setup_call",  # a setup call the user did not name (authenticate, resolve a code)
    "no_matching_function",  # no registry tool can do a task
    "missing_parameter",  # a required value cannot be grounded
    "no_side_effect",  # the request must not trigger an unrequested side-effecting call
    "parallel_tasks",  # independent tasks ordered by get_order
    "cyclic_dependency",  # the decomposition is cyclic: the turn halts
    "per_entity_prerequisite",  # a prerequisite checked on one entity's entry while another entity's differs
    "resume_unfinished_task",  # a later turn completes a blocked / missing_param task from its unfinished entry
    "composed_value",  # a committed string argument grounded by its parts plus connective text, not as a whole
    "conditional_task",  # a task with a `when` predicate: the replay evaluates it and the call happens iff it holds
    "fan_out",  # a task with `for_each`: one instance (and one call) per (filtered) element of an earlier task's list
)
Outcome = Literal[
    "executed", "blocked", "missing_function", "missing_param", "tool_failed", "skipped", "skipped_condition", "partial"
]
# The outcomes of a task (or fan-out instance) that reached Lookup, so it has bindings.
LOOKED_UP = ("executed", "missing_param", "tool_failed")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProposedTaskAnn(_Strict):
    """A task proposed by check_prerequisites: a retrieval (outcome absent) or a remediation (not met)."""

    tool_name: str = Field(description="Registry tool the proposed task calls.")
    parameters: dict[str, Any] = Field(
        default_factory=dict,
        description="Arguments the proposal states; each must be grounded in the task, the turn context or S. "
        "Required parameters it omits are looked up in tau, then S, when a retrieval runs.",
    )


# A plain key, or a per-entity key: the key, then the entity's value in one pair of brackets at the end.
_PREREQ_KEY = re.compile(r"[^\[\]]+(\[[^\[\]]*\])?")


class PrereqAnn(_Strict):
    """One Check(p, S) decision and what followed it."""

    key: str = Field(
        description="Scratchpad key of the prerequisite, as the proposed tool declares it (kernel/domains/<name>/tools.py); "
        "for a per-entity prerequisite (one that names an entity parameter) the entity's entry, "
        "'<key>[<value>]', e.g. 'line_status[${line}]' ('<key>[]' when no value is known).",
        json_schema_extra={"pattern": f"^{_PREREQ_KEY.pattern}$"},
    )
    outcome: Literal["met", "not_met", "absent"] = Field(
        description="Check(p, S): 'met' (S satisfies it), 'not_met' (S holds the key with a failing value: the task "
        "is blocked and the task's remaining prerequisites are not checked), 'absent' (the key is not in S: a "
        "retrieval is proposed and run, then the key is re-checked)."
    )
    retrieval: ProposedTaskAnn | None = Field(
        None,
        description="Only for outcome 'absent': the task proposed to establish the key, or null when none can be grounded.",
    )
    recheck: Literal["met", "not_met"] | None = Field(
        None, description="Required for outcome 'absent' (and only then): Check(p, S) after the retrieval ran."
    )
    remediation: ProposedTaskAnn | None = Field(
        None,
        description="Only after a 'not_met' outcome or recheck: the task proposed to fix it (reported, never executed), "
        "or null when no tool can establish the key without an unrequested side effect.",
    )

    @field_validator("key")
    @classmethod
    def _well_formed(cls, key: str) -> str:
        if not _PREREQ_KEY.fullmatch(key):
            raise ValueError(
                f"{key!r} is not a prerequisite key: a plain key ('customer_identified'), or a per-entity key "
                "'<key>[<entity>]' with one pair of brackets at its end ('line_status[${line}]')"
            )
        return key

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
    """How one parameter got its value: Lookup in the request, then the scratchpad, else match_fill."""

    source: Literal["request", "scratchpad", "fill", "missing"] = Field(
        description="Where the kernel's Lookup found the value: 'request' (the task's parameters, then the turn's "
        "context), 'scratchpad' (only when the request has no such key), 'fill' (neither had it; match_fill proposed it), "
        "'missing' (nothing could be grounded: the task ends missing_param)."
    )
    value: Any = Field(
        None, description="The bound value (ignored for source 'missing'). Use \"${slot}\" for an entity."
    )
    fill_from: str | None = Field(
        None,
        description="Only for source 'fill': where match_fill reads the value, 'scratchpad:<key>', 'request:<key>', or 'literal' "
        "(the value itself, which must be grounded, e.g. a list built from several known values). Default 'literal'.",
    )

    @model_validator(mode="after")
    def _fill(self) -> BindingAnn:
        if self.source == "fill":
            ff = self.fill_from or "literal"
            if not (ff == "literal" or ff.startswith("scratchpad:") or ff.startswith("request:")):
                raise ValueError(f"fill_from must be 'scratchpad:<key>', 'request:<key>' or 'literal', got {ff!r}")
        return self


class TaskAnn(_Strict):
    """One unit task of decompose's output, and every decision the kernel takes for it."""

    id: str = Field(description="Task id, unique within the turn (e.g. 't1').")
    text: str = Field(description="Short description of the task, as decompose would write it.")
    tool: str | None = Field(description="The tool decompose proposes; null when no registry tool can do the task.")
    depends_on: list[str] = Field(
        default_factory=list,
        description="Ids of tasks of this turn that must run first. State dependencies count (cd before ls).",
    )
    parameters: dict[str, Any] = Field(
        default_factory=dict,
        description="Values decompose grounds in the request or turn context (each must appear literally in the "
        "request, the context or the scratchpad view, or be an enum value of the tool).",
    )
    match: str | None = Field(
        None,
        description="match_func's answer (the tool chosen from the task text, or null). Omit when it equals 'tool'.",
    )
    prerequisites: list[PrereqAnn] = Field(
        default_factory=list,
        description="One entry per prerequisite the kernel checks, in the tool's declared order (none after a 'not_met').",
    )
    bindings: dict[str, BindingAnn] = Field(
        default_factory=dict,
        description="Every parameter the kernel binds for the matched tool (required ones, plus optional ones stated in "
        "'parameters'). Empty for tasks that are blocked, skipped or have no matching function.",
    )
    outcome: Outcome = Field(
        "executed",
        description="executed | blocked (a prerequisite not met) | missing_function (match is null) | missing_param "
        "(a required value cannot be grounded) | tool_failed (the call was rejected by ToolGate or failed) | skipped "
        "(a task it depends on did not execute).",
    )
    setup: bool = Field(
        False, description="True for a task the user did not name (authenticate, resolve a code, navigate first)."
    )
    when: TaskCondition | None = Field(
        None,
        description="decompose's predicate for a conditional task: {key, op, value} on S (a declared write, or a result entry "
        "'<tool>.<field>' of a task it depends on), evaluated right before the task runs. False (or the key absent): outcome "
        "'skipped_condition', nothing called.",
    )
    for_each: FanOut | None = Field(
        None,
        description="decompose's fan-out: {task, field, param, item_field, where}. The task runs once per element of the list "
        "field 'field' of task 'task''s result (which must be in depends_on), the element (or its item_field) bound to 'param' "
        "from tau; 'where' {field, op, value} keeps only matching elements. Needs 'instances'.",
    )
    instances: list[InstanceAnn] | None = Field(
        None,
        description="Only with for_each: one entry per instance the kernel runs, in element order (at most KernelConfig.max_fanout). "
        "For such a task 'prerequisites' and 'bindings' are what every instance checks and binds (the for_each parameter is "
        "bound from tau to the instance's value), and 'outcome' sums them up: executed (every instance executed), partial "
        "(one did not, or elements were beyond the bound), skipped_condition (no element).",
    )
    beyond_bound: list[Any] = Field(
        default_factory=list,
        description="Only with for_each: the elements beyond KernelConfig.max_fanout, reported and not run.",
    )

    @model_validator(mode="after")
    def _default_match(self) -> TaskAnn:
        if "match" not in self.model_fields_set:
            self.match = self.tool
        if (self.for_each is None) != (self.instances is None):
            raise ValueError("for_each and instances go together: list the instances the fan-out runs ([] for none)")
        if self.for_each is not None and self.for_each.task not in self.depends_on:
            raise ValueError(
                f"for_each reads task {self.for_each.task!r}, which must be in depends_on {self.depends_on}"
            )
        if self.beyond_bound and self.for_each is None:
            raise ValueError("beyond_bound only applies to a for_each task")
        return self

    def instance_tasks(self) -> list[TaskAnn]:
        """A fan-out task's instances as tasks of their own (ids '<id>[k]'), with every decision the kernel takes for each:
        the task's prerequisites and bindings (its own where given), the for_each parameter bound from tau."""
        if self.for_each is None or not self.instances:
            return []
        out = []
        for k, inst in enumerate(self.instances):
            bindings: dict[str, BindingAnn] = {}
            if inst.outcome in LOOKED_UP:
                bindings = {
                    **self.bindings,
                    self.for_each.param: BindingAnn(source="request", value=inst.value),
                    **inst.bindings,
                }
            out.append(
                TaskAnn(
                    id=instance_id(self.id, k),
                    text=self.text,
                    tool=self.tool,
                    depends_on=list(self.depends_on),
                    parameters={**self.parameters, self.for_each.param: inst.value},
                    match=self.match,
                    prerequisites=list(self.prerequisites if inst.prerequisites is None else inst.prerequisites),
                    bindings=bindings,
                    outcome=inst.outcome,
                    setup=self.setup,
                )
            )
        return out


class InstanceAnn(_Strict):
    """One instance of a fan-out task: the element it is for and how it ended."""

    value: Any = Field(
        description='The value bound to the for_each parameter (the element, or its item_field). Use "${slot}" for an entity.'
    )
    outcome: Outcome = Field(
        "executed", description="How this instance ended; a failing instance abandons only itself."
    )
    prerequisites: list[PrereqAnn] | None = Field(
        None, description="This instance's prerequisite checks, when they differ from the task's."
    )
    bindings: dict[str, BindingAnn] = Field(
        default_factory=dict, description="Bindings of this instance that differ from the task's."
    )


def instance_id(task_id: str, k: int) -> str:
    """The id of a fan-out task's k-th instance (0-based), in the kernel's records and the annotations alike."""
    return f"{task_id}[{k}]"


TaskAnn.model_rebuild()


class StateAssertion(_Strict):
    """A check on the world after the turn."""

    path: str = Field(
        description="'/'-separated path into the domain snapshots, e.g. 'file_system/cwd' (list items by index)."
    )
    equals: Any = Field(None, description="The value expected at that path.")
    absent: bool = Field(False, description="True: the path must not exist (then 'equals' is ignored).")


class RefCall(_Strict):
    """A reference call as an object (prefer it to the string form when an argument is a typed slot)."""

    tool: str = Field(description="Tool name.")
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments, by parameter name.")


class Turn(_Strict):
    """One user turn; the fields after 'config' are the annotations of a worked solution."""

    user: str = Field(description="The user's request. Write entities as ${slot} placeholders.")
    paraphrases: list[str] = Field(
        default_factory=list,
        description="Other wordings of the request with the same meaning and the same ${slot} placeholders. verify "
        "replays the turn with each of them in place of 'user'; every annotation must still hold.",
    )
    context: dict[str, Any] = Field(
        default_factory=dict,
        description="Turn context tau given to the kernel besides the text (e.g. an access token).",
    )
    config: dict[str, Any] = Field(
        default_factory=dict, description="Scratchpad entries added at the start of this turn."
    )
    # ---- annotations (worked solutions) ----
    tasks: list[TaskAnn] | None = Field(None, description="decompose's unit tasks and the decisions taken for each.")
    order: list[str] | None = Field(
        None,
        description="The execution order of all task ids (get_order's decisions merged with the dependency layers).",
    )
    calls: list[str | RefCall] | None = Field(
        None,
        description="The calls that must be committed, in order (retrievals included where they run): strings "
        "like \"cd(folder='archive')\" or {tool, args} objects.",
    )
    halt: Literal["cycle"] | None = Field(
        None, description="'cycle': the decomposition is cyclic; the turn halts with nothing executed."
    )
    state: list[StateAssertion] = Field(default_factory=list, description="Assertions on the world after the turn.")
    scratchpad: dict[str, Any] = Field(
        default_factory=dict, description="Expected entries of S after the turn (a subset)."
    )
    must_not_call: list[str] = Field(
        default_factory=list,
        description="Side-effecting registry tools this request could tempt the agent to call but must not (backs the "
        "no_side_effect tag). verify requires each to be registered, to have side effects, and not to be called in this turn.",
    )
    notes: str = Field("", description="Why the non-obvious decisions are right (order, sources, outcomes).")

    @model_validator(mode="after")
    def _references_resolve(self) -> Turn:
        """Task ids, dependencies and the order refer to this turn's tasks; call strings parse."""
        from .registry.callparse import CallParseError, parse_call
        from .specs import task_ids_problem

        if self.tasks is not None:
            # The same rule decompose's contract holds a model's tasks to (one implementation, kernel/specs/).
            problem = task_ids_problem(self.tasks)
            if problem:
                raise ValueError(problem)
            ids = [t.id for t in self.tasks]
            # A halted turn's order may name only some tasks; verify requires a permutation otherwise.
            unknown = [o for o in self.order or [] if o not in ids]
            if unknown:
                raise ValueError(f"order names unknown task ids {unknown} (tasks: {ids})")
        for i, call in enumerate(self.calls or []):
            if isinstance(call, str):
                try:
                    parse_call(call)
                except CallParseError as exc:
                    raise ValueError(f"calls[{i}] {call!r} is not a call: {exc}") from None
        return self

    @property
    def annotated(self) -> bool:
        return self.tasks is not None

    def reference_calls(self) -> list[RefCall]:
        """The reference calls as structured objects (call strings are parsed safely, never evaluated)."""
        from .registry.callparse import parse_call

        out = []
        for call in self.calls or []:
            if isinstance(call, RefCall):
                out.append(call)
            else:
                pc = parse_call(call)
                out.append(RefCall(tool=pc.name, args=pc.args))
        return out


class SlotDef(_Strict):
    """A typed entity; data generation substitutes other values of the same type consistently everywhere."""

    type: str = Field(
        description="Slot type; alternative values are listed in data_gen/slot_values/<domain>.json under this name."
    )
    value: Any = Field(description="The value used when the solution is verified as written.")


class RegistryRef(_Strict):
    """Which tools the kernel sees (default: every tool of the solution's domains)."""

    domains: list[str] | None = Field(
        None, description="Domains whose tools form the registry (default: the solution's domains)."
    )
    include: list[str] | None = Field(None, description="Only these tools.")
    exclude: list[str] = Field(default_factory=list, description="Tools left out.")
    extra: list[ToolSpec] = Field(
        default_factory=list,
        description="Tool specs with no implementation (distractors). Their JSON schemas are normalised and checked "
        "like imported registries (a misspelt keyword or type is an error).",
    )


class Solution(_Strict):
    """A scenario; with every turn annotated, a worked solution that forethought verify replays."""

    format_version: int = Field(
        FORMAT_VERSION,
        description=f"The file's format version ({FORMAT_VERSION}: {CHANGES[FORMAT_VERSION]}). A file without it was written before "
        "versions (version 1): it is read by migrating it in memory, with a warning naming each change, and "
        "`forethought migrate FILE` rewrites it (kernel/solution_format.py).",
    )
    id: str = Field(description="Unique id.")
    title: str = Field("", description="One line: what the scenario tests.")
    description: str = Field("", description="What the scenario tests and why.")
    domains: list[str] = Field(
        description="Simulated domains to load (kernel/domains/<name>/); their tools form the registry."
    )
    tags: list[str] = Field(
        default_factory=list,
        description="Pattern tags this solution exercises: "
        + ", ".join(PATTERN_TAGS)
        + ". Each must be backed by an annotation "
        "(see data_gen/solutions/README.md).",
    )
    slots: dict[str, SlotDef] = Field(
        default_factory=dict,
        description='Typed entities, written ${name} everywhere they appear; "${name}" alone takes the typed value.',
    )
    registry: RegistryRef = Field(default_factory=RegistryRef, description="The tool registry the kernel sees.")
    initial_state: dict[str, Any] = Field(
        default_factory=dict,
        description="Per domain, the world before the first turn (validated by kernel/domains/<name>/state.py).",
    )
    config: dict[str, Any] = Field(
        default_factory=dict, description='Initial scratchpad entries (gamma), e.g. {"authenticated": true}.'
    )
    turns: list[Turn] = Field(description="The user turns, in order; S and the world persist across them.")
    source_file: str | None = Field(default=None, exclude=True)
    # What reading an older format version changed (kernel/solution_format.py): shown as a warning by the commands.
    _format_notes: list[str] = PrivateAttr(default_factory=list)

    @field_validator("format_version")
    @classmethod
    def _current(cls, value: int) -> int:
        if value != FORMAT_VERSION:
            raise ValueError(
                f"format_version {value} is not this forethought's ({FORMAT_VERSION}); load the file with load_solution, "
                "which reads an older one, or rewrite it with forethought migrate"
            )
        return value

    @property
    def format_notes(self) -> list[str]:
        return list(self._format_notes)

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
        sol._format_notes = list(self._format_notes)
        return sol


_SLOT = re.compile(r"\$\{(\w+)\}")


def render_slots(obj: Any, values: dict[str, Any], where: str = "") -> Any:
    if isinstance(obj, str):
        if "${" not in obj:  # most strings hold no slot: skip the regex (data generation renders thousands of variants)
            return obj
        match = _SLOT.fullmatch(obj)
        if match:
            if match.group(1) not in values:
                raise KeyError(f"{where}: undefined slot ${{{match.group(1)}}}")
            return values[match.group(1)]

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


def json_schema() -> dict[str, Any]:
    schema = Solution.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "forethought worked solution / scenario"
    schema.get("properties", {}).pop("source_file", None)
    return schema


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(json_schema(), indent=2))
