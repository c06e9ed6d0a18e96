"""The scratchpad S: a key-value store that only grows (INV-S).

Values may be overwritten, keys are never removed; there is deliberately no
delete operation. Every write is logged with its source.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

_MISSING = object()


class Scratchpad:
    def __init__(self, initial: dict[str, Any] | None = None):
        self._d: dict[str, Any] = {}
        self.log: list[tuple[str, str]] = []  # (key, source) in write order
        for k, v in (initial or {}).items():
            self.set(k, v, "config")

    def set(self, key: str, value: Any, source: str) -> None:
        self._d.pop(key, _MISSING)  # re-insert so iteration order is recency order
        self._d[key] = value
        self.log.append((key, source))

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

    def view(self, limit: int) -> dict[str, Any]:
        """The most recently written ``limit`` entries (what primitives see)."""
        items = list(self._d.items())[-limit:] if limit else list(self._d.items())
        return {k: v for k, v in items}
