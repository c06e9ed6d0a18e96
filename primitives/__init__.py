"""forethought's typed DSL: primitives with output contracts, bounded composition, a checking engine.

A minimal program::

    from pydantic import BaseModel
    from forethought.primitives import Contract, Engine, Sequence, Step, check, symbolic

    class Text(BaseModel):
        text: str

    class Words(BaseModel):
        words: list[str]

    split = symbolic("split", lambda t: Words(words=t.text.split()), Text, Words,
                     Contract(value=[check("non_empty")(lambda i, o: bool(o.words) or "no words")]))
    run = Engine().run(Sequence(split), {"text": "hello world"})
"""

from .contract import Check, Contract, ContractResult, Violation, check
from .engine import Engine, Run
from .errors import BackendError, DesignError, HaltError, ReplayMissError
from .primitive import Backend, Primitive, SLMReply, SLMRequest, canonical_json, input_hash, slm, symbolic
from .program import (
    Conditional,
    Fallback,
    ForEach,
    Iterate,
    Node,
    Parallel,
    Program,
    Sequence,
    Step,
    type_mismatches,
)
from .store import Cache, Recorder
from .trace import Trace, TraceRecord

__all__ = [
    "Backend",
    "BackendError",
    "Cache",
    "Check",
    "Conditional",
    "Contract",
    "ContractResult",
    "DesignError",
    "Engine",
    "Fallback",
    "ForEach",
    "HaltError",
    "Iterate",
    "Node",
    "Parallel",
    "Primitive",
    "Program",
    "Recorder",
    "ReplayMissError",
    "Run",
    "SLMReply",
    "SLMRequest",
    "Sequence",
    "Step",
    "Trace",
    "TraceRecord",
    "Violation",
    "canonical_json",
    "check",
    "input_hash",
    "slm",
    "symbolic",
    "type_mismatches",
]
