"""Scoring with bfcl-eval's own ``multi_turn_checker``, and bfcl's result and score files.

The checker re-executes the candidate's call strings and the ground truth on fresh instances of
bfcl's classes, compares their public state after every turn and requires every ground-truth
result among the candidate's results. It caches those instances in the module globals of
``multi_turn_utils`` under the model name, the entry id and the class: a name used twice starts
the second run from the first run's final state (ground truth then fails 71 of 200). So every
scoring run gets a fresh name (:func:`checker_model_name`), and its cached instances are dropped
when it is done (:func:`release`).
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from pathlib import Path
from typing import Any

from forethought.primitives.io import atomic_write_jsonl

from .bfcl_data import Entry

MAX_DETAIL_CHARS = 20_000  # a long_context state diff is megabytes; the score file keeps the start of it


def checker_model_name(label: str) -> str:
    """A name no earlier scoring in this process used (bfcl turns ``-./:`` into ``_`` in it)."""
    return re.sub(r"\W", "_", f"forethought_{label}_{uuid.uuid4().hex[:12]}")


def candidate_steps(turn_calls: list[list[str]]) -> list[list[list[str]]]:
    """bfcl's decoded form, turn -> step -> call strings: the kernel's committed calls of a turn are one
    step; a turn with no call has no step (the checker reads that as an empty turn)."""
    return [[calls] if calls else [] for calls in turn_calls]


def score(entry: Entry, turn_calls: list[list[str]], model_name: str) -> dict[str, Any]:
    """bfcl's verdict on one entry: ``{"valid": True}`` or ``{"valid": False, "error_type", "error_message", ...}``."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    if len(turn_calls) != len(entry.ground_truth):
        # bfcl's eval runner gives this verdict before calling the checker (a run that stopped early).
        return {
            "valid": False,
            "error_type": "multi_turn:force_terminated",
            "error_message": f"{len(turn_calls)} turns of results for {len(entry.ground_truth)} turns of ground truth",
        }
    return multi_turn_checker(
        candidate_steps(turn_calls), entry.ground_truth, copy.deepcopy(entry.raw), entry.category, model_name
    )


def release(model_name: str) -> int:
    """Drop the instances the checker cached for ``model_name``; returns how many."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    cache = vars(multi_turn_utils)
    names = [k for k in cache if k.startswith(model_name + "_")]
    for k in names:
        del cache[k]
    return len(names)


def _capped(value: Any) -> Any:
    text = json.dumps(value, default=str, ensure_ascii=False)
    if len(text) <= MAX_DETAIL_CHARS:
        return json.loads(text)
    return {"truncated": True, "chars": len(text), "start": text[:MAX_DETAIL_CHARS]}


def write_result_file(path: Path, rows: list[dict[str, Any]]) -> None:
    """One JSON line per entry: ``{"id", "result": turn -> step -> call strings, ...}`` (bfcl's result rows,
    already decoded; extra keys say what the kernel did)."""
    atomic_write_jsonl(path, rows)


def write_score_file(
    path: Path,
    model_name: str,
    category: str,
    verdicts: dict[str, dict[str, Any]],
    candidates: dict[str, list[list[str]]],
    entries: dict[str, Entry],
) -> None:
    """bfcl's score file: a header line with the accuracy, then one line per failed entry."""
    correct = sum(1 for v in verdicts.values() if v["valid"])
    rows: list[dict[str, Any]] = [
        {
            "accuracy": correct / len(verdicts) if verdicts else 0.0,
            "correct_count": correct,
            "total_count": len(verdicts),
        }
    ]
    for entry_id, verdict in verdicts.items():
        if verdict["valid"]:
            continue
        error = {k: v for k, v in verdict.items() if k != "valid"}
        rows.append(
            {
                "id": entry_id,
                "model_name": model_name,
                "test_category": category,
                "valid": False,
                "error": _capped(error),
                "model_result_decoded": candidate_steps(candidates[entry_id]),
                "possible_answer": entries[entry_id].ground_truth,
            }
        )
    atomic_write_jsonl(path, rows)
