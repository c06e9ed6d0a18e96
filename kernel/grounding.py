"""Value grounding: does a proposed value appear in the text or state it must come from?

Used by value-level contracts (a parameter value must be grounded in the user
request, the turn context or the scratchpad, never invented) and by the
canonical exact-match forms.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

_NUM = re.compile(r"-?\d+(?:\.\d+)?")


def normalize(value: Any) -> Any:
    """Canonical form for comparisons: integral floats become ints, dict keys sorted."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalize(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    return value


def canonical(value: Any) -> str:
    return json.dumps(normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Haystack:
    """Everything a value may be grounded in; text and numbers are extracted on first use."""

    def __init__(self, texts: Iterable[str] = (), values: Iterable[Any] = ()):
        self._texts = list(texts)
        self._values = list(values)
        self._text: str | None = None
        self._numbers: set[float] | None = None
        self._leaves: list[Any] | None = None

    def _all_leaves(self) -> list[Any]:
        if self._leaves is None:
            leaves: list[Any] = []
            for v in self._values:
                _leaves(v, leaves)
            self._leaves = leaves
        return self._leaves

    @property
    def text(self) -> str:
        if self._text is None:
            parts = [t for t in self._texts if t] + [x for x in self._all_leaves() if isinstance(x, str) and x]
            self._text = "\n".join(parts).lower()
        return self._text

    @property
    def numbers(self) -> set[float]:
        if self._numbers is None:
            nums: set[float] = set()
            for t in [t for t in self._texts if t] + [x for x in self._all_leaves() if isinstance(x, str)]:
                if any(c.isdigit() for c in t):
                    nums.update(float(m) for m in _NUM.findall(t.replace(",", "")))
            for x in self._all_leaves():
                if isinstance(x, (int, float)) and not isinstance(x, bool):
                    nums.add(float(x))
            self._numbers = nums
        return self._numbers

    def contains(self, value: Any, enum: Iterable[Any] | None = None) -> bool:
        if value is None or isinstance(value, bool):
            return True
        if enum is not None and value in list(enum):
            return True
        if isinstance(value, (int, float)):
            return float(value) in self.numbers
        if isinstance(value, str):
            v = value.strip().lower()
            return not v or v in self.text
        if isinstance(value, dict):
            return all(self.contains(v) for v in value.values())
        if isinstance(value, (list, tuple)):
            return all(self.contains(v) for v in value)
        return False


def _leaves(v: Any, out: list[Any]) -> None:
    if isinstance(v, dict):
        for x in v.values():
            _leaves(x, out)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _leaves(x, out)
    else:
        out.append(v)
