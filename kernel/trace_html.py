"""A self-contained HTML view of kernel turns, laid out like the paper's Figure 1.

For each turn: the input, the scratchpad carried in, then each sub-process
with its decision (decompose, get-order, check-prerequisites, the source of
every parameter, and every other primitive's decisions from
TurnResult.decisions: match-func's, a new primitive's), the calls, and the
contract results of every step (attempts, violations, model identity). A step its contract rejected (retried, halted, fallen back) is marked
in the main view with the violation text, on the sub-process it belongs to and in a box at the top of its turn; the
scratchpad is shown as a table.
"""

from __future__ import annotations

import html
import json
from typing import Any

from forethought.primitives import Trace

from .records import DETAILED_VIEWS, TurnResult
from .specs import PRIMITIVE_NAMES, ShownDecision, primitive_title, shown_decisions

CSS = """
body{font-family:system-ui,-apple-system,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.4em} h2{font-size:1.15em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
.box{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:.6em 0;background:#fafafa}
.sp{font-weight:600;color:#1a4f8b} code{background:#eef;padding:0 .25em;border-radius:3px}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0} td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}
.ok{color:#17803d;font-weight:600} .bad{color:#b3261e;font-weight:600} .muted{color:#777}
.mark{display:inline-block;margin-left:.5em;padding:0 .4em;border-radius:3px;background:#fce8e6;color:#b3261e;font-size:.85em;font-weight:600}
.rejected{border-color:#b3261e;background:#fff6f5} tr.rejected td{background:#fce8e6}
.src-request{background:#e6f4ea} .src-scratchpad{background:#e8f0fe} .src-fill{background:#fef7e0} .src-missing{background:#fce8e6}
"""


def _e(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))


def _call(tool: str, args: dict[str, Any]) -> str:
    return f"{tool}(" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) + ")"


def scratchpad_table(pad: dict[str, Any]) -> str:
    """The scratchpad (S) as a key | value table, in its order (oldest entry first)."""
    if not pad:
        return "<span class='muted'>empty</span>"
    rows = "".join(
        f"<tr><td><code>{_e(k)}</code></td><td>{_e(v) if isinstance(v, str) else f'<code>{_e(v)}</code>'}</td></tr>"
        for k, v in pad.items()
    )
    return f"<table class='scratchpad'><tr><th>key</th><th>value</th></tr>{rows}</table>"


def _violation_text(record: Any) -> str:
    return "; ".join(f"[{v['level']}] {v['constraint']}: {v['message']}" for v in record.contract.get("violations", []))


def rejected_steps(trace: Trace | None) -> list[dict[str, Any]]:
    """Every step that was not accepted on its first try: rejected by its contract (then retried, halted, fallen back
    or skipped) or not answered by the backend; with the violation text and what came of the step in the end."""
    if trace is None:
        return []
    recs = list(trace)
    out = []
    for i, record in enumerate(recs):
        if record.ok and record.action == "accept":
            continue
        later = [x for x in recs[i + 1 :] if x.path == record.path and x.attempt > record.attempt]
        if record.action == "retry":
            final = later[-1] if later else None
            then = (
                f"retried: accepted on attempt {final.attempt + 1}"
                if final is not None and final.ok and final.action == "accept"
                else "retried"
            )
        else:
            then = {
                "halt": "halted the turn",
                "fallback": "fell back",
                "skip": "skipped",
                "backend_error": "no answer",
            }.get(record.action, record.action)
        out.append(
            {
                "seq": record.seq,
                "path": record.path,
                "primitive": record.primitive,
                "attempt": record.attempt + 1,
                "action": record.action,
                "violation": _violation_text(record)
                or ("the backend did not answer" if record.action == "backend_error" else ""),
                "then": then,
            }
        )
    return out


def _mark(rejected: list[dict[str, Any]], *primitives: str) -> str:
    """A badge for a sub-process whose steps were rejected: how many times, what came of it, the violations."""
    mine = [r for r in rejected if r["primitive"] in primitives]
    if not mine:
        return ""
    why = "; ".join(dict.fromkeys(f"attempt {r['attempt']}: {r['violation']}" for r in mine))
    then = ", ".join(dict.fromkeys(r["then"] for r in mine))
    return f"<span class='mark' title='{_e(why)}'>rejected ×{len(mine)} — {_e(then)}</span> <span class='bad'>{_e(why)}</span>"


def _heading(primitive: str) -> str:
    """A sub-process's heading, numbered by the primitive's place in the registry: "1. Decompose"."""
    number = PRIMITIVE_NAMES.index(primitive) + 1 if primitive in PRIMITIVE_NAMES else "?"
    return f"{number}. {primitive_title(primitive)}"


def _decision(decision: ShownDecision, about: str | None = None) -> str:
    """A decision's value, named by its label ("function = ls"); its key when that says more than the task."""
    value = f"<code>{_e(decision.value)}</code>"
    if decision.label:
        value = f"{_e(decision.label)} = {value}"
    return value if decision.key == about else f"<span class='muted'>{_e(decision.key)}:</span> {value}"


def render_turn(turn: TurnResult, trace: Trace | None, carried: dict[str, Any] | None = None) -> str:
    rejected = rejected_steps(trace)
    out = [f"<h2>Turn {turn.index + 1}</h2>", f"<div class='box'><b>Input (ι):</b> {_e(turn.user)}</div>"]
    if carried is not None:
        out.append(f"<div class='box'><b>Scratchpad carried in (S):</b> {scratchpad_table(carried)}</div>")
    if turn.halted:
        out.append(
            f"<div class='box bad'>Halted at {_e(turn.halted.get('step'))}: {_e(turn.halted.get('reason'))}</div>"
        )
    if rejected:
        out.append(
            f"<div class='box rejected'><b class='bad'>{len(rejected)} step(s) rejected by their contract</b><ul>"
            + "".join(
                f"<li><code>{_e(r['path'])}</code> attempt {r['attempt']}: <span class='bad'>{_e(r['violation'])}</span>"
                f" → {_e(r['then'])}</li>"
                for r in rejected
            )
            + "</ul></div>"
        )
    out.append(f"<div class='box'><span class='sp'>{_heading('decompose')}</span>{_mark(rejected, 'decompose')}<ul>")
    for task in turn.tasks:
        deps = f" <span class='muted'>after {', '.join(task.depends_on)}</span>" if task.depends_on else ""
        if task.when is not None:
            deps += f" <span class='muted'>when {_e(task.when.key)} {_e(task.when.op)} {_e(json.dumps(task.when.value, default=str))}</span>"
        if task.for_each is not None:
            deps += f" <span class='muted'>for each {_e(task.for_each.param)} in {_e(task.for_each.task)}.{_e(task.for_each.field)}</span>"
        out.append(
            f"<li><b>{_e(task.id)}</b>: {_e(task.text)} <span class='muted'>[{_e(task.tool_name or '—')}]</span>{deps}</li>"
        )
    out.append("</ul></div>")
    if turn.order:
        out.append(
            f"<div class='box'><span class='sp'>{_heading('get_order')}:</span> {' ≺ '.join(_e(x) for x in turn.order)}"
            f"{_mark(rejected, 'get_order')}</div>"
        )
    # a fan-out task's instances follow it, each with its own checks, bindings and outcome
    shown = [
        x
        for tid in dict.fromkeys(turn.order)
        for x in [tid, *(turn.outcomes[tid].instances if tid in turn.outcomes else [])]
    ]
    # every other primitive's decisions, from the generic map: those about a task shown below in its box, the rest here
    decided = [d for d in shown_decisions(turn.decisions) if d.primitive not in DETAILED_VIEWS]
    for decision in decided:
        if not any(decision.about(tid) for tid in shown):
            out.append(
                f"<div class='box'><span class='sp'>{_heading(decision.primitive)}:</span> {_decision(decision, 'turn')}"
                f"{_mark(rejected, decision.primitive)}</div>"
            )
    for tid in shown:
        outcome = turn.outcomes.get(tid)
        out.append(f"<div class='box'><span class='sp'>Task {_e(tid)}</span>")
        pre = turn.prerequisites.get(tid, [])
        if pre:
            out.append("<div><b>3. Check-Prerequisites</b><ul>")
            for prerequisite in pre:
                extra = ""
                if prerequisite.retrieval is not None:
                    extra += f" → retrieve via <code>{_e(_call(prerequisite.retrieval.tool_name, prerequisite.retrieval.parameters))}</code>"
                if prerequisite.recheck:
                    extra += f" → re-check: {_e(prerequisite.recheck)}"
                if prerequisite.remediation is not None:
                    extra += f" → remediation <code>{_e(_call(prerequisite.remediation.tool_name, prerequisite.remediation.parameters))}</code>"
                out.append(f"<li>Check({_e(prerequisite.key)}, S) = <b>{_e(prerequisite.outcome)}</b>{extra}</li>")
            out.append("</ul></div>")
        for decision in decided:
            if decision.about(tid):
                out.append(f"<div><b>{_heading(decision.primitive)}:</b> {_decision(decision, tid)}</div>")
        bindings = turn.bindings.get(tid, {})
        if bindings:
            out.append("<table><tr><th>parameter</th><th>source</th><th>value</th><th>consulted</th></tr>")
            for param, binding in bindings.items():
                out.append(
                    f"<tr class='src-{_e(binding.source)}'><td>{_e(param)}</td><td>{_e(binding.source)}</td>"
                    f"<td><code>{_e(binding.value)}</code></td><td>{_e(' → '.join(binding.consulted))}</td></tr>"
                )
            out.append("</table>")
        if outcome is not None:
            cls = (
                "ok" if outcome.status in ("executed", "skipped_condition") else "bad"
            )  # a false condition is no failure
            why = f" — {_e(outcome.reason)}" if outcome.reason else ""
            out.append(f"<div>Outcome: <span class='{cls}'>{_e(outcome.status)}</span>{why}</div>")
        out.append("</div>")
    calls = [c for c in turn.calls]
    if calls:
        out.append(
            "<div class='box'><b>Calls</b><table><tr><th>task</th><th>call</th><th>committed</th><th>result / rejection</th></tr>"
        )
        for call in calls:
            res = (
                "; ".join(call.rejected)
                if call.rejected
                else json.dumps(call.result, ensure_ascii=False, default=str)[:300]
            )
            if call.warnings:  # findings that did not block the commit (an imported registry's output schema)
                res += " — warning: " + "; ".join(call.warnings)
            out.append(
                f"<tr><td>{_e(call.task_id)} ({_e(call.purpose)})</td><td><code>{_e(_call(call.tool, call.arguments))}</code></td>"
                f"<td class='{'ok' if call.committed else 'bad'}'>{'✓' if call.committed else '✗'}</td><td>{_e(res)}</td></tr>"
            )
        out.append("</table></div>")
    if trace is not None and len(trace):
        heads = "".join(f"<th>{h}</th>" for h in ("#", "step", "kind", "attempt", "action", "contract", "model", "ms"))
        # open when a step was rejected: its row is marked there too
        out.append(
            f"<details{' open' if rejected else ''}><summary>Contract results of every step</summary><table><tr>{heads}</tr>"
        )
        for record in trace:
            ok = (
                "<span class='ok'>ok</span>" if record.ok else f"<span class='bad'>{_e(_violation_text(record))}</span>"
            )
            model = (
                _e(f"{record.model.get('backend')}:{record.model.get('adapter') or record.model.get('model')}")
                if record.model
                else ""
            )
            row_cls = "" if record.ok and record.action == "accept" else " class='rejected'"
            out.append(
                f"<tr{row_cls}><td>{record.seq}</td><td>{_e(record.path)}</td><td>{_e(record.kind)}</td><td>{record.attempt}</td><td>{_e(record.action)}</td><td>{ok}</td><td>{model}</td><td>{record.elapsed_ms:.2f}</td></tr>"
            )
        out.append("</table></details>")
    return "\n".join(out)


def render_html(
    title: str, turns: list[TurnResult], traces: list[Trace] | None = None, meta: dict[str, Any] | None = None
) -> str:
    body = [f"<h1>{_e(title)}</h1>"]
    if meta:
        body.append("<div class='box'>" + " · ".join(f"<b>{_e(k)}</b>: {_e(v)}" for k, v in meta.items()) + "</div>")
    carried: dict[str, Any] | None = None
    for i, turn in enumerate(turns):
        body.append(render_turn(turn, traces[i] if traces and i < len(traces) else None, carried))
        carried = turn.scratchpad
    if turns:
        body.append(
            f"<h2>Scratchpad after turn {turns[-1].index + 1}</h2><div class='box'>{scratchpad_table(carried or {})}</div>"
        )
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
