"""Secret tool arguments kept out of every file a run writes and every line it prints.

A tool marks a parameter secret (``@tool(secret=("password",))``, ``ToolSpec.secret``, a JSON-schema
``writeOnly`` parameter of an imported registry). The kernel itself needs the real value: the call is made with
it, and ``verify`` compares the committed calls with a solution's. What must not happen is that the value reaches
``turns.json``, ``calls.jsonl``, the trace (whose prompts quote the request the user typed it in), ``trace.html``,
``final_state.json`` or the printout. Each call record names its secret parameters (``CallRecord.secret``); a run's
files are written through :func:`redact`, which replaces every occurrence of those values, wherever it stands
(an argument, a prompt, a tool result), by :data:`MASK`.

Recordings (``record=true``) are the exception, said where they are written: a replay must find its answers under
the prompts the model saw, so a recording holds what the model was sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MASK = "***"


def secret_values(turns: Iterable[Any]) -> list[str]:
    """The values given to secret parameters in these turns' calls (committed or not), longest first."""
    values: set[str] = set()
    for turn in turns:
        for call in getattr(turn, "calls", []) or []:
            for name in getattr(call, "secret", []) or []:
                value = call.arguments.get(name)
                if value is not None and not isinstance(value, bool) and str(value) != "":
                    values.add(str(value))
    return sorted(values, key=lambda v: (-len(v), v))


def redact(obj: Any, values: list[str]) -> Any:
    """``obj`` (JSON-like) with every occurrence of each secret value masked: inside strings and keys, and a number
    equal to one."""
    if not values:
        return obj
    if isinstance(obj, str):
        for secret in values:
            obj = obj.replace(secret, MASK)
        return obj
    if isinstance(obj, dict):
        return {redact(k, values): redact(v, values) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v, values) for v in obj]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool) and str(obj) in values:
        return MASK
    return obj


def write_run_files(
    out: Any,
    turns: list[Any],
    traces: list[Any],
    final_state: Any,
    *,
    title: str,
    meta: dict[str, Any],
    trace_max_bytes: int,
) -> None:
    """A run's files (``turns.json``, ``calls.jsonl``, ``final_state.json``, ``trace.jsonl``, ``trace.html``), each
    written atomically and with every secret argument masked: ``forethought run`` and ``forethought agent`` both."""
    import html
    from pathlib import Path

    from forethought.primitives.io import atomic_write_json, atomic_write_jsonl, atomic_write_text
    from forethought.primitives.trace import capped_rows

    from .trace_html import render_html

    out = Path(out)
    values = secret_values(turns)
    atomic_write_json(out / "turns.json", redact([t.model_dump(mode="json") for t in turns], values))
    calls = [{"turn": t.index, "task_id": c.task_id, "purpose": c.purpose, "tool": c.tool, "arguments": c.arguments,
              "result": c.result} for t in turns for c in t.committed_calls]  # fmt: skip
    atomic_write_jsonl(out / "calls.jsonl", redact(calls, values))
    atomic_write_json(out / "final_state.json", redact(final_state, values))
    rows = [{"turn": i, **r} for i, tr in enumerate(traces) for r in tr.to_rows()]
    atomic_write_jsonl(out / "trace.jsonl", capped_rows(redact(rows, values), trace_max_bytes))
    page = render_html(title, turns, traces, redact(meta, values))
    # the page escapes what it shows: mask each value as written and as escaped
    atomic_write_text(
        out / "trace.html",
        redact(page, sorted({*values, *(html.escape(v) for v in values)}, key=lambda v: (-len(v), v))),
    )


def shown_arguments(call: Any, values: list[str]) -> str:
    """A call's arguments as a printout shows them (``name="value"``), secrets masked."""
    import json

    return ", ".join(f"{k}={json.dumps(redact(v, values))}" for k, v in call.arguments.items())
