"""Memory of unfinished tasks (docs/kernel.md, "Unfinished tasks").

A task that ends ``blocked`` (a prerequisite not met) or ``missing_param`` (a parameter left unbound)
commits nothing, so without this module nothing of it would reach S and a later turn would have to
restate every value ("same booking as before, here is his date of birth"). At the end of each turn
the kernel writes, for every such task, the entry ``unfinished.<tool>`` into S:

    {"tool": <tool>, "task": <decompose's task text>, "turn": <turn index>, "outcome": "blocked" | "missing_param",
     "reason": <the outcome's reason>, "arguments": {<parameter>: <bound value>}, "missing": [<parameter>, ...]}

``arguments`` are the values the task had bound (a ``missing_param`` task: its bindings; a blocked task,
which is never matched nor looked up: the parameters decompose stated for the tool), never a
``secret`` parameter; a value whose JSON is longer than ``KernelConfig.result_entry_max_chars`` is
kept as a truncation marker, as an over-long result field is, and is never bound. A later task whose
committed call is of the same tool overwrites the entry with ``outcome: "executed"`` (empty
``arguments`` and ``missing``): keys are never removed (INV-S).

Lookup (``kernel/task_steps.py``) binds a parameter from the still-unfinished entry of the tool being
tried after τ (and after the same-turn dependencies), before S. Entries are written when a turn ends,
so every entry a turn reads was left by an earlier turn, and the tasks of one turn never see each
other's (INV-R: removing a failed task changes nothing the turn's other tasks see).
"""

from __future__ import annotations

import json
from typing import Any

from .records import TurnState
from .scratchpad import Scratchpad, truncation_marker

PREFIX = "unfinished."
SOURCE = "unfinished"  # the scratchpad source of an entry: a plain entry of the state view (state_view budget)
UNFINISHED_OUTCOMES = ("blocked", "missing_param")


def key(tool: str) -> str:
    return PREFIX + tool


def is_unfinished_key(name: str) -> bool:
    return name.startswith(PREFIX)


def open_arguments(scratchpad: Scratchpad, tool: str) -> dict[str, Any]:
    """The bound arguments of ``tool``'s entry while it is still unfinished (empty otherwise). A truncation
    marker stays in the result: Lookup treats it as unbound, as it does in S."""
    entry = scratchpad.get(key(tool))
    if not _is_open(entry):
        return {}
    arguments = entry.get("arguments")
    return dict(arguments) if isinstance(arguments, dict) else {}


def _capped(value: Any, max_chars: int) -> Any:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= max_chars else truncation_marker(text)


def _arguments(turn: TurnState, task_id: str, tool: str, status: str) -> dict[str, Any]:
    spec = turn.registry.get(tool)
    secret = set(spec.secret) if spec is not None else set()
    if status == "missing_param":
        bound = {
            m: b.value
            for m, b in turn.bindings.get(task_id, {}).items()
            if b.source != "missing" and b.value is not None
        }
    else:  # blocked before matching and lookup: what decompose stated for the tool
        unit = turn.tasks.get(task_id)
        names = set(spec.param_names) if spec is not None else set()
        bound = {m: v for m, v in (unit.parameters.items() if unit is not None else []) if v is not None and m in names}
    return {m: _capped(v, turn.config.result_entry_max_chars) for m, v in bound.items() if m not in secret}


def record(turn: TurnState) -> None:
    """Write this turn's unfinished tasks into S and close the entries its committed tasks completed, in the
    turn's order (a later task of the same tool overwrites an earlier one's entry)."""
    for task_id in dict.fromkeys(turn.order):
        outcome = turn.outcomes.get(task_id)
        if outcome is None or outcome.tool is None:
            continue
        unit = turn.tasks.get(task_id)
        text = unit.text if unit is not None else ""
        name = key(outcome.tool)
        if outcome.status in UNFINISHED_OUTCOMES:
            turn.scratchpad.set(
                name,
                {
                    "tool": outcome.tool,
                    "task": text,
                    "turn": turn.index,
                    "outcome": outcome.status,
                    "reason": outcome.reason,
                    "arguments": _arguments(turn, task_id, outcome.tool, outcome.status),
                    "missing": list(outcome.missing),
                },
                SOURCE,
            )
        elif outcome.status == "executed" and _is_open(turn.scratchpad.get(name)):
            since = turn.scratchpad.get(name).get("turn")
            turn.scratchpad.set(
                name,
                {
                    "tool": outcome.tool,
                    "task": text,
                    "turn": turn.index,
                    "outcome": "executed",
                    "reason": f"completed (unfinished since turn {since})",
                    "arguments": {},
                    "missing": [],
                },
                SOURCE,
            )


def _is_open(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("outcome") in UNFINISHED_OUTCOMES
