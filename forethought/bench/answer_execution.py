"""The responder's answer run for real, shared by BFCL's and tau2's responder modes: each call through the kernel's own
execution path (``task_steps.execute_call``: ToolGate's precondition when CVC is on, the call, the postcondition, the
commit, the scratchpad writes); what committed and what was blocked, and why."""

from __future__ import annotations

import json
from typing import Any

from forethought.kernel import task_steps
from forethought.kernel.records import TurnState
from forethought.kernel.registry import format_call

from .responder import RENDER_VERSION, Answer, departures


def call_string(name: str, args: dict[str, Any]) -> str | None:
    try:
        return format_call(name, args)
    except (ValueError, TypeError):  # a value a call string cannot hold (bfcl's checker could not run it either)
        return None


def shown_call(name: str, args: dict[str, Any]) -> str:
    """A call as reports show it: its call string, or the arguments as JSON where a call string cannot hold them."""
    return call_string(name, args) or f"{name}({json.dumps(args, default=str)})"


def answer_record(
    answer: Answer, kernel_calls: list[Any], committed: list[str], blocked: list[dict[str, Any]], rendered: Any
) -> dict[str, Any]:
    """What a responder turn's report keeps: the kernel's committed calls beside the answer's, what of the answer
    committed and what was blocked, where the answer departs from the kernel's trace (BFCL's and tau2's alike)."""
    trial_calls = [shown_call(c.tool, c.arguments) for c in kernel_calls]
    asked = [shown_call(n, a) for n, a, _ in answer.calls]
    return {
        "render_version": RENDER_VERSION,
        "trace_calls": trial_calls,
        "answer_calls": asked,
        "committed": committed,
        "blocked": blocked,
        "parse_errors": answer.errors,
        "departure": departures(trial_calls, asked),
        "text": answer.text[:1000],
        "rendered": rendered,
    }


def execute_answer(answer: Answer, turn: TurnState, prefix: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Run the answer's calls in order through the kernel's execution path; (committed calls, blocked calls)."""
    committed: list[str] = []
    blocked: list[dict[str, Any]] = []
    for k, (name, args, _) in enumerate(answer.calls):
        text = shown_call(name, args)
        if turn.registry.get(name) is None:
            blocked.append({"call": text, "stage": "unregistered", "reasons": [f"{name!r} is not in the registry"]})
            continue
        before = len(turn.calls)
        ok, reasons = task_steps.execute_call(turn, f"{prefix}_{k}", "task", name, args)
        if ok:
            committed.append(text)
            continue
        record = turn.calls[-1] if len(turn.calls) > before else None
        rejected = record.rejected if record is not None and record.rejected else [f"pre: {r}" for r in reasons]
        blocked.append(
            {"call": text, "stage": rejected[0].partition(": ")[0], "reasons": [r.partition(": ")[2] for r in rejected]}
        )
    return committed, blocked
