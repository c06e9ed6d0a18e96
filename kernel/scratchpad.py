"""The scratchpad S: a key-value store that only grows (INV-S).

Values may be overwritten, keys are never removed; there is deliberately no
delete operation. Every write is logged with its source ("config", "fill",
"retrieval", "call:<tool>" for a call's arguments and declared writes,
"result:<tool>" for its result entries), and the source of each key's latest
value is kept: same-turn binding and the state view read it (docs/kernel.md).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

_MISSING = object()

# An over-long result field enters S as this marker (kernel/toolgate.py result_entries): its length and
# the start of its JSON, shown to the primitives but never bound as an argument, nor a grounding source.
RESULT_SOURCE = "result:"  # the source of a result entry: "result:<tool>"
TRUNCATED = "$truncated"  # the marker's key; "$" because no tool result field is named so
PREVIEW_CHARS = 120


def truncation_marker(text: str) -> dict[str, Any]:
    return {TRUNCATED: len(text), "preview": text[:PREVIEW_CHARS] + "…"}


def is_truncated(value: Any) -> bool:
    return isinstance(value, dict) and TRUNCATED in value


def bindable(state: dict[str, Any]) -> dict[str, Any]:
    """A state without its truncation markers: what Lookup and the grounding contracts may take a value from.
    Markers nested in an entry (an over-long argument of an unfinished task, kernel/unfinished.py) go too."""
    return {k: _without_markers(v) for k, v in state.items() if not is_truncated(v)}


def _without_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_markers(v) for k, v in value.items() if not is_truncated(v)}
    if isinstance(value, list):
        return [_without_markers(v) for v in value if not is_truncated(v)]
    return value


class Scratchpad:
    def __init__(self, initial: dict[str, Any] | None = None):
        self._d: dict[str, Any] = {}
        self.log: list[tuple[str, str]] = []  # (key, source) in write order
        self._source: dict[str, str] = {}  # key -> source of its latest write
        for k, value in (initial or {}).items():
            self.set(k, value, "config")

    def set(self, key: str, value: Any, source: str) -> None:
        self._d.pop(key, _MISSING)  # re-insert so iteration order is recency order
        self._d[key] = value
        self.log.append((key, source))
        self._source[key] = source

    def last_source(self, key: str) -> str | None:
        """The source of the latest write of ``key`` ("config", "fill", "call:<tool>", ...), None if never written."""
        return self._source.get(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self._d.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def keys(self) -> set[str]:
        return set(self._d)

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self._d)

    def copy(self) -> Scratchpad:
        """An independent scratchpad with the same entries and the same latest sources (Lookup reads them)."""
        out = Scratchpad()
        for k, value in self._d.items():
            out.set(k, copy.deepcopy(value), self._source[k])
        return out

    def is_result_entry(self, key: str) -> bool:
        """Whether ``key``'s latest value is a call's result field (written by ``result:<tool>``)."""
        return self._source.get(key, "").startswith(RESULT_SOURCE)

    def view(self, limit: int, result_limit: int = 0, overlay: dict[str, Any] | None = None) -> dict[str, Any]:
        """What primitives see: the ``limit`` most recent entries other than result entries and the
        ``result_limit`` most recent result entries (0: no limit), in recency order. ``overlay`` (a task's
        dependencies' entries, as they wrote them) replaces S's values and counts as the most recent."""
        overlay = overlay or {}
        items = [(k, v) for k, v in self._d.items() if k not in overlay] + list(overlay.items())
        plain = [k for k, _ in items if not self.is_result_entry(k)]
        results = [k for k, _ in items if self.is_result_entry(k)]
        keep = set(plain[-limit:] if limit else plain) | set(results[-result_limit:] if result_limit else results)
        return {k: v for k, v in items if k in keep}
