"""Record/replay of SLM outputs and a cache of pure primitive results."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, Literal

from .errors import ReplayMissError
from .io import atomic_write_jsonl, read_jsonl

ReplayMode = Literal["off", "record", "replay", "strict"]


class Recorder:
    """Records SLM replies keyed by (primitive, input hash) and replays them.

    ``record``: call the backend and store every reply. ``replay``: answer
    from the recording, falling back to the backend on a miss. ``strict``:
    a miss raises :class:`ReplayMissError`.

    SLM primitives are pure given their input, so a recording holds one
    answer per request: while recording, a request already recorded (a retry
    with the same feedback, a duplicate item) is answered from the recording
    and the first answer is the one kept. A nondeterministic backend is thus
    recorded as the deterministic run that a replay reproduces exactly.
    """

    def __init__(self, mode: ReplayMode = "record", entries: dict[str, dict[str, Any]] | None = None):
        if mode not in ("off", "record", "replay", "strict"):
            raise ValueError(f"unknown replay mode {mode!r}")
        self.mode = mode
        self.entries: dict[str, dict[str, Any]] = dict(entries or {})
        self._lock = threading.Lock()

    def lookup(self, primitive: str, key: str) -> dict[str, Any] | None:
        if self.mode == "off":
            return None
        hit = self.entries.get(key)
        if hit is None and self.mode == "strict":
            raise ReplayMissError(primitive, key)
        return hit

    def store(self, primitive: str, key: str, text: str, model: dict[str, Any]) -> dict[str, Any] | None:
        """Record a reply (``record`` mode only); returns the entry kept for ``key`` (the first one stored)."""
        if self.mode != "record":
            return None
        with self._lock:
            return self.entries.setdefault(key, {"primitive": primitive, "key": key, "text": text, "model": model})

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_jsonl(path, sorted(self.entries.values(), key=lambda e: e["key"]))

    @classmethod
    def load(cls, path: str | os.PathLike, mode: ReplayMode = "strict") -> Recorder:
        return cls(mode, {e["key"]: e for e in read_jsonl(path)})


class Cache:
    """In-memory LRU cache of pure primitive outputs, keyed by input hash."""

    def __init__(self, max_entries: int = 100_000):
        self.max_entries = max_entries
        self._d: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any | None:
        with self._lock:
            if key in self._d:
                self._d.move_to_end(key)
                self.hits += 1
                return self._d[key]
            self.misses += 1
            return None

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.max_entries:
                self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)
