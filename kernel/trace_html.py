"""A self-contained HTML view of kernel turns, laid out like the paper's Figure 1.

For each turn: the input, the scratchpad carried in, then each sub-process
with its decision (decompose, get-order, check-prerequisites, match with the
source of every parameter), the calls, and the contract results of every
step (attempts, violations, model identity).
"""

from __future__ import annotations

import html
import json
from typing import Any

from forethought.primitives import Trace

from .records import TurnResult

CSS = """
body{font-family:system-ui,-apple-system,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.4em} h2{font-size:1.15em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
.box{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:.6em 0;background:#fafafa}
.sp{font-weight:600;color:#1a4f8b} code{background:#eef;padding:0 .25em;border-radius:3px}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0} td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}
.ok{color:#17803d;font-weight:600} .bad{color:#b3261e;font-weight:600} .muted{color:#777}
.src-request{background:#e6f4ea} .src-scratchpad{background:#e8f0fe} .src-fill{background:#fef7e0} .src-missing{background:#fce8e6}
"""


def _e(x: Any) -> str:
    return html.escape(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str))


def _call(tool: str, args: dict[str, Any]) -> str:
    return f"{tool}(" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) + ")"


def render_turn(t: TurnResult, trace: Trace | None, carried: dict[str, Any] | None = None) -> str:
    out = [f"<h2>Turn {t.index + 1}</h2>", f"<div class='box'><b>Input (ι):</b> {_e(t.user)}</div>"]
    if carried is not None:
        out.append(f"<div class='box'><b>Scratchpad carried in:</b> <code>{_e(carried)}</code></div>")
    if t.halted:
        out.append(f"<div class='box bad'>Halted at {_e(t.halted.get('step'))}: {_e(t.halted.get('reason'))}</div>")
    out.append("<div class='box'><span class='sp'>1. Decompose</span><ul>")
    for task in t.tasks:
        deps = f" <span class='muted'>after {', '.join(task.depends_on)}</span>" if task.depends_on else ""
        if task.when is not None:
            deps += f" <span class='muted'>when {_e(task.when.key)} {_e(task.when.op)} {_e(json.dumps(task.when.value, default=str))}</span>"
        if task.for_each is not None:
            deps += f" <span class='muted'>for each {_e(task.for_each.param)} in {_e(task.for_each.task)}.{_e(task.for_each.field)}</span>"
        out.append(
            f"<li><b>{_e(task.id)}</b>: {_e(task.text)} <span class='muted'>[{_e(task.tool_name or '—')}]</span>{deps}</li>"
        )
    out.append("</ul></div>")
    if t.order:
        out.append(f"<div class='box'><span class='sp'>2. Get-Order:</span> {' ≺ '.join(_e(x) for x in t.order)}</div>")
    # a fan-out task's instances follow it, each with its own checks, bindings and outcome
    shown = [
        x for tid in dict.fromkeys(t.order) for x in [tid, *(t.outcomes[tid].instances if tid in t.outcomes else [])]
    ]
    for tid in shown:
        o = t.outcomes.get(tid)
        out.append(f"<div class='box'><span class='sp'>Task {_e(tid)}</span>")
        pre = t.prerequisites.get(tid, [])
        if pre:
            out.append("<div><b>3. Check-Prerequisites</b><ul>")
            for p in pre:
                extra = ""
                if p.retrieval is not None:
                    extra += f" → retrieve via <code>{_e(_call(p.retrieval.tool_name, p.retrieval.parameters))}</code>"
                if p.recheck:
                    extra += f" → re-check: {_e(p.recheck)}"
                if p.remediation is not None:
                    extra += (
                        f" → remediation <code>{_e(_call(p.remediation.tool_name, p.remediation.parameters))}</code>"
                    )
                out.append(f"<li>Check({_e(p.key)}, S) = <b>{_e(p.outcome)}</b>{extra}</li>")
            out.append("</ul></div>")
        if tid in t.matches:
            out.append(f"<div><b>4. Match:</b> f = <code>{_e(t.matches[tid] or '⊥')}</code></div>")
        b = t.bindings.get(tid, {})
        if b:
            out.append("<table><tr><th>parameter</th><th>source</th><th>value</th><th>consulted</th></tr>")
            for m, r in b.items():
                out.append(
                    f"<tr class='src-{_e(r.source)}'><td>{_e(m)}</td><td>{_e(r.source)}</td>"
                    f"<td><code>{_e(r.value)}</code></td><td>{_e(' → '.join(r.consulted))}</td></tr>"
                )
            out.append("</table>")
        if o is not None:
            cls = "ok" if o.status in ("executed", "skipped_condition") else "bad"  # a false condition is no failure
            why = f" — {_e(o.reason)}" if o.reason else ""
            out.append(f"<div>Outcome: <span class='{cls}'>{_e(o.status)}</span>{why}</div>")
        out.append("</div>")
    calls = [c for c in t.calls]
    if calls:
        out.append(
            "<div class='box'><b>Calls</b><table><tr><th>task</th><th>call</th><th>committed</th><th>result / rejection</th></tr>"
        )
        for c in calls:
            res = "; ".join(c.rejected) if c.rejected else json.dumps(c.result, ensure_ascii=False, default=str)[:300]
            if c.warnings:  # findings that did not block the commit (an imported registry's output schema)
                res += " — warning: " + "; ".join(c.warnings)
            out.append(
                f"<tr><td>{_e(c.task_id)} ({_e(c.purpose)})</td><td><code>{_e(_call(c.tool, c.arguments))}</code></td>"
                f"<td class='{'ok' if c.committed else 'bad'}'>{'✓' if c.committed else '✗'}</td><td>{_e(res)}</td></tr>"
            )
        out.append("</table></div>")
    if trace is not None and len(trace):
        heads = "".join(f"<th>{h}</th>" for h in ("#", "step", "kind", "attempt", "action", "contract", "model", "ms"))
        out.append(f"<details><summary>Contract results of every step</summary><table><tr>{heads}</tr>")
        for r in trace:
            viol = "; ".join(
                f"[{v['level']}] {v['constraint']}: {v['message']}" for v in r.contract.get("violations", [])
            )
            ok = "<span class='ok'>ok</span>" if r.ok else f"<span class='bad'>{_e(viol)}</span>"
            model = _e(f"{r.model.get('backend')}:{r.model.get('adapter') or r.model.get('model')}") if r.model else ""
            out.append(
                f"<tr><td>{r.seq}</td><td>{_e(r.path)}</td><td>{_e(r.kind)}</td><td>{r.attempt}</td><td>{_e(r.action)}</td><td>{ok}</td><td>{model}</td><td>{r.elapsed_ms:.2f}</td></tr>"
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
    for i, t in enumerate(turns):
        body.append(render_turn(t, traces[i] if traces and i < len(traces) else None, carried))
        carried = t.scratchpad
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
