"""Summaries and ``report.md`` for ``forethought bench bfcl`` (run and ceiling modes)."""

from __future__ import annotations

import datetime
import os
import platform
from collections import Counter
from pathlib import Path
from typing import Any

from forethought.primitives.io import atomic_write_json, atomic_write_text

STATUSES = ("executed", "missing_function", "missing_param", "blocked", "tool_failed", "skipped", "error")


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f} %)" if n else "—"


def _cell(text: Any, limit: int = 160) -> str:
    s = str(text).replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _bfcl_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bfcl-eval")
    except PackageNotFoundError:  # imported from a source tree
        return "unknown"


def _header(title: str, summary: dict[str, Any]) -> list[str]:
    lines = [f"# {title}", ""]
    if summary.get("command"):
        lines.append(f"Command: `{summary['command']}`")
    lines += [
        f"bfcl-eval {_bfcl_version()}; scored by its own `multi_turn_checker`; "
        f"{datetime.date.today().isoformat()}; {platform.machine()} machine with {os.cpu_count()} CPU cores.",
        "",
    ]
    return lines


# ----------------------------------------------------------------- run mode
def summarise_runs(runs: list[Any], model_name: str) -> dict[str, Any]:
    outcomes: Counter = Counter()
    violations: dict[str, dict[str, Any]] = {}
    halted, backend_errors = [], []
    slm_calls = invariant = 0
    for r in runs:
        if r.backend_error is not None:
            backend_errors.append({"entry": r.id, "turn": r.backend_error["turn"], "message": r.backend_error.get("message", "")})
        for t in r.turns:
            outcomes.update(o.status for o in t.outcomes.values())
            slm_calls += t.slm_calls
            invariant += len(t.invariant_violations)
            if t.halted:
                halted.append({"entry": r.id, "turn": t.index, "reason": t.halted.get("reason", "")})
        for tr in r.traces:
            for rec in tr:
                if rec.kind != "slm":
                    continue
                row = violations.setdefault(rec.primitive, {"attempts": 0, "violating": 0, "constraints": Counter()})
                row["attempts"] += 1
                found = rec.contract.get("violations", [])
                row["violating"] += bool(found)
                row["constraints"].update(v.get("constraint", "?") for v in found)
    scored = [r for r in runs if r.verdict is not None]
    correct = sum(1 for r in scored if r.verdict["valid"])
    return {
        "model_name": model_name, "entries": len(runs), "scored": len(scored), "correct": correct,
        "accuracy": correct / len(scored) if scored else None,
        "verdicts": {r.id: (r.verdict["valid"] if r.verdict is not None else None) for r in runs},
        "error_types": dict(Counter(r.verdict.get("error_type", "?") for r in scored if not r.verdict["valid"])),
        "turns": sum(len(r.turns) for r in runs), "halted": halted, "backend_errors": backend_errors,
        "outcomes": dict(outcomes), "slm_calls": slm_calls, "invariant_violations": invariant,
        "violations": {p: {**v, "constraints": dict(v["constraints"])} for p, v in sorted(violations.items())},
    }


def _backend_line(b: dict[str, Any]) -> str:
    extra = ", ".join(f"{k}={v}" for k, v in b.items() if k != "name")
    return f"`{b['name']}`" + (f" ({extra})" if extra else "")


def write_run_report(out: Path, cfg: Any, summary: dict[str, Any]) -> None:
    cats = summary["categories"]
    variants = [v for v in ("cvc_on", "cvc_off") if any(v in s for s in cats.values())]
    lines = _header("BFCL multi-turn through the kernel", summary)
    lines += [f"Backend: {_backend_line(summary['backend'])}. These are the figures of this backend on the entries "
              "listed; entries whose backend did not answer are not scored (listed below).", ""]
    lines += ["## Accuracy per category", "", "| category | " + " | ".join(f"CVC {v[4:]}" for v in variants) + " |",
              "| --- |" + " --- |" * len(variants)]
    for c, s in cats.items():
        lines.append(f"| {c} | " + " | ".join(_pct(s[v]["correct"], s[v]["scored"]) if v in s else "not run" for v in variants) + " |")
    if len(variants) == 1:
        lines += ["", f"Only CVC {variants[0][4:]} was run (`cvc=both` runs both)."]
    lines += ["", "## Halts and backend errors", "", "| category | CVC | turns | halted turns | entries not answered by the backend |",
              "| --- | --- | --- | --- | --- |"]
    for c, s in cats.items():
        for v in variants:
            if v in s:
                lines.append(f"| {c} | {v[4:]} | {s[v]['turns']} | {len(s[v]['halted'])} | {len(s[v]['backend_errors'])} |")
    halts = [(c, v, h) for c, s in cats.items() for v in variants if v in s for h in s[v]["halted"]]
    errors = [(c, v, e) for c, s in cats.items() for v in variants if v in s for e in s[v]["backend_errors"]]
    for c, v, h in halts[:30]:
        lines.append(f"- halted: {c} {h['entry']} turn {h['turn']} (CVC {v[4:]}): {_cell(h['reason'])}")
    for c, v, e in errors[:30]:
        lines.append(f"- no answer: {c} {e['entry']} turn {e['turn']} (CVC {v[4:]}): {_cell(e['message'])}")
    lines += ["", "## Task outcomes", "", "| category | CVC | " + " | ".join(STATUSES) + " |", "| --- | --- |" + " --- |" * len(STATUSES)]
    for c, s in cats.items():
        for v in variants:
            if v in s:
                lines.append(f"| {c} | {v[4:]} | " + " | ".join(str(s[v]["outcomes"].get(st, 0)) for st in STATUSES) + " |")
    lines += ["", "## Contract violations per primitive", "",
              "Model calls (attempts, retries included) whose output broke its contract. With CVC off the contracts are "
              "not checked, so nothing is counted there.", "",
              "| category | CVC | primitive | attempts | violating | constraints |", "| --- | --- | --- | --- | --- | --- |"]
    for c, s in cats.items():
        for v in variants:
            for p, row in s.get(v, {}).get("violations", {}).items():
                cons = ", ".join(f"{k} {n}" for k, n in sorted(row["constraints"].items(), key=lambda kv: -kv[1])) or "—"
                lines.append(f"| {c} | {v[4:]} | {p} | {row['attempts']} | {row['violating']} | {_cell(cons)} |")
    lines += ["", "## The checker's error types", "", "| category | CVC | error type | entries |", "| --- | --- | --- | --- |"]
    for c, s in cats.items():
        for v in variants:
            for et, n in sorted(s.get(v, {}).get("error_types", {}).items(), key=lambda kv: -kv[1]):
                lines.append(f"| {c} | {v[4:]} | `{et}` | {n} |")
    lines += ["", "## Files", "",
              "`cvc_on/` and `cvc_off/`: `BFCL_v4_<category>_result.json` (bfcl's result rows: `id`, `result` as turn → step → "
              "call strings, plus the request the kernel got each turn), `BFCL_v4_<category>_score.json` (bfcl's score file: "
              "accuracy, then each failed entry with the checker's error), `<category>_turns.jsonl` (every turn's decisions) "
              "and `<category>_trace.jsonl`; `summary.json`." + (" `recording.jsonl`: every model reply." if cfg.record else ""), ""]
    atomic_write_text(out / "report.md", "\n".join(lines))
    atomic_write_json(out / "summary.json", summary)


# ------------------------------------------------------------- ceiling mode
def _warnings(by_tool: dict[str, int]) -> str:
    return f"{sum(by_tool.values())} (" + ", ".join(f"{t} {n}" for t, n in sorted(by_tool.items())) + ")" if by_tool else "0"


def summarise_ceiling(results: list[Any], model_name: str) -> dict[str, Any]:
    through = [r for r in results if r.let_through]
    blocked = [r for r in results if not r.let_through]
    availability: Counter = Counter()
    for r in results:
        availability.update(r.availability)
    return {
        "model_name": model_name, "entries": len(results), "let_through": len(through),
        "let_through_all_available": sum(1 for r in through if r.all_available),
        "calls": sum(r.calls for r in results), "blocked_calls": [b.__dict__ for r in results for b in r.blocked],
        "checker_pass_let_through": sum(1 for r in through if r.verdict["valid"]),
        "checker_pass_blocked": sum(1 for r in blocked if r.verdict["valid"]),
        "blocked_entries": len(blocked),
        "schema_warnings": dict(sum((r.schema_warnings for r in results), Counter())),
        "error_types": dict(Counter(r.verdict.get("error_type", "?") for r in results if not r.verdict["valid"])),
        "availability": dict(availability),
    }


def write_ceiling_report(out: Path, cfg: Any, summary: dict[str, Any]) -> None:
    from .bfcl_ceiling import AVAILABLE, LABEL, UNAVAILABLE

    cats = summary["categories"]
    lines = _header(f"BFCL multi-turn: {LABEL}", summary)
    lines += [
        "Each ground-truth call went through the kernel's execution path (ToolGate precondition on our imported "
        "registry, the call on bfcl's own class, postcondition, commit and the scratchpad writes). A sequence is "
        "*let through* when no call of it was blocked. The committed calls were scored by bfcl's checker. "
        "The last column counts the sequences let through whose every argument value was also available when "
        "needed (see below): with CVC on, decompose's and match_fill's grounding contracts refuse a value that is "
        "not, so only those sequences are open to a model under the contracts as they stand. "
        "No model is involved: this bounds what the kernel's structure allows, it is no accuracy.", "",
        "## Ground-truth sequences the guards let through", "",
        "| category | entries | let through | ground-truth calls | blocked calls | checker passes, let through "
        "| checker passes, blocked | output-schema warnings (not enforced) | let through, every value available |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c, s in cats.items():
        lines.append(f"| {c} | {s['entries']} | {_pct(s['let_through'], s['entries'])} | {s['calls']} | "
                     f"{len(s['blocked_calls'])} | {s['checker_pass_let_through']}/{s['let_through']} | "
                     f"{s['checker_pass_blocked']}/{s['blocked_entries']} | {_warnings(s['schema_warnings'])} | "
                     f"{_pct(s['let_through_all_available'], s['entries'])} |")
    lines += ["", "## Blocked ground-truth calls", "", "| category | entry | turn | call | guard | reason |",
              "| --- | --- | --- | --- | --- | --- |"]
    for c, s in cats.items():
        for b in s["blocked_calls"]:
            lines.append(f"| {c} | {b['entry']} | {b['turn']} | `{_cell(b['call'], 100)}` | {b['stage']} | {_cell('; '.join(b['reasons']))} |")
    cols = list(AVAILABLE) + list(UNAVAILABLE)
    lines += ["", "## Ground-truth parameter values: where they were when needed", "",
              "Before each call, each argument value was looked for in the turn's request ι (and τ), then in the "
              "scratchpad S, then in both together, then among the parameter's documented enum (the first "
              f"{len(AVAILABLE)} columns: values the kernel can take). Otherwise: in an earlier turn's text (the kernel "
              "does not see it), in an earlier call's result (it reaches S only once results are written into S), in "
              "the world's state (the classes' attributes: a lookup call would find it), or nowhere (implied or "
              "reformatted: a date written out, an airport code for a city, 'fully' for 1.0). Matching is the decompose "
              "contract's grounding (`kernel/grounding.py`): strings as case-insensitive substrings, numbers by value, "
              "lists and dicts element by element; null and booleans always count. It is lenient (a short string "
              "matches inside a longer one), so the available share is an upper bound.", "",
              "| category | values | available | " + " | ".join(cols) + " |", "| --- | --- | --- |" + " --- |" * len(cols)]
    for c, s in cats.items():
        a = s["availability"]
        total = sum(a.values())
        avail = sum(a.get(k, 0) for k in AVAILABLE)
        lines.append(f"| {c} | {total} | {_pct(avail, total)} | " + " | ".join(str(a.get(k, 0)) for k in cols) + " |")
    lines += ["", "## Files", "", "`ceiling/`: `BFCL_v4_<category>_result.json` (the committed calls, bfcl's result rows, "
              "with the blocked calls), `BFCL_v4_<category>_score.json` (bfcl's score file), `<category>_unavailable.jsonl` "
              "(every value not available, where it was found); `summary.json`.", ""]
    atomic_write_text(out / "report.md", "\n".join(lines))
    atomic_write_json(out / "summary.json", summary)


def console_summary(summary: dict[str, Any]) -> str:
    lines = []
    for c, s in summary["categories"].items():
        if summary["mode"] == "ceiling":
            a = s["availability"]
            total = sum(a.values())
            from .bfcl_ceiling import AVAILABLE

            lines.append(f"{c}: {s['let_through']}/{s['entries']} ground-truth sequences let through the guards; checker "
                         f"passes {s['checker_pass_let_through']}/{s['let_through']} of them; "
                         f"{sum(a.get(k, 0) for k in AVAILABLE)}/{total} values available when needed")
        else:
            for v, r in s.items():
                lines.append(f"{c} (CVC {v[4:]}): {_pct(r['correct'], r['scored'])} by bfcl's checker"
                             + (f"; {len(r['backend_errors'])} entries not answered by the backend" if r["backend_errors"] else ""))
    return "\n".join(lines)
