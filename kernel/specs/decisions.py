"""The decisions of a turn: every answer an SLM primitive's step accepted, per primitive, for TurnResult.decisions.

Any spec's primitive (:meth:`PrimitiveSpec.primitive`) checks its outputs with a :class:`DecisionContract`: the
spec's contract, which also hands every output it accepts to the recorder of the running turn
(:func:`recording_decisions`; Kernel.run_turn sets it). The engine returns an output exactly when its contract
accepts it, so the recorder sees each accepted answer once, wherever in the program the step is, at every trace
level, replayed, cached or called; a step that the kernel program gains for a new primitive records its decisions
with no further code. The trace views (kernel/trace_html.py, the bench's responder) show the decisions of any
registered primitive from this map.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from forethought.primitives import Contract
from forethought.primitives.contract import ContractResult

from .adapter import declared_label

# (spec, input, output): the spec is a PrimitiveSpec (not imported: kernel/specs/base.py imports this module)
Recorder = Callable[[Any, BaseModel, BaseModel], None]

# The running turn's recorder. A context variable, not a global: turns run in worker threads at once (the bench), and
# each thread's turn records only its own decisions. (A Parallel node's branches run in pool threads that do not
# inherit it; the kernel program has none.)
_RECORDER: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("forethought_decisions", default=None)


@contextlib.contextmanager
def recording_decisions(recorder: Recorder) -> Iterator[None]:
    """Inside the block, every output a spec's contract accepts goes to ``recorder(spec, input, output)``."""
    token = _RECORDER.set(recorder)
    try:
        yield
    finally:
        _RECORDER.reset(token)


class DecisionContract(Contract):
    """A spec's contract that also reports every output it accepts to the running turn's recorder."""

    def __init__(self, spec: Any, contract: Contract):
        super().__init__()
        self.checks = list(contract.checks)
        self.spec = spec

    def check(
        self, primitive: str, output_type: type[BaseModel], inp: Any, raw: Any, *, full: bool = True
    ) -> ContractResult:
        result = super().check(primitive, output_type, inp, raw, full=full)
        recorder = _RECORDER.get()
        if result.ok and recorder is not None:
            recorder(self.spec, inp, result.output)
        return result


def default_decision_key(inp: BaseModel) -> str:
    """The task a decision is about (the input's ``task.id``), else ``"turn"`` (a decision about the whole turn)."""
    task = getattr(inp, "task", None)
    task_id = getattr(task, "id", None)
    return task_id if isinstance(task_id, str) else "turn"


def decision_belongs_to(key: str, task_id: str) -> bool:
    """Whether a decision key is about the task ``task_id``: the id itself, or the id and a qualifier after a space
    (check_prerequisites: ``"t2 ticket_status[3] absent"``)."""
    return key == task_id or key.startswith(task_id + " ")


def _value_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return ", ".join(str(v) for v in value) if value else "none"
    return json.dumps(value, ensure_ascii=False, default=str)


def decision_label(output_type: type[BaseModel]) -> str | None:
    """The name a one-field output's value goes by in a trace view: the field's Label or title, else its name."""
    fields = output_type.model_fields
    if len(fields) != 1:
        return None
    name, info = next(iter(fields.items()))
    return declared_label(info) or name


def decision_text(output_type: type[BaseModel], decision: Mapping[str, Any]) -> str:
    """A decision in one line: a one-field output's value (``ls``, ``none``), else ``field: value; ...``."""
    if len(output_type.model_fields) == 1 and len(decision) == 1:
        return _value_text(next(iter(decision.values())))
    return "; ".join(f"{k}: {_value_text(v)}" for k, v in decision.items())
