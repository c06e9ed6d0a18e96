"""BFCL v4 multi-turn entries, their possible answers and their registries, read from the installed bfcl-eval.

The files are bfcl-eval's own (``bfcl_eval/data/BFCL_v4_<category>.json`` and ``possible_answer/``;
JSON Lines despite the name). Nothing is copied into this repository and nothing is downloaded:
bfcl-eval is installed with ``pip install --no-deps bfcl-eval==2026.3.23 mpmath==1.4.1`` (the
Makefile does it), which brings the data, the function docs, the tool classes and the checker
without the ~150 packages of its full install.

An entry's registry is its involved classes' function docs, imported through our BFCL importer
(prose enums, ``"None"`` defaults as null, the side-effect map, positional binding by the doc's
order), minus the functions ``missed_function`` withholds until a later turn (miss_func).
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forethought.bounded import JSONProblem, json_path, loads_json, read_bounded
from forethought.errors import UserError
from forethought.kernel.registry import Registry, load_registry
from forethought.kernel.registry.model import ToolSpec

# The multi-turn categories this command runs (bfcl's names); the short forms are accepted on the command line.
CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
SHORT = {c.removeprefix("multi_turn_"): c for c in CATEGORIES}
INSTALL_HINT = "pip install --no-deps bfcl-eval==2026.3.23 mpmath==1.4.1"


def bfcl_data_dir() -> Path:
    """bfcl-eval's data folder; a located error when the package is not installed."""
    try:
        import bfcl_eval
    except ImportError:
        raise UserError(
            f"bfcl-eval is not installed; install its multi-turn parts with: {INSTALL_HINT}", "benchmark bfcl"
        ) from None
    return Path(bfcl_eval.__file__).resolve().parent / "data"


def category_name(name: str, where: str = "categories") -> str:
    """bfcl's name for a category given in full or short (``base``); unknown names are a located error."""
    if name in CATEGORIES:
        return name
    if name in SHORT:
        return SHORT[name]
    known = list(CATEGORIES) + list(SHORT)
    hint = difflib.get_close_matches(name, known, n=1)
    raise UserError(
        f"unknown category {name!r}"
        + (f" (did you mean {hint[0]!r}?)" if hint else "")
        + f"; available: {', '.join(CATEGORIES)} (or {', '.join(SHORT)})",
        where,
    )


def long_context(category: str) -> bool:
    """As bfcl decides it (multi_turn_utils / base_handler): the category's name says so."""
    return "long_context" in category or "composite" in category


@dataclass
class Entry:
    """One multi-turn entry with its ground truth: ``turns[i]`` is the user text of turn i ("" on a
    holdout turn), ``ground_truth[i]`` the calls bfcl expects in it, ``withheld[i]`` the functions
    that first become available at turn i (miss_func)."""

    id: str
    category: str
    turns: list[str]
    involved_classes: list[str]
    initial_config: dict[str, Any]
    ground_truth: list[list[str]]
    withheld: dict[int, list[str]] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)  # the row as bfcl has it (for its checker)

    @property
    def long_context(self) -> bool:
        return long_context(self.category)

    def withheld_after(self, turn: int) -> set[str]:
        """Functions not yet available at ``turn``."""
        return {f for t, fs in self.withheld.items() if t > turn for f in fs}


# The fields of bfcl's rows that this module reads, typed as bfcl writes them; other fields are kept for its checker.
class _Message(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    role: str
    content: str


class _EntryRow(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    id: str = Field(min_length=1)
    question: list[list[_Message]] = Field(min_length=1)
    involved_classes: list[str] = Field(min_length=1)
    initial_config: dict[str, Any] = Field(default_factory=dict)
    missed_function: dict[str, list[str]] = Field(default_factory=dict)


class _AnswerRow(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    id: str = Field(min_length=1)
    ground_truth: list[list[str]]


def _rows(path: Path, model: type[BaseModel]) -> list[tuple[int, dict[str, Any]]]:
    """(line, row) for each non-blank line of one of bfcl's JSON Lines files, read as every file the project does not
    write itself is read (forethought/bounded.py: a size bound, UTF-8, no NaN, no key given twice) and each row checked
    against ``model``: a problem is a located UserError (file, line, field), never a KeyError mid-run."""
    where = str(path)
    try:
        text = read_bounded(path, where).decode("utf-8")
    except FileNotFoundError:
        raise UserError(f"missing: bfcl-eval's data is incomplete; reinstall it with: {INSTALL_HINT}", where) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", where) from None
    rows = []
    for n, line in enumerate(text.split("\n"), 1):  # not splitlines(): JSON strings may hold U+2028
        if not line.strip():
            continue
        try:
            raw = loads_json(line, where)
        except json.JSONDecodeError as exc:
            raise UserError(f"line {n}: not JSON: {exc.msg} (column {exc.colno})", where) from None
        except JSONProblem as exc:
            at = f" at {json_path(exc.path)}" if exc.path else ""
            raise UserError(f"line {n}: {exc.detail}{at}", where) from None
        if not isinstance(raw, dict):
            raise UserError(f"line {n}: expected a JSON object, got {type(raw).__name__}", where)
        try:
            model.model_validate(raw)
        except ValidationError as exc:
            error = exc.errors()[0]
            field_ = json_path(list(error["loc"]))
            raise UserError(f"line {n}: field {field_!r}: {error['msg']}", where) from None
        rows.append((n, raw))
    return rows


def turn_text(messages: list[dict[str, Any]]) -> str:
    """The user's words in one turn (every turn of the four categories has at most one user message)."""
    return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")


@functools.lru_cache(maxsize=8)
def load_category(category: str) -> tuple[Entry, ...]:
    """The category's entries, each checked against its possible answer and the function docs before any is run: an
    unknown class, a withheld function no involved class has, a turn count that differs from the answer's, an id given
    twice are located errors here, not a KeyError in the middle of a run."""
    data = bfcl_data_dir()
    path, answers_path = data / f"BFCL_v4_{category}.json", data / "possible_answer" / f"BFCL_v4_{category}.json"
    answers: dict[str, list[list[str]]] = {}
    for n, row in _rows(answers_path, _AnswerRow):
        if row["id"] in answers:
            raise UserError(f"line {n}: id {row['id']!r} given twice", str(answers_path))
        answers[row["id"]] = row["ground_truth"]
    tools = class_tools()
    entries, seen = [], set()
    for n, row in _rows(path, _EntryRow):
        where, at = str(path), f"line {n} ({row['id']})"
        if row["id"] in seen:
            raise UserError(f"line {n}: id {row['id']!r} given twice", where)
        seen.add(row["id"])
        if row["id"] not in answers:
            raise UserError(f"entry {row['id']} has no possible answer", str(answers_path))
        if len(answers[row["id"]]) != len(row["question"]):
            raise UserError(
                f"{at}: {len(row['question'])} turns, but its possible answer has {len(answers[row['id']])}", where
            )
        unknown = [c for c in row["involved_classes"] if c not in tools]
        if unknown:
            raise UserError(f"{at}: field 'involved_classes': no function docs for {unknown}", where)
        names = {t.name for c in row["involved_classes"] for t in tools[c]}
        withheld = {}
        for turn_key, withheld_functions in (row.get("missed_function") or {}).items():
            if not turn_key.isdigit() or not 0 <= int(turn_key) < len(row["question"]):
                raise UserError(f"{at}: field 'missed_function.{turn_key}': not a turn of the entry", where)
            if any(f not in names for f in withheld_functions):
                missing = [f for f in withheld_functions if f not in names]
                raise UserError(f"{at}: field 'missed_function.{turn_key}': no involved class has {missing}", where)
            withheld[int(turn_key)] = list(withheld_functions)
        entries.append(
            Entry(
                id=row["id"],
                category=category,
                turns=[turn_text(t) for t in row["question"]],
                involved_classes=list(row["involved_classes"]),
                initial_config=row.get("initial_config", {}),
                ground_truth=answers[row["id"]],
                withheld=withheld,
                raw=row,
            )
        )
    return tuple(entries)


def select(category: str, ids: list[str], count: int | None) -> list[Entry]:
    """The entries to run: those named in ``ids`` (ids of other categories are left to them), else the
    first ``count``, else all."""
    entries = list(load_category(category))
    if ids:
        wanted = set(ids)
        entries = [e for e in entries if e.id in wanted]
    return entries[:count] if count is not None else entries


def check_ids(categories: list[str], ids: list[str]) -> None:
    """Every id in ``ids`` must name an entry of one of the chosen categories."""
    known = {e.id for c in categories for e in load_category(c)}
    unknown = [i for i in ids if i not in known]
    if unknown:
        hint = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        raise UserError(
            f"no entries {unknown} in categories {categories}" + (f" (did you mean {hint[0]!r}?)" if hint else ""),
            "ids",
        )


@functools.lru_cache(maxsize=1)
def class_tools() -> dict[str, tuple[ToolSpec, ...]]:
    """class -> its function docs as imported by our BFCL importer (the files bfcl itself reads)."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    docs = bfcl_data_dir() / "multi_turn_func_doc"
    return {
        cls: tuple(load_registry(docs / name, fmt="bfcl"))
        for cls, name in MULTI_TURN_FUNC_DOC_FILE_MAPPING.items()
        if (docs / name).is_file()
    }


def entry_registry(entry: Entry, turn: int = 0) -> Registry:
    """Ω at ``turn``: the involved classes' functions, minus those still withheld (miss_func)."""
    tools = class_tools()
    hidden = entry.withheld_after(turn)
    return Registry((t for cls in entry.involved_classes for t in tools[cls] if t.name not in hidden), name=entry.id)


def release_withheld(entry: Entry, registry: Registry, turn: int) -> list[str]:
    """Add the functions the holdout ``turn`` brings (bfcl adds their docs at that turn); returns their names."""
    by_name = {t.name: t for cls in entry.involved_classes for t in class_tools()[cls]}
    added = []
    for name in entry.withheld.get(turn, []):
        if name not in registry:
            registry.add(by_name[name])
            added.append(name)
    return added


# The rule for a request the kernel could not finish (miss_func, miss_param). bfcl's own harness keeps
# the whole conversation in the model's context; the kernel sees one request per turn. So a turn that
# left a task unfinished (a missing function or parameter) keeps its text pending, and the next turn's
# request is that text followed by the new one: on a holdout turn (no user text, new functions) the
# earlier request is re-run with the functions it lacked; on a miss_param follow-up ("The specific file
# is previous_report.pdf.") the earlier request is re-run with the value. A holdout turn with nothing
# pending gets bfcl's own holdout prompt.
def request_text(pending: str | None, text: str) -> str:
    if pending and text:
        return f"{pending}\n{text}"
    if pending:
        return pending
    if text:
        return text
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

    return DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
