"""``forethought bench bfcl mode=ceiling``: the ground truth through the kernel's guards, no model.

Each ground-truth call goes through exactly the kernel's execution path, ``task_steps.execute_call`` (the
function the guarded Execute step calls): ToolGate's precondition against our imported registry
(argument types, required parameters, enums, declared prerequisites), the call on a copy of bfcl's
real class instance, the postcondition (an ``{"error": ...}`` result fails the call; an output-schema
mismatch of an imported doc is a warning), then the commit and the scratchpad writes. A blocked call
is not committed, as in the kernel, and the entry goes on with its next call. An entry's sequence is
*let through* when no call in it is blocked. The committed calls are then scored by bfcl's
``multi_turn_checker``.

Availability: before each call, every ground-truth argument value is looked for where the kernel
could take it from: the turn's request ι (by the pending-request rule of :func:`request_text`) and
τ, or the scratchpad S, matched as the decompose contract grounds values (``kernel/grounding.py``:
strings as case-insensitive substrings, numbers by value among the numbers in the text and
values, lists and dicts element by element; null and booleans always count; a value among the
parameter's documented enum counts). Where it is not, we say where it was: in an earlier turn's
text (which the kernel does not see), in an earlier call's result that S does not hold (a field
over ``result_entry_max_chars``, kept as a truncation marker, or a value nested inside a field the
grounding match does not reach), in the world state, or nowhere. Results enter S as ``<tool>.<field>``
entries (docs/kernel.md, "Results in S").

This is a ceiling of the kernel's structure, not a model's accuracy: it says which sequences the
guards would let a perfect model make.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from forethought.kernel import task_steps
from forethought.kernel.grounding import Haystack
from forethought.kernel.records import KernelConfig, TurnState
from forethought.kernel.registry import CallParseError, format_call, parse_call
from forethought.kernel.scratchpad import Scratchpad, bindable

from . import bfcl_score
from .bfcl_data import Entry, entry_registry, release_withheld, request_text
from .bfcl_env import BfclEnvironment

LABEL = "ceiling (ground truth through the guards; no model)"
AVAILABLE = ("request", "S", "request+S", "enum")  # where the kernel can take a value from
UNAVAILABLE = ("earlier turn text", "earlier result", "world state", "nowhere")


@dataclass
class BlockedCall:
    entry: str
    turn: int
    call: str
    stage: str  # parse | unregistered | pre | post
    reasons: list[str]


@dataclass
class CeilingEntry:
    id: str
    category: str
    calls: int = 0
    blocked: list[BlockedCall] = field(default_factory=list)
    schema_warnings: Counter = field(default_factory=Counter)  # function -> calls whose result broke its doc's schema
    candidate: list[list[str]] = field(default_factory=list)  # committed calls per turn, as call strings
    availability: Counter = field(default_factory=Counter)
    unavailable: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] = field(default_factory=dict)

    @property
    def let_through(self) -> bool:
        return not self.blocked

    @property
    def all_available(self) -> bool:
        """Every value was where the kernel can take it from: decompose's and match_fill's grounding
        contracts (CVC on) would accept every argument of the sequence."""
        return not self.unavailable


def _enum(spec: Any, name: str) -> list[Any] | None:
    schema = spec.param_schema(name) if spec is not None and name in spec.param_names else {}
    return schema.get("enum") or schema.get("items", {}).get("enum")


def _in_enum(value: Any, enum: list[Any]) -> bool:
    """A value among the documented options (each element, for an array parameter whose items have an enum)."""
    if isinstance(value, list):
        return bool(value) and all(v in enum for v in value)
    return value in enum


def where_available(
    value: Any,
    enum: list[Any] | None,
    request: str,
    tau: dict[str, Any],
    scratchpad: Scratchpad,
    earlier_text: list[str],
    earlier_results: list[Any],
    world: Any,
) -> str:
    """Where a ground-truth value could be taken from when its call is made; ``world`` is a callable
    returning the world's state (built only when the value is found nowhere the kernel looks)."""
    state = bindable(scratchpad.snapshot())  # a truncated result field's preview is never a value (docs/kernel.md)
    if Haystack([request], [tau]).contains(value):
        return "request"
    if Haystack([], [state]).contains(value):
        return "S"
    if Haystack([request], [tau, state]).contains(value):
        return "request+S"
    if enum is not None and _in_enum(value, enum):
        return "enum"
    if Haystack(earlier_text).contains(value):
        return "earlier turn text"
    if Haystack([], earlier_results).contains(value):
        return "earlier result"
    if Haystack([], [world()]).contains(value):
        return "world state"
    return "nowhere"


def run_entry(entry: Entry) -> CeilingEntry:
    out = CeilingEntry(entry.id, entry.category)
    env = BfclEnvironment(entry)
    registry = entry_registry(entry, 0)
    scratchpad = Scratchpad()
    config = KernelConfig()
    pending: str | None = None
    results: list[Any] = []
    for i, calls in enumerate(entry.ground_truth):
        release_withheld(entry, registry, i)
        request = request_text(pending, entry.turns[i])
        turn = TurnState(
            config=config,
            env=env,
            scratchpad=scratchpad,
            registry=registry,
            tool_briefs=[],  # type: ignore[arg-type]
            user=request,
            turn_context={},
            index=i,
        )
        committed: list[str] = []
        for j, text in enumerate(calls):
            out.calls += 1
            try:
                name, args = parse_call(text, registry.signatures)
            except CallParseError as exc:
                out.blocked.append(BlockedCall(entry.id, i, text, "parse", [str(exc)]))
                continue
            spec = registry.get(name)
            if spec is None:
                out.blocked.append(
                    BlockedCall(entry.id, i, text, "unregistered", [f"{name!r} is not in the registry at turn {i}"])
                )
                continue
            world = functools.cache(env.snapshot)  # the world before this call, built at most once
            for param, value in args.items():
                where = where_available(
                    value, _enum(spec, param), request, turn.turn_context, scratchpad, entry.turns[:i], results, world
                )
                out.availability[where] += 1
                if where in UNAVAILABLE:
                    out.unavailable.append(
                        {"entry": entry.id, "turn": i, "call": text, "parameter": param, "value": value, "found": where}
                    )
            before = len(turn.calls)
            ok, reasons = task_steps.execute_call(turn, f"gt{i}_{j}", "task", name, args)
            record = turn.calls[-1] if len(turn.calls) > before else None
            if record is not None:
                if record.warnings:
                    out.schema_warnings[name] += 1
                results.append(record.result)
            if not ok:
                # _execute records every rejection as "pre: ..." or "post: ..." on the call it appended.
                rejected = record.rejected if record is not None and record.rejected else [f"pre: {r}" for r in reasons]
                stage, _, _ = rejected[0].partition(": ")
                out.blocked.append(BlockedCall(entry.id, i, text, stage, [r.partition(": ")[2] for r in rejected]))
                continue
            committed.append(format_call(name, args))
        out.candidate.append(committed)
        # A turn whose ground truth is empty is one the kernel should leave unfinished (a function or a
        # parameter is missing): its request stays pending, as the run mode keeps an unfinished one.
        pending = request if not calls else None
    return out


def run(entries: list[Entry], on_entry=None) -> tuple[list[CeilingEntry], str]:
    """All entries through the guards, then bfcl's checker on the committed calls (one fresh model name)."""
    model_name = bfcl_score.checker_model_name("ceiling")
    done = []
    try:
        for entry in entries:
            result = run_entry(entry)
            result.verdict = bfcl_score.score(entry, result.candidate, model_name)
            done.append(result)
            if on_entry is not None:
                on_entry(entry)
    finally:
        bfcl_score.release(model_name)
    return done, model_name
