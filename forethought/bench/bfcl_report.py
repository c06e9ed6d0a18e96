"""Summaries and ``report.md`` for ``forethought bench bfcl`` (run and ceiling modes)."""

from __future__ import annotations

import datetime
import os
import platform
from collections import Counter
from pathlib import Path
from typing import Any

from forethought.primitives.io import atomic_write_json, atomic_write_text

STATUSES = (
    "executed",
    "partial",
    "missing_function",
    "missing_param",
    "blocked",
    "tool_failed",
    "skipped",
    "skipped_condition",
    "error",
)


def percent(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f} %)" if n else "—"


def table_cell(text: Any, limit: int = 160) -> str:
    cell = str(text).replace("|", "\\|").replace("\n", " ")
    return cell if len(cell) <= limit else cell[: limit - 1] + "…"


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
    for run in runs:
        if run.backend_error is not None:
            backend_errors.append(
                {"entry": run.id, "turn": run.backend_error["turn"], "message": run.backend_error.get("message", "")}
            )
        for turn in run.turns:
            outcomes.update(o.status for o in turn.outcomes.values())
            slm_calls += turn.slm_calls
            invariant += len(turn.invariant_violations)
            if turn.halted:
                halted.append({"entry": run.id, "turn": turn.index, "reason": turn.halted.get("reason", "")})
        for tr in run.traces:
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
    answers = [a for r in runs for a in r.answers]
    departing = [a for a in answers if a.get("departure", {}).get("departs")]
    model = (
        {  # responder and vanilla: what the base model answered
            "answered_turns": len(answers),
            "parse_errors": sum(len(a.get("parse_errors", [])) for a in answers),
            "blocked_calls": sum(len(a.get("blocked", [])) for a in answers),
            "step_limit_turns": sum(1 for a in answers if a.get("step_limit")),
            "departing_turns": len(departing),
            "added": sum(len(a["departure"]["added"]) for a in departing),
            "dropped": sum(len(a["departure"]["dropped"]) for a in departing),
            "changed": sum(len(a["departure"]["changed"]) for a in departing),
            "kept": sum(a["departure"]["kept"] for a in answers if "departure" in a),
            "examples": [
                {"entry": r.id, "turn": a["turn"], **{k: a["departure"][k] for k in ("added", "dropped", "changed")}}
                for r in runs
                for a in r.answers
                if a.get("departure", {}).get("departs")
            ][:20],
        }
        if answers
        else None
    )
    return {
        "model_name": model_name,
        "entries": len(runs),
        "scored": len(scored),
        "correct": correct,
        "accuracy": correct / len(scored) if scored else None,
        "verdicts": {r.id: (r.verdict["valid"] if r.verdict is not None else None) for r in runs},
        "error_types": dict(Counter(r.verdict.get("error_type", "?") for r in scored if not r.verdict["valid"])),
        "turns": sum(len(r.turns) for r in runs),
        "halted": halted,
        "backend_errors": backend_errors,
        "outcomes": dict(outcomes),
        "slm_calls": slm_calls,
        "invariant_violations": invariant,
        "violations": {p: {**v, "constraints": dict(v["constraints"])} for p, v in sorted(violations.items())},
        "model": model,
    }


def _backend_line(backend: dict[str, Any]) -> str:
    extra = ", ".join(f"{k}={v}" for k, v in backend.items() if k != "name")
    return f"`{backend['name']}`" + (f" ({extra})" if extra else "")


def _short(setting: str) -> str:
    """A setting in a table's setting column: on / off for the kernel (as the first reports had it)."""
    return {
        "cvc_on": "on",
        "cvc_off": "off",
        "responder_cvc_on": "responder, on",
        "responder_cvc_off": "responder, off",
        "vanilla": "vanilla",
    }[setting]


def write_run_report(out: Path, cfg: Any, summary: dict[str, Any]) -> None:
    from .common import SETTINGS

    cats = summary["categories"]
    variants = [v for v in SETTINGS if any(v in s for s in cats.values())]
    modes = summary.get("modes", ["kernel"])
    lines = _header(
        "BFCL multi-turn: " + ", ".join(modes) if modes != ["kernel"] else "BFCL multi-turn through the kernel", summary
    )
    if summary.get("backend"):
        lines += [f"Backend: {_backend_line(summary['backend'])} (the kernel's primitives)."]
    if summary.get("responder"):
        responder = summary["responder"]
        lines += [f"Base model (responder and vanilla): `{responder['model']}` at {responder['base_url']}."]
    lines += [
        "These are the figures of these models on the entries listed; entries a model did not answer are not "
        "scored (listed below). Settings: kernel (its committed calls are the answer), responder (a base model "
        "reads each kernel turn, rendered as docs/responder.md describes, and its calls are the answer, through "
        "the same guards), vanilla (the base model with bfcl's function docs and the conversation, no kernel).",
        "",
    ]
    lines += [
        "## Accuracy per category",
        "",
        "| category | " + " | ".join(SETTINGS[v] for v in variants) + " |",
        "| --- |" + " --- |" * len(variants),
    ]
    for category, scores in cats.items():
        lines.append(
            f"| {category} | "
            + " | ".join(
                percent(scores[v]["correct"], scores[v]["scored"]) if v in scores else "not run" for v in variants
            )
            + " |"
        )
    for on, off in (("on", "off"), ("off", "on")):
        if any(v.endswith(f"cvc_{on}") for v in variants) and not any(v.endswith(f"cvc_{off}") for v in variants):
            lines += ["", f"Only CVC {on} was run (`cvc=both` runs both)."]
    answered = [(c, v, s[v]["model"]) for c, s in cats.items() for v in variants if v in s and s[v].get("model")]
    if answered:
        lines += [
            "",
            "## The base model's answers",
            "",
            "Responder: per turn, the calls it answered against the calls the kernel's trial committed (the "
            "trace): *kept*, *added* (not in the trace), *dropped* (in the trace, not answered), *changed* (the "
            "same function with other arguments). Blocked: answered calls the guards refused. Vanilla: every "
            "call it made ran. Parse errors: tool calls that could not be read (left out, located in "
            "`<category>_answers.jsonl`).",
            "",
            "| category | setting | turns answered | departing turns | kept | added | dropped | changed | "
            "blocked calls | parse errors | step-limit turns |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for category, variant, answers in answered:
            dep = (
                f"{answers['departing_turns']} | {answers['kept']} | {answers['added']} | {answers['dropped']} | {answers['changed']}"
                if variant.startswith("responder")
                else "— | — | — | — | —"
            )
            lines.append(
                f"| {category} | {_short(variant)} | {answers['answered_turns']} | {dep} | {answers['blocked_calls']} | "
                f"{answers['parse_errors']} | {answers['step_limit_turns']} |"
            )
        for category, variant, answers in answered:
            for example in answers["examples"][:10]:
                parts = [
                    f"added {', '.join(f'`{x}`' for x in example['added'])}" if example["added"] else "",
                    f"dropped {', '.join(f'`{x}`' for x in example['dropped'])}" if example["dropped"] else "",
                    "changed " + ", ".join(f"`{x['trace']}` → `{x['answer']}`" for x in example["changed"])
                    if example["changed"]
                    else "",
                ]
                lines.append(
                    f"- {category} {example['entry']} turn {example['turn']} ({_short(variant)}): "
                    + table_cell("; ".join(p for p in parts if p), 400)
                )
    lines += [
        "",
        "## Halts and backend errors",
        "",
        "| category | setting | turns | halted turns | entries not answered |",
        "| --- | --- | --- | --- | --- |",
    ]
    for category, scores in cats.items():
        for variant in variants:
            if variant in scores:
                lines.append(
                    f"| {category} | {_short(variant)} | {scores[variant]['turns']} | {len(scores[variant]['halted'])} | {len(scores[variant]['backend_errors'])} |"
                )
    halts = [(c, v, h) for c, s in cats.items() for v in variants if v in s for h in s[v]["halted"]]
    errors = [(c, v, e) for c, s in cats.items() for v in variants if v in s for e in s[v]["backend_errors"]]
    for category, variant, halt in halts[:30]:
        lines.append(
            f"- halted: {category} {halt['entry']} turn {halt['turn']} ({_short(variant)}): {table_cell(halt['reason'])}"
        )
    for category, variant, error in errors[:30]:
        lines.append(
            f"- no answer: {category} {error['entry']} turn {error['turn']} ({_short(variant)}): {table_cell(error['message'])}"
        )
    lines += [
        "",
        "## Task outcomes",
        "",
        "| category | setting | " + " | ".join(STATUSES) + " |",
        "| --- | --- |" + " --- |" * len(STATUSES),
    ]
    for category, scores in cats.items():
        for variant in variants:
            if variant in scores:
                if scores[variant]["turns"]:  # vanilla has no kernel turns
                    lines.append(
                        f"| {category} | {_short(variant)} | "
                        + " | ".join(str(scores[variant]["outcomes"].get(st, 0)) for st in STATUSES)
                        + " |"
                    )
    lines += [
        "",
        "## Contract violations per primitive",
        "",
        "Model calls (attempts, retries included) whose output broke its contract. With CVC off the contracts are "
        "not checked, so nothing is counted there.",
        "",
        "| category | setting | primitive | attempts | violating | constraints |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for category, scores in cats.items():
        for variant in variants:
            for primitive, row in scores.get(variant, {}).get("violations", {}).items():
                cons = (
                    ", ".join(f"{k} {n}" for k, n in sorted(row["constraints"].items(), key=lambda kv: -kv[1])) or "—"
                )
                lines.append(
                    f"| {category} | {_short(variant)} | {primitive} | {row['attempts']} | {row['violating']} | {table_cell(cons)} |"
                )
    lines += [
        "",
        "## The checker's error types",
        "",
        "| category | setting | error type | entries |",
        "| --- | --- | --- | --- |",
    ]
    for category, scores in cats.items():
        for variant in variants:
            for et, n in sorted(scores.get(variant, {}).get("error_types", {}).items(), key=lambda kv: -kv[1]):
                lines.append(f"| {category} | {_short(variant)} | `{et}` | {n} |")
    lines += [
        "",
        "## Files",
        "",
        "One folder per setting (kernel: `cvc_on/`, `cvc_off/`; `responder_cvc_on/`, `responder_cvc_off/`; "
        "`vanilla/`): `BFCL_v4_<category>_result.json` (bfcl's result rows: `id`, `result` as turn → step → "
        "call strings, plus the request the kernel got each turn), `BFCL_v4_<category>_score.json` (bfcl's score file: "
        "accuracy, then each failed entry with the checker's error), `<category>_turns.jsonl` (every turn's decisions) "
        "and `<category>_trace.jsonl` (kernel and responder), `<category>_answers.jsonl` (responder and vanilla: the "
        "model's answer per turn, the rendering it was given, its departures); `summary.json`."
        + (" `recording.jsonl`: every model reply." if cfg.record else ""),
        "",
    ]
    atomic_write_text(out / "report.md", "\n".join(lines))
    atomic_write_json(out / "summary.json", summary)


# ------------------------------------------------------------- ceiling mode
def _warnings(by_tool: dict[str, int]) -> str:
    return (
        f"{sum(by_tool.values())} (" + ", ".join(f"{t} {n}" for t, n in sorted(by_tool.items())) + ")"
        if by_tool
        else "0"
    )


def summarise_ceiling(results: list[Any], model_name: str) -> dict[str, Any]:
    through = [r for r in results if r.let_through]
    blocked = [r for r in results if not r.let_through]
    availability: Counter = Counter()
    for result in results:
        availability.update(result.availability)
    return {
        "model_name": model_name,
        "entries": len(results),
        "let_through": len(through),
        "let_through_all_available": sum(1 for r in through if r.all_available),
        "calls": sum(r.calls for r in results),
        "blocked_calls": [b.__dict__ for r in results for b in r.blocked],
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
        "No model is involved: this bounds what the kernel's structure allows, it is no accuracy.",
        "",
        "## Ground-truth sequences the guards let through",
        "",
        "| category | entries | let through | ground-truth calls | blocked calls | checker passes, let through "
        "| checker passes, blocked | output-schema warnings (not enforced) | let through, every value available |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for category, scores in cats.items():
        lines.append(
            f"| {category} | {scores['entries']} | {percent(scores['let_through'], scores['entries'])} | {scores['calls']} | "
            f"{len(scores['blocked_calls'])} | {scores['checker_pass_let_through']}/{scores['let_through']} | "
            f"{scores['checker_pass_blocked']}/{scores['blocked_entries']} | {_warnings(scores['schema_warnings'])} | "
            f"{percent(scores['let_through_all_available'], scores['entries'])} |"
        )
    lines += [
        "",
        "## Blocked ground-truth calls",
        "",
        "| category | entry | turn | call | guard | reason |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for category, scores in cats.items():
        for blocked in scores["blocked_calls"]:
            lines.append(
                f"| {category} | {blocked['entry']} | {blocked['turn']} | `{table_cell(blocked['call'], 100)}` | {blocked['stage']} | {table_cell('; '.join(blocked['reasons']))} |"
            )
    cols = list(AVAILABLE) + list(UNAVAILABLE)
    lines += [
        "",
        "## Ground-truth parameter values: where they were when needed",
        "",
        "Before each call, each argument value was looked for in the turn's request ι (and τ), then in the "
        "scratchpad S, then in both together, then among the parameter's documented enum (the first "
        f"{len(AVAILABLE)} columns: values the kernel can take). Otherwise: in an earlier turn's text (the kernel "
        "does not see it), in an earlier call's result (it reaches S only once results are written into S), in "
        "the world's state (the classes' attributes: a lookup call would find it), or nowhere (implied or "
        "reformatted: a date written out, an airport code for a city, 'fully' for 1.0). Matching is the decompose "
        "contract's grounding (`kernel/grounding.py`): strings as case-insensitive substrings, numbers by value, "
        "lists and dicts element by element; null and booleans always count. It is lenient (a short string "
        "matches inside a longer one), so the available share is an upper bound.",
        "",
        "| category | values | available | " + " | ".join(cols) + " |",
        "| --- | --- | --- |" + " --- |" * len(cols),
    ]
    for category, scores in cats.items():
        availability = scores["availability"]
        total = sum(availability.values())
        avail = sum(availability.get(k, 0) for k in AVAILABLE)
        lines.append(
            f"| {category} | {total} | {percent(avail, total)} | "
            + " | ".join(str(availability.get(k, 0)) for k in cols)
            + " |"
        )
    lines += [
        "",
        "## Files",
        "",
        "`ceiling/`: `BFCL_v4_<category>_result.json` (the committed calls, bfcl's result rows, "
        "with the blocked calls), `BFCL_v4_<category>_score.json` (bfcl's score file), `<category>_unavailable.jsonl` "
        "(every value not available, where it was found); `summary.json`.",
        "",
    ]
    atomic_write_text(out / "report.md", "\n".join(lines))
    atomic_write_json(out / "summary.json", summary)


def console_summary(summary: dict[str, Any]) -> str:
    lines = []
    for category, scores in summary["categories"].items():
        if summary["mode"] == "ceiling":
            availability = scores["availability"]
            total = sum(availability.values())
            from .bfcl_ceiling import AVAILABLE

            lines.append(
                f"{category}: {scores['let_through']}/{scores['entries']} ground-truth sequences let through the guards; checker "
                f"passes {scores['checker_pass_let_through']}/{scores['let_through']} of them; "
                f"{sum(availability.get(k, 0) for k in AVAILABLE)}/{total} values available when needed"
            )
        else:
            for setting, result in scores.items():
                label = f"CVC {setting[4:]}" if setting in ("cvc_on", "cvc_off") else _short(setting)
                lines.append(
                    f"{category} ({label}): {percent(result['correct'], result['scored'])} by bfcl's checker"
                    + (
                        f"; {len(result['backend_errors'])} entries not answered by the backend"
                        if result["backend_errors"]
                        else ""
                    )
                )
    return "\n".join(lines)
