"""Per-step execution trace: one record per primitive invocation, JSONL on disk."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .io import atomic_write_jsonl, read_jsonl

# What the engine did with a step's result; the tests hold every recorded action to this type.
Action = Literal["accept", "retry", "halt", "fallback", "skip", "backend_error"]


@dataclass
class TraceRecord:
    seq: int
    path: str  # position in the program, e.g. "kernel/get_order/order_batch[1]"
    primitive: str
    kind: str  # symbolic | slm
    attempt: int
    action: Action
    input: Any
    output: Any
    contract: dict[str, Any]  # {"ok": bool, "violations": [...]}
    elapsed_ms: float
    model: dict[str, Any] | None = None  # SLM steps: backend, model id, adapter
    source: str = "call"  # call | cache | replay
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceRecord:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    @property
    def ok(self) -> bool:
        return bool(self.contract.get("ok"))


# A trace file stops growing here: a runaway run (or a huge tool result in every step) cannot fill the disk.
DEFAULT_MAX_TRACE_BYTES = 64 * 1024 * 1024


def capped_rows(rows: list[dict[str, Any]], max_bytes: int) -> list[dict[str, Any]]:
    """``rows`` while their JSON Lines size stays within ``max_bytes``; past that, one final marker row says how
    many records were left out (so a truncated trace never passes for a complete one)."""
    out: list[dict[str, Any]] = []
    size = 0
    for i, row in enumerate(rows):
        n = len(json.dumps(row, ensure_ascii=False, default=str).encode()) + 1
        if size + n > max_bytes:
            out.append({"truncated": True, "dropped_records": len(rows) - i, "max_bytes": max_bytes})
            break
        out.append(row)
        size += n
    return out


@dataclass
class Trace:
    run_id: str = ""
    records: list[TraceRecord] = field(default_factory=list)
    dropped_records: int = 0  # > 0: loaded from a file that was cut at its size cap

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def by_primitive(self, name: str) -> list[TraceRecord]:
        return [r for r in self.records if r.primitive == name]

    def violations(self) -> list[dict[str, Any]]:
        return [v for r in self.records for v in r.contract.get("violations", [])]

    def to_rows(self) -> list[dict[str, Any]]:
        return [{"run_id": self.run_id, **r.to_dict()} for r in self.records]

    def write_jsonl(self, path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> None:
        atomic_write_jsonl(path, capped_rows(self.to_rows(), max_bytes))

    @classmethod
    def load(cls, path: str | os.PathLike) -> Trace:
        rows = read_jsonl(path)
        marker = rows[-1] if rows and rows[-1].get("truncated") is True else None
        rows = rows[:-1] if marker else rows
        run_id = rows[0].get("run_id", "") if rows else ""
        return cls(
            run_id,
            [TraceRecord.from_dict(r) for r in rows],
            dropped_records=int(marker["dropped_records"]) if marker else 0,
        )
