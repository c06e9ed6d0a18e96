"""One BFCL entry as every mode runs it (kernel, responder, vanilla): its world, registry and scratchpad across its
turns (:class:`EntryTurns`), and what a run of it produced (:class:`EntryRun`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from forethought.kernel.records import TurnResult
from forethought.kernel.scratchpad import Scratchpad
from forethought.primitives import Trace

from .bfcl_data import Entry, entry_registry, release_withheld, request_text
from .bfcl_env import BfclEnvironment

# Outcomes that leave a request unfinished: its text stays pending for the next turn (see request_text).
UNFINISHED = ("missing_function", "missing_param", "blocked")


@dataclass
class EntryRun:
    """What the kernel did on one entry with one setting of CVC."""

    id: str
    category: str
    cvc: bool
    turns: list[TurnResult] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # the request the kernel got each turn
    candidate: list[list[str]] = field(default_factory=list)  # committed calls per turn, as call strings
    backend_error: dict[str, Any] | None = None  # the first turn the backend did not answer; the entry stopped there
    verdict: dict[str, Any] | None = None  # bfcl's checker; None when not scored (backend error)
    mode: str = "kernel"
    answers: list[dict[str, Any]] = field(default_factory=list)  # responder / vanilla: the model's answer per turn

    def add_turn(self, request: str, result: TurnResult, trace: Trace) -> None:
        self.turns.append(result)
        self.traces.append(trace)
        self.requests.append(request)


class EntryTurns:
    """An entry's world, registry and scratchpad, kept across its turns, and the request each turn gets: a holdout
    turn brings its functions (miss_func), and a request left unfinished is pending for the next (request_text)."""

    def __init__(self, entry: Entry):
        self.entry = entry
        self.env = BfclEnvironment(entry)
        self.registry = entry_registry(entry, 0)
        self.scratchpad = Scratchpad()
        self.pending: str | None = None

    def __iter__(self) -> Iterator[tuple[int, str]]:
        for i, text in enumerate(self.entry.turns):
            release_withheld(self.entry, self.registry, i)
            yield i, request_text(self.pending, text)

    def done(self, request: str, result: TurnResult) -> None:
        unfinished = any(o.status in UNFINISHED for o in result.outcomes.values())
        self.pending = request if unfinished else None
