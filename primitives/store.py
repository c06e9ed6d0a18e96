"""Record/replay of SLM outputs and a cache of pure primitive results."""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Literal

from .errors import ReplayMissError
from .io import atomic_write_jsonl

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

    def __init__(
        self,
        mode: ReplayMode = "record",
        entries: dict[str, dict[str, Any]] | None = None,
        rendering: dict[str, Any] | None = None,
    ):
        if mode not in ("off", "record", "replay", "strict"):
            raise ValueError(f"unknown replay mode {mode!r}")
        self.mode = mode
        self.entries: dict[str, dict[str, Any]] = dict(entries or {})
        # How the recorded prompts were rendered (the kernel's: kernel/run_command.py), in the header: the keys are
        # hashes of the prompts, so a replay must render them the same way. None: not recorded (an older recording).
        self.rendering = rendering
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
        """JSON Lines: a header naming the format version, then one entry per line, in key order."""
        header: dict[str, Any] = {HEADER: RECORDING_VERSION}
        if self.rendering is not None:
            header["rendering"] = self.rendering
        atomic_write_jsonl(path, [header, *sorted(self.entries.values(), key=lambda e: e["key"])])

    @classmethod
    def load(cls, path: str | os.PathLike, mode: ReplayMode = "strict") -> Recorder:
        rendering, entries = read_recording_file(path)
        return cls(mode, entries, rendering)


# A recording's first line: {"forethought_recording": <version>}. 1: the entries below, one per line. A file without
# it was written before recordings carried a version; its entries are the same, so it is read as version 1. The
# header may also say how the prompts were rendered ("rendering": an object the kernel writes and reads); one without
# it was rendered with the defaults.
HEADER = "forethought_recording"
RECORDING_VERSION = 1
ENTRY_FIELDS = {"primitive": str, "key": str, "text": str, "model": dict}


MAX_RECORDING_BYTES = 512 * 1024 * 1024


def read_recording(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """A recording's entries by key; every problem is a located error naming the line and field, so a replay never
    starts from an entry it cannot use (a missing ``text`` used to load, and the run then blamed a missing entry)."""
    return read_recording_file(path)[1]


def read_recording_file(path: str | os.PathLike) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """(the header's ``rendering``, or None; the entries by key), as :func:`read_recording` checks them."""
    from forethought.bounded import JSONProblem, json_path, loads_json, read_bounded
    from forethought.errors import UserError

    where = str(path)
    try:
        # a recording of a long benchmark run is large, but not endless: /dev/zero or a FIFO is refused at the bound
        text = read_bounded(Path(path), where, MAX_RECORDING_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start}); a recording is UTF-8 JSON Lines", where) from None
    entries: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    rendering: dict[str, Any] | None = None
    first = True
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = loads_json(line, where)
        except json.JSONDecodeError as exc:
            raise UserError(f"line {n}: not valid JSON ({exc.msg}, column {exc.colno})", where) from None
        except JSONProblem as exc:
            raise UserError(
                f"line {n}: {exc.detail}" + (f" at {json_path(exc.path)}" if exc.path else ""), where
            ) from None
        if first and isinstance(row, dict) and HEADER in row:
            version = row[HEADER]
            if not isinstance(version, int) or isinstance(version, bool) or version < 1:
                raise UserError(
                    f"line {n}: {HEADER} must be a format version (a positive integer), got {version!r}", where
                )
            if version > RECORDING_VERSION:
                raise UserError(
                    f"line {n}: recording format {version} is newer than this forethought reads "
                    f"(up to {RECORDING_VERSION}); upgrade forethought, or record the run again",
                    where,
                )
            rendering = row.get("rendering")
            if rendering is not None and not isinstance(rendering, dict):
                raise UserError(f"line {n}: rendering must be a JSON object, got {type(rendering).__name__}", where)
            first = False
            continue
        first = False
        if not isinstance(row, dict):
            raise UserError(
                f"line {n}: expected a recorded reply (a JSON object with {', '.join(ENTRY_FIELDS)}), "
                f"got a JSON {type(row).__name__}",
                where,
            )
        for field, kind in ENTRY_FIELDS.items():
            if field not in row:
                raise UserError(
                    f"line {n}: field {field!r} is missing (a recorded reply has {', '.join(ENTRY_FIELDS)})", where
                )
            if not isinstance(row[field], kind):
                raise UserError(
                    f"line {n}: field {field!r} must be a {'string' if kind is str else 'JSON object'}, "
                    f"got {type(row[field]).__name__}",
                    where,
                )
        if row["key"] in lines:
            raise UserError(
                f"line {n}: key {row['key'][:16]}... is recorded already at line {lines[row['key']]}", where
            )
        lines[row["key"]] = n
        entries[row["key"]] = row
    return rendering, entries


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
