"""What the DSL tests (tests/test_dsl_*.py) build their programs from: small models, the request an SLM step
renders, and a backend that answers from a script."""

from __future__ import annotations

import json
import threading

from pydantic import BaseModel

from forethought.primitives import SLMReply


class Num(BaseModel):
    value: int


class Text(BaseModel):
    text: str


class Item(BaseModel):
    name: str


class Label(BaseModel):
    label: str


def render(inp, feedback):
    """The step's input as JSON; on a retry, the violations of the previous answer after it."""
    msgs = [{"role": "user", "content": json.dumps(inp.model_dump(), sort_keys=True)}]
    if feedback:
        msgs.append({"role": "user", "content": "Your previous answer was rejected: " + " | ".join(feedback)})
    return msgs


class ScriptedBackend:
    """Answers each request with ``answer(request)``; logs every batch it receives."""

    name = "scripted"

    def __init__(self, answer):
        self.answer = answer
        self.batches: list[list] = []
        self.lock = threading.Lock()

    def complete(self, requests):
        with self.lock:
            self.batches.append(list(requests))
        return [SLMReply(self.answer(r), {"backend": self.name, "model": "script-v1"}) for r in requests]

    @property
    def requests(self) -> list:
        return [r for batch in self.batches for r in batch]

    @property
    def n_requests(self) -> int:
        return sum(len(b) for b in self.batches)
