"""Retrieved demonstrations (DSPy's KNNFewShot, for a small model): a primitive whose spec has a :class:`Retrieval`
is shown, beside its input, the decisions of *train* solutions whose text is nearest to it, each with its answer.

Why: match_func's errors are wordings the model never tied to a tool, and the error rate falls with how often the
wanted tool was a train target (docs/training.md, "Probes after run #7"); the nearest trained tasks' tools hold the
wanted one far more often than a small model picks it (93.9 % among the 3 nearest against 77.3 %). Shown them, the
words-tokenizer model went from 81.1 to 87.5 % dev exact match.

The store is data like the datasets: ``forethought generate`` writes it (the train solutions' decisions, never a
validation solution's, never one of the dev split that selection reads), the bundle carries it, and the kernel
retrieves from it at inference exactly as generate did, through one function (:meth:`DemonstrationStore.nearest`)
that the spec hash covers. A row is never shown its own solution's decisions; a task of the user's own domain,
whose tools no stored decision names, is shown ``(none)``.

One store per process (the engine renders in worker threads), like the tool rendering (kernel/specs/shared.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from forethought.errors import UserError

DEMONSTRATIONS_FORMAT = 1  # the store file's format_version (its first line)
# Words that say nothing about which tool a task wants: left out of the overlap.
STOP_WORDS = frozenset("the a an of to for in on with and or by from that this it its is be all one my me i".split())


class Demonstration(BaseModel):
    """One retrieved decision: a train solution's task and the tool it was answered with."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    task: str
    tool_name: str


def words(text: str) -> frozenset[str]:
    """A text's content words, lower-cased, camelCase split, a trailing s dropped (the overlap's unit)."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return frozenset(w.lower().rstrip("s") for w in re.findall(r"[A-Za-z]+", text)) - STOP_WORDS


@dataclass(frozen=True)
class StoredDecision:
    solution_id: str
    text: str
    answer: str
    words: frozenset[str]


class DemonstrationStore:
    """A primitive's stored train decisions and how many to show (``k``)."""

    def __init__(self, primitive: str, k: int, decisions: Iterable[tuple[str, str, str]]):
        self.primitive = primitive
        self.k = k
        seen: set[tuple[str, str, str]] = set()
        self.decisions: list[StoredDecision] = []
        for solution_id, text, answer in decisions:  # first occurrence wins: the order is the tie-break
            if (solution_id, text, answer) not in seen:
                seen.add((solution_id, text, answer))
                self.decisions.append(StoredDecision(solution_id, text, answer, words(text)))

    def nearest(self, text: str, answers: Sequence[str], exclude: str | None = None) -> list[Demonstration]:
        """Up to ``k`` stored decisions nearest to ``text`` by word overlap (Jaccard), one per distinct answer and
        only answers in ``answers`` (the tools this prompt lists), none of solution ``exclude``; ties keep the
        store's order. Empty when no stored decision shares a word (the prompt then says ``(none)``)."""
        query, allowed = words(text), set(answers)
        scored = []
        for position, decision in enumerate(self.decisions):
            if decision.answer not in allowed or decision.solution_id == exclude:
                continue
            overlap = len(query & decision.words)
            if overlap:
                scored.append((-overlap / len(query | decision.words), position, decision))
        scored.sort(key=lambda x: (x[0], x[1]))
        shown: list[Demonstration] = []
        picked: set[str] = set()
        for _, _, decision in scored:
            if decision.answer in picked:
                continue
            picked.add(decision.answer)
            shown.append(Demonstration(task=decision.text, tool_name=decision.answer))
            if len(shown) == self.k:
                break
        return shown

    # ------------------------------------------------------------ the file
    def header(self) -> dict[str, Any]:
        return {"format_version": DEMONSTRATIONS_FORMAT, "primitive": self.primitive, "k": self.k}

    def to_text(self) -> str:
        lines = [json.dumps(self.header())]
        lines += [
            json.dumps({"solution_id": d.solution_id, "text": d.text, "answer": d.answer}, ensure_ascii=False)
            for d in self.decisions
        ]
        return "\n".join(lines) + "\n"

    def digest(self) -> str:
        return hashlib.sha256(self.to_text().encode()).hexdigest()

    @classmethod
    def read(cls, path: str | Path) -> DemonstrationStore:
        """A store file (its first line the header); anything else is a located error."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise UserError("demonstrations store: no such file", str(path)) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"demonstrations store: not readable ({exc})", str(path)) from None
        try:
            header = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError as exc:
            raise UserError(f"demonstrations store: line 1 is not JSON ({exc})", str(path)) from None
        if not isinstance(header, dict) or "format_version" not in header:
            raise UserError('demonstrations store: line 1 must be the header {"format_version": ...}', str(path))
        version = header["format_version"]
        if not isinstance(version, int) or isinstance(version, bool) or version != DEMONSTRATIONS_FORMAT:
            raise UserError(
                f"demonstrations store: format_version {header['format_version']!r} is not the one this forethought "
                f"reads ({DEMONSTRATIONS_FORMAT}): regenerate the data (forethought generate) and repackage",
                str(path),
            )
        k = header.get("k")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1 or not isinstance(header.get("primitive"), str):
            raise UserError("demonstrations store: the header needs a primitive name and k >= 1", str(path))
        decisions = []
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
                decisions.append((entry["solution_id"], entry["text"], entry["answer"]))
                if not all(isinstance(x, str) for x in decisions[-1]):
                    raise TypeError
            except (json.JSONDecodeError, KeyError, TypeError):
                raise UserError(
                    'demonstrations store: expected {"solution_id", "text", "answer"} (strings)', f"{path}:{number}"
                ) from None
        return cls(header["primitive"], k, decisions)


def bundle_stores(path: str | Path) -> list[DemonstrationStore]:
    """The demonstrations stores a bundle carries, their digests checked against its manifest (none for a bundle
    without): the caller retrieves from them (:func:`set_stores`) before it compares spec hashes."""
    from forethought.bundle.manifest import BundleError, bundle_store_files

    stores = []
    for name, file in bundle_store_files(path).items():
        try:
            store = DemonstrationStore.read(file)
        except UserError as exc:
            raise BundleError(exc.message, exc.where) from None
        if store.primitive != name:
            raise BundleError(f"the store is {store.primitive!r}'s, not {name!r}'s", str(file))
        stores.append(store)
    return stores


# ------------------------------------------------------------ the process's stores
_ACTIVE: dict[str, DemonstrationStore] = {}


def active_store(primitive: str) -> DemonstrationStore | None:
    return _ACTIVE.get(primitive)


def set_stores(stores: Iterable[DemonstrationStore]) -> None:
    """Retrieve from these stores in this process (none: no demonstrations); a command sets them from the data or
    the bundle it works on, before it renders or hashes anything."""
    global _ACTIVE
    _ACTIVE = {s.primitive: s for s in stores}  # one rebinding: a worker thread sees the old stores or the new


@contextlib.contextmanager
def using_stores(stores: Iterable[DemonstrationStore]) -> Iterator[None]:
    before = list(_ACTIVE.values())
    set_stores(stores)
    try:
        yield
    finally:
        set_stores(before)
