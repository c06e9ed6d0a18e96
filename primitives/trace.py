"""Per-step execution trace: one record per primitive invocation, JSONL on disk."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from .io import atomic_write_jsonl, read_jsonl

# What the engine did with a step's result.
ACTIONS = ("accept", "retry", "halt", "fallback", "skip", "backend_error")


@dataclass
class TraceRecord:
    seq: int
    path: str  # position in the program, e.g. "kernel/get_order/order_batch[1]"
    primitive: str
    kind: str  # symbolic | slm
    attempt: int
    action: str  # one of ACTIONS
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
    def from_dict(cls, d: dict[str, Any]) -> TraceRecord:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    @property
    def ok(self) -> bool:
        return bool(self.contract.get("ok"))


@dataclass
class Trace:
    run_id: str = ""
    records: list[TraceRecord] = field(default_factory=list)

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

    def write_jsonl(self, path: str | os.PathLike) -> None:
        atomic_write_jsonl(path, self.to_rows())

    @classmethod
    def load(cls, path: str | os.PathLike) -> Trace:
        rows = read_jsonl(path)
        run_id = rows[0].get("run_id", "") if rows else ""
        return cls(run_id, [TraceRecord.from_dict(r) for r in rows])
