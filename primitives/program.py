"""Composition operators. Every program built from them is finite.

Design-time checks run in the constructors: type compatibility across every
composition edge, bounded loops and fan-out, and a static upper bound on the
number of SLM calls (``max_slm_calls``) that a run can make.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Optional

from pydantic import BaseModel, ValidationError, create_model

from .errors import DesignError, HaltError
from .primitive import Primitive


# --------------------------------------------------------------------- types
def _ann_fits(src: Any, dst: Any) -> bool:
    """Whether a value annotated ``src`` can be used where ``dst`` is expected."""
    if dst is Any or src == dst:
        return True
    if isinstance(src, type) and isinstance(dst, type):
        try:
            if issubclass(src, dst):
                return True
        except TypeError:
            pass
        if issubclass(src, BaseModel) and issubclass(dst, BaseModel):
            return not type_mismatches(src, dst)
        return False
    so, do = typing.get_origin(src), typing.get_origin(dst)
    if do in (typing.Union, types.UnionType):
        dargs = typing.get_args(dst)
        if so in (typing.Union, types.UnionType):
            return all(any(_ann_fits(s, d) for d in dargs) for s in typing.get_args(src))
        return any(_ann_fits(src, d) for d in dargs)
    if so is not None and so == do:
        sa, da = typing.get_args(src), typing.get_args(dst)
        if len(sa) == len(da):
            return all(_ann_fits(s, d) for s, d in zip(sa, da, strict=True))
    return False


def type_mismatches(out_type: type[BaseModel], in_type: type[BaseModel]) -> list[str]:
    """Reasons why ``out_type`` cannot feed ``in_type`` (empty when it fits).

    Structural: every required field of the input must be present in the
    output with a compatible annotation; optional input fields, when present
    in the output, must be compatible too.
    """
    if out_type is in_type or issubclass(out_type, in_type):
        return []
    problems = []
    ofields = out_type.model_fields
    for fname, finfo in in_type.model_fields.items():
        if fname not in ofields:
            if finfo.is_required():
                problems.append(f"missing field {fname!r} ({_ann_name(finfo.annotation)})")
            continue
        oann = ofields[fname].annotation
        if not _ann_fits(oann, finfo.annotation):
            problems.append(f"field {fname!r} is {_ann_name(oann)}, expected {_ann_name(finfo.annotation)}")
    return problems


def _ann_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is not None or isinstance(annotation, types.GenericAlias):
        return str(annotation).replace("typing.", "")  # list[int], not just "list"
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


# (output type, input type) -> whether fields can be passed through unvalidated
_PASSTHROUGH: dict[tuple[type, type], bool] = {}


def _passthrough(src: type[BaseModel], dst: type[BaseModel]) -> bool:
    """True when every input field has the identical annotation in the output and
    the input type adds no constraints or validators: then passing the values on
    is exactly what validation would do, without its cost (the kernel adapts on
    every step)."""
    key = (src, dst)
    if key not in _PASSTHROUGH:
        sf = src.model_fields
        decorators = dst.__pydantic_decorators__
        _PASSTHROUGH[key] = not (
            decorators.field_validators or decorators.model_validators or decorators.validators
        ) and all(
            (f not in sf and not fi.is_required() and not fi.metadata)
            or (f in sf and sf[f].annotation == fi.annotation and not fi.metadata)
            for f, fi in dst.model_fields.items()
        )
    return _PASSTHROUGH[key]


def adapt(value: BaseModel, in_type: type[BaseModel]) -> BaseModel:
    """Convert an output to the next input type (its fit was checked at design time).

    Structurally compatible but distinct types (a nested model of another class,
    ``int`` into ``float``, a field with constraints) are validated, so the next
    step receives a real ``in_type``; a value that still does not fit (e.g. it
    breaks a ``Field`` constraint) halts the run with a structured error.
    """
    if isinstance(value, in_type):
        return value
    src = type(value)
    if _passthrough(src, in_type):
        return in_type.model_construct(**{f: getattr(value, f) for f in in_type.model_fields if f in src.model_fields})
    data = value.model_dump()
    try:
        return in_type.model_validate({f: data[f] for f in in_type.model_fields if f in data})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise HaltError(
            f"{src.__name__}->{in_type.__name__}",
            None,
            value,
            [],
            f"output {src.__name__} does not fit input {in_type.__name__} at run time: {problems}",
        ) from None


def _require_field_name(name: Any, where: str) -> None:
    """Names that become fields of a generated model must be plain, public field names."""
    if not (isinstance(name, str) and name.isidentifier()) or name.startswith(("_", "model_")):
        raise DesignError(
            f"{where}: {name!r} cannot be a field name (use an identifier not starting with '_' or 'model_')"
        )


def _require_fit(out_type: type[BaseModel], in_type: type[BaseModel], where: str) -> None:
    problems = type_mismatches(out_type, in_type)
    if problems:
        raise DesignError(
            f"{where}: output type {out_type.__name__} does not fit input type {in_type.__name__}: "
            + "; ".join(problems)
        )


# --------------------------------------------------------------------- nodes
class Node:
    """Base of all program nodes."""

    input_type: type[BaseModel]
    output_type: type[BaseModel]
    label: str

    @property
    def max_slm_calls(self) -> int:  # static upper bound
        raise NotImplementedError

    def children(self) -> list[Node]:
        return []

    def walk(self):
        yield self
        for child in self.children():
            yield from child.walk()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"


def as_node(part: Node | Primitive) -> Node:
    if isinstance(part, Node):
        return part
    if isinstance(part, Primitive):
        return Step(part)
    raise DesignError(f"expected a program node or a primitive, got {type(part).__name__}: {part!r}")


class Step(Node):
    """One primitive with its recovery policy.

    On a contract violation (or a raised exception) the step is retried up to
    ``retries`` times, with the violations fed back: SLM primitives see them in
    their prompt; symbolic ones get ``repair(input, violations)`` if given.
    When retries are exhausted the step halts; an enclosing Fallback may catch it.
    """

    def __init__(
        self,
        primitive: Primitive,
        *,
        retries: int = 0,
        repair: Callable[[BaseModel, list], BaseModel] | None = None,
        label: str | None = None,
    ):
        if not isinstance(primitive, Primitive):
            raise DesignError(f"Step needs a Primitive, got {type(primitive).__name__}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise DesignError(f"Step {primitive.name!r}: retries must be a non-negative int, got {retries!r}")
        self.primitive = primitive
        self.retries = retries
        self.repair = repair
        self.label = label or primitive.name
        self.input_type = primitive.input_type
        self.output_type = primitive.output_type

    @property
    def max_slm_calls(self) -> int:
        return (1 + self.retries) if self.primitive.kind == "slm" else 0


class Sequence(Node):
    """Runs steps in order, passing each output forward as the next input."""

    def __init__(self, *steps: Node | Primitive, label: str = "sequence"):
        if len(steps) == 1 and isinstance(steps[0], (list, tuple)):
            steps = tuple(steps[0])
        if not steps:
            raise DesignError(f"Sequence {label!r} needs at least one step")
        self.steps = [as_node(s) for s in steps]
        self.label = label
        for i in range(1, len(self.steps)):
            previous, following = self.steps[i - 1], self.steps[i]
            _require_fit(
                previous.output_type,
                following.input_type,
                f"Sequence {label!r}: step {i} ({previous.label}) -> step {i + 1} ({following.label})",
            )
        self.input_type = self.steps[0].input_type
        self.output_type = self.steps[-1].output_type

    @property
    def max_slm_calls(self) -> int:
        return sum(s.max_slm_calls for s in self.steps)

    def children(self) -> list[Node]:
        return list(self.steps)


class Parallel(Node):
    """Independent branches on the same input, run concurrently.

    The output is a model with one field per branch name.
    """

    def __init__(self, label: str = "parallel", **branches: Node | Primitive):
        if not branches:
            raise DesignError(f"Parallel {label!r} needs at least one branch")
        for k in branches:
            _require_field_name(k, f"Parallel {label!r}: branch name")
        self.branches = {k: as_node(v) for k, v in branches.items()}
        self.label = label
        first = next(iter(self.branches.values()))
        self.input_type = first.input_type
        for name, branch in self.branches.items():
            _require_fit(self.input_type, branch.input_type, f"Parallel {label!r}: input -> branch {name!r}")
        self.output_type = create_model(  # type: ignore[call-overload]
            f"{label.title().replace('_', '')}Output",
            **{k: (branch.output_type, ...) for k, branch in self.branches.items()},
        )

    @property
    def max_slm_calls(self) -> int:
        return sum(b.max_slm_calls for b in self.branches.values())

    def children(self) -> list[Node]:
        return list(self.branches.values())


class Conditional(Node):
    """Branch on a value (``when(input)``) or on a contract outcome (``probe``).

    With ``when``: both branches take the input. With ``probe``: the probe runs
    first; if it passes its contracts, ``then`` gets the probe's output,
    otherwise ``otherwise`` gets the original input.
    """

    def __init__(
        self,
        *,
        then: Node | Primitive,
        otherwise: Node | Primitive,
        when: Callable[[BaseModel], bool] | None = None,
        probe: Node | Primitive | None = None,
        label: str = "conditional",
    ):
        if (when is None) == (probe is None):
            raise DesignError(f"Conditional {label!r}: give exactly one of when= (a predicate) or probe= (a node)")
        if when is not None and not callable(when):
            raise DesignError(f"Conditional {label!r}: when must be a predicate on the input, got {when!r}")
        self.when = when
        self.probe = as_node(probe) if probe is not None else None
        self.then = as_node(then)
        self.otherwise = as_node(otherwise)
        self.label = label
        if self.probe is not None:
            self.input_type = self.probe.input_type
            _require_fit(self.probe.output_type, self.then.input_type, f"Conditional {label!r}: probe -> then")
        else:
            self.input_type = self.then.input_type
            _require_fit(self.input_type, self.then.input_type, f"Conditional {label!r}: input -> then")
        _require_fit(self.input_type, self.otherwise.input_type, f"Conditional {label!r}: input -> otherwise")
        _require_fit(self.then.output_type, self.otherwise.output_type, f"Conditional {label!r}: branch outputs")
        _require_fit(self.otherwise.output_type, self.then.output_type, f"Conditional {label!r}: branch outputs")
        self.output_type = self.then.output_type

    @property
    def max_slm_calls(self) -> int:
        probe = self.probe.max_slm_calls if self.probe else 0
        return probe + max(self.then.max_slm_calls, self.otherwise.max_slm_calls)

    def children(self) -> list[Node]:
        return [n for n in (self.probe, self.then, self.otherwise) if n is not None]


class Iterate(Node):
    """Repeat ``body`` (state -> state) until ``until(state)`` or ``max_iters``.

    ``max_iters`` is mandatory and finite: an unbounded loop is rejected at
    construction. When the budget is exhausted the loop either returns the
    last state or halts (``on_exhausted``).
    """

    def __init__(
        self,
        body: Node | Primitive,
        *,
        until: Callable[[BaseModel], bool],
        max_iters: int,
        on_exhausted: Literal["return", "halt"] = "return",
        label: str = "iterate",
    ):
        if isinstance(max_iters, bool) or not isinstance(max_iters, int) or max_iters < 1:
            raise DesignError(
                f"Iterate {label!r}: max_iters must be a positive int (a finite retry budget k), got {max_iters!r}; "
                "unbounded loops are not allowed"
            )
        if not callable(until):
            raise DesignError(f"Iterate {label!r}: until must be a predicate on the loop state")
        if on_exhausted not in ("return", "halt"):
            raise DesignError(f"Iterate {label!r}: on_exhausted must be 'return' or 'halt'")
        self.body = as_node(body)
        _require_fit(self.body.output_type, self.body.input_type, f"Iterate {label!r}: body output -> body input")
        self.until = until
        self.max_iters = max_iters
        self.on_exhausted = on_exhausted
        self.label = label
        self.input_type = self.body.input_type
        self.output_type = self.body.output_type

    @property
    def max_slm_calls(self) -> int:
        return self.max_iters * self.body.max_slm_calls

    def children(self) -> list[Node]:
        return [self.body]


class Fallback(Node):
    """Try alternatives in order; the first that does not halt wins."""

    def __init__(self, *alternatives: Node | Primitive, label: str = "fallback"):
        if len(alternatives) == 1 and isinstance(alternatives[0], (list, tuple)):
            alternatives = tuple(alternatives[0])
        if not alternatives:
            raise DesignError(f"Fallback {label!r} needs at least one alternative")
        self.alternatives = [as_node(alternative) for alternative in alternatives]
        self.label = label
        self.input_type = self.alternatives[0].input_type
        self.output_type = self.alternatives[0].output_type
        for i, alternative in enumerate(self.alternatives[1:], start=2):
            _require_fit(
                self.input_type,
                alternative.input_type,
                f"Fallback {label!r}: input -> alternative {i} ({alternative.label})",
            )
            _require_fit(
                alternative.output_type,
                self.output_type,
                f"Fallback {label!r}: alternative {i} ({alternative.label}) output",
            )

    @property
    def max_slm_calls(self) -> int:
        return sum(a.max_slm_calls for a in self.alternatives)

    def children(self) -> list[Node]:
        return list(self.alternatives)


class ForEach(Node):
    """Apply ``body`` to each element of the list field ``over`` (bounded fan-out).

    ``max_items`` is the declared fan-out used by the static call bound; a run
    whose list is longer halts. When ``body`` is a single SLM step, the items'
    model calls are sent to the backend as one batch. ``on_item_error="skip"``
    keeps going past an item that halts (its result is None, its reason is in
    ``errors``); the default halts the whole ForEach.
    """

    def __init__(
        self,
        body: Node | Primitive,
        *,
        over: str,
        max_items: int,
        on_item_error: Literal["halt", "skip"] = "halt",
        label: str = "foreach",
    ):
        if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1:
            raise DesignError(
                f"ForEach {label!r}: max_items must be a positive int (declared fan-out), got {max_items!r}"
            )
        if on_item_error not in ("halt", "skip"):
            raise DesignError(f"ForEach {label!r}: on_item_error must be 'halt' or 'skip'")
        _require_field_name(over, f"ForEach {label!r}: over (the list field to iterate)")
        self.body = as_node(body)
        self.over = over
        self.max_items = max_items
        self.on_item_error = on_item_error
        self.label = label
        item_type = self.body.input_type
        self.input_type = create_model(  # type: ignore[call-overload]
            f"{label.title().replace('_', '')}Input", **{over: (list[item_type], ...)}
        )
        out_t = self.body.output_type
        if on_item_error == "skip":
            # A failed item leaves None in results and its halt reason in errors.
            self.output_type = create_model(  # type: ignore[call-overload]
                f"{label.title().replace('_', '')}Output",
                results=(list[Optional[out_t]], ...),
                errors=(list[Optional[str]], ...),
            )
        else:
            self.output_type = create_model(  # type: ignore[call-overload]
                f"{label.title().replace('_', '')}Output", results=(list[out_t], ...)
            )

    @property
    def max_slm_calls(self) -> int:
        return self.max_items * self.body.max_slm_calls

    def children(self) -> list[Node]:
        return [self.body]


class Program:
    """A named, checked program: the root node plus design-time limits.

    ``max_slm_calls`` (optional) is a budget: a program whose static bound
    exceeds it is rejected at construction.
    """

    def __init__(self, root: Node | Primitive, *, name: str = "program", max_slm_calls: int | None = None):
        self.root = as_node(root)
        self.name = name
        # Cache and replay keys are per primitive name: two different primitives
        # sharing a name would silently answer for each other.
        named: dict[str, Primitive] = {}
        for n in self.root.walk():
            if isinstance(n, Step):
                other = named.setdefault(n.primitive.name, n.primitive)
                if other is not n.primitive:
                    raise DesignError(
                        f"Program {name!r}: primitive name {n.primitive.name!r} is used by two different primitives "
                        f"({other!r} and {n.primitive!r}); names key the cache and replay recordings, so they must be unique"
                    )
        bound = self.root.max_slm_calls
        if max_slm_calls is not None and bound > max_slm_calls:
            raise DesignError(
                f"Program {name!r}: static bound of {bound} SLM calls exceeds the budget of {max_slm_calls} "
                f"({self.describe_bound()})"
            )
        self.slm_call_bound = bound
        self.budget = max_slm_calls

    @property
    def input_type(self) -> type[BaseModel]:
        return self.root.input_type

    @property
    def output_type(self) -> type[BaseModel]:
        return self.root.output_type

    @property
    def max_slm_calls(self) -> int:
        return self.slm_call_bound

    def primitives(self) -> list[Primitive]:
        seen: dict[str, Primitive] = {}
        for n in self.root.walk():
            if isinstance(n, Step):
                seen.setdefault(n.primitive.name, n.primitive)
        return list(seen.values())

    def describe_bound(self) -> str:
        parts = []
        for n in self.root.walk():
            if isinstance(n, Step) and n.primitive.kind == "slm":
                parts.append(f"{n.label}: {n.max_slm_calls}")
        return ", ".join(parts) or "no SLM steps"
