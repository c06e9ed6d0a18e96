"""The SLM primitives of the kernel, each defined once in a module of this package; this module is their registry.

For every primitive its :class:`PrimitiveSpec` (kernel/specs/<name>.py) holds the input and output types, the
instructions of its prompt, the output contract, the canonical form used for exact match, the decoding schema,
the oracle's answer from a worked solution's annotation, the errors the noisy oracle injects, the generation
rules, the default dataset size and the gate threshold. The prompt itself is derived from the types by one
adapter (kernel/specs/adapter.py); what the primitives share (tool briefs, tool rendering, grounding helpers) is
in kernel/specs/shared.py. Data generation renders training examples only through these specs; training,
validation, packaging, evaluation and the kernel use the same ones, and every list or table of primitive names
(config types, conf tables, reports) is read from :data:`SPECS` or checked against it. docs/primitives.md says
how to add one.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel
from pydantic_core import PydanticCustomError

from forethought.config import use_primitive_registry

from . import check_prerequisites, decompose, get_order, match_fill, match_func
from .adapter import NOT_SHOWN, Label, Placeholder
from .base import Annotation, Derivation, GenerationRules, PrimitiveSpec, forget_spec_hashes, spec_golden

# Re-exported where the code has always imported them from (forethought.kernel.specs).
from .check_prerequisites import CHECK_PREREQUISITES, CheckPrereqInput, CheckPrereqOutput, establishes
from .decisions import decision_belongs_to, decision_label, recording_decisions
from .decompose import DECOMPOSE, DecomposeInput, DecomposeOutput, task_ids_problem
from .demonstrations import (
    Demonstration,
    DemonstrationStore,
    active_store,
    bundle_stores,
    set_stores,
    using_stores,
)
from .get_order import GET_ORDER, GetOrderInput, GetOrderOutput, permutation_problem
from .match_fill import MATCH_FILL, MatchFillInput, MatchFillOutput
from .match_func import MATCH_FUNC, MatchFuncInput, MatchFuncOutput
from .shared import (
    MAX_TASKS,
    TOOL_RENDERINGS,
    ConditionOp,
    FanOut,
    ItemFilter,
    ProposedTask,
    TaskCondition,
    TaskRef,
    ToolBrief,
    UnitTask,
    active_tool_rendering,
    render_tools,
    set_tool_rendering,
    tool_brief,
    tool_rendering,
)

__all__ = [
    "Demonstration",
    "DemonstrationStore",
    "active_store",
    "bundle_stores",
    "set_stores",
    "using_stores",
    "CHECK_PREREQUISITES",
    "DECOMPOSE",
    "GET_ORDER",
    "MATCH_FILL",
    "MATCH_FUNC",
    "MAX_TASKS",
    "NOT_SHOWN",
    "PRIMITIVE_NAMES",
    "RESERVED_NAMES",
    "SPECS",
    "ShownDecision",
    "TOOL_RENDERINGS",
    "Annotation",
    "CheckPrereqInput",
    "CheckPrereqOutput",
    "ConditionOp",
    "DecomposeInput",
    "DecomposeOutput",
    "Derivation",
    "FanOut",
    "GenerationRules",
    "GetOrderInput",
    "GetOrderOutput",
    "ItemFilter",
    "Label",
    "MatchFillInput",
    "MatchFillOutput",
    "MatchFuncInput",
    "MatchFuncOutput",
    "Placeholder",
    "PrimitiveName",
    "PrimitiveSpec",
    "ProposedTask",
    "TaskCondition",
    "TaskRef",
    "ToolBrief",
    "UnitTask",
    "active_tool_rendering",
    "decision_belongs_to",
    "decision_label",
    "default_sizes",
    "default_thresholds",
    "derived_specs",
    "establishes",
    "get_spec",
    "name_validator",
    "per_primitive",
    "primitive_title",
    "permutation_problem",
    "recording_decisions",
    "register_spec",
    "registered",
    "render_tools",
    "set_tool_rendering",
    "spec_golden",
    "shown_decisions",
    "spec_hashes",
    "task_ids_problem",
    "tool_brief",
    "tool_rendering",
    "unregister_spec",
]

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
        model = getattr(spec, attr)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            problems.append(f"{attr} must be a pydantic model class, got {model!r}")
    if not isinstance(spec.instructions, str) or not spec.instructions.strip():
        problems.append("instructions must be the system prompt's prose (a non-empty string)")
    for attr in ("canonical_fn", "decoding_schema", "oracle"):
        if not callable(getattr(spec, attr)):
            problems.append(f"{attr} must be callable")
    if callable(spec.decoding_schema) and not _takes_default_max_tasks(spec.decoding_schema):
        problems.append("decoding_schema must take (input, max_tasks=MAX_TASKS): callers may leave max_tasks out")
    unknown_shown = sorted(set(spec.shown_as) - set(getattr(spec.input_type, "model_fields", {})))
    if unknown_shown:
        problems.append(f"shown_as names {unknown_shown}, which are not fields of the input type")
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
    if not problems and not (spec_golden().get(spec.name) or spec.golden_cases):
        problems.append(
            "no golden cases: list some in kernel/spec_golden.json or PrimitiveSpec.golden_cases (the spec hash covers their rendering)"
        )
    return problems


def _takes_default_max_tasks(fn: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(fn)
        signature.bind(None)
        signature.bind(None, max_tasks=MAX_TASKS)
    except (TypeError, ValueError):
        return False
    return True


def register_spec(spec: PrimitiveSpec) -> PrimitiveSpec:
    """Add a primitive to the registry: data generation, training, validation, packaging and the backends
    then know it (docs/primitives.md). Raises ValueError listing every problem of the spec."""
    problems = _spec_problems(spec)
    if problems:
        raise ValueError(f"cannot register primitive {getattr(spec, 'name', spec)!r}: " + "; ".join(problems))
    forget_spec_hashes(spec.name)
    SPECS[spec.name] = spec
    return spec


def unregister_spec(name: str) -> None:
    """Remove a registered primitive (for tests); another primitive derived from it must go first."""
    get_spec(name)
    users = [s.name for s in SPECS.values() if s.derived_from is not None and s.derived_from.source == name]
    if users:
        raise ValueError(f"cannot unregister {name!r}: {users} derive their decision points from it")
    del SPECS[name]
    forget_spec_hashes(name)


@contextlib.contextmanager
def registered(spec: PrimitiveSpec) -> Iterator[PrimitiveSpec]:
    """``with registered(spec):`` the primitive is registered inside the block only."""
    register_spec(spec)
    try:
        yield spec
    finally:
        unregister_spec(spec.name)


# The built-in primitives, in registry order: the one list of them (a new one is a module in this package and a line
# here, docs/primitives.md).
for _spec in (
    decompose.DECOMPOSE,
    get_order.GET_ORDER,
    check_prerequisites.CHECK_PREREQUISITES,
    match_func.MATCH_FUNC,
    match_fill.MATCH_FILL,
):
    register_spec(_spec)


def get_spec(name: str) -> PrimitiveSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown primitive {name!r}; expected one of {list(SPECS)}") from None


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

    def check(name: str) -> str:
        if name in SPECS or name in extra:
            return name
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


# ------------------------------------------------------- decisions, for the trace views
@dataclass(frozen=True)
class ShownDecision:
    """One decision of TurnResult.decisions as the trace views show it (kernel/trace_html.py, the bench's responder)."""

    primitive: str
    number: int | None  # the primitive's place in the registry, from 1 (None: not registered in this process)
    title: str  # "Match-Func"
    key: str  # the task it is about ("t1"), with a qualifier ("t2 ticket_status[3] absent"), or "turn"
    label: str | None  # what a one-field output's value is ("function"), else None
    value: str  # the decision in a line ("ls", "none", "count: 2; ...")
    per_task: bool  # the primitive's input is about one task (it has a ``task`` field): asked per task

    def about(self, task_id: str) -> bool:
        return decision_belongs_to(self.key, task_id)


def primitive_title(name: str) -> str:
    """A primitive's name as a heading: ``check_prerequisites`` -> ``Check-Prerequisites``."""
    return "-".join(word.capitalize() for word in name.split("_"))


def shown_decisions(decisions: Mapping[str, Mapping[str, Any]]) -> list[ShownDecision]:
    """Every decision of a TurnResult.decisions map, the primitives in registry order (any it does not know last)."""
    names = [n for n in SPECS if n in decisions] + [n for n in decisions if n not in SPECS]
    out = []
    for name in names:
        spec = SPECS.get(name)
        for key, decision in decisions[name].items():
            out.append(
                ShownDecision(
                    primitive=name,
                    number=PRIMITIVE_NAMES.index(name) + 1 if spec is not None else None,
                    title=primitive_title(name),
                    key=key,
                    label=decision_label(spec.output_type) if spec is not None else None,
                    value=spec.decision_text(decision) if spec is not None else json.dumps(decision, default=str),
                    per_task=spec is not None and "task" in spec.input_type.model_fields,
                )
            )
    return out


def spec_hashes() -> dict[str, str]:
    """Each primitive's current spec hash, in canonical order: what a bundle's adapters must have been trained under."""
    return {name: SPECS[name].spec_hash for name in PRIMITIVE_NAMES}
