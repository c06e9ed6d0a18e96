"""Primitives: the unit of work. Symbolic ones are code; SLM ones call a backend.

Every primitive has a name, a kind, typed input and output (pydantic models)
and an output contract. SLM primitives are pure given their input (the
backend decodes greedily), so their results can be cached and replayed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from .contract import Contract
from .errors import DesignError

Kind = Literal["symbolic", "slm"]
Message = dict[str, str]


def canonical_json(obj: Any) -> str:
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def input_hash(primitive: str, inp: Any, feedback: Sequence[str] = (), version: str = "") -> str:
    digest = hashlib.sha256()
    digest.update(f"{primitive}\x00{version}\x00".encode())
    digest.update(canonical_json(inp).encode())
    for item in feedback:
        digest.update(b"\x00" + item.encode())
    return digest.hexdigest()


class RenderError(RuntimeError):
    """A primitive's render function raised while a backend built its prompt."""


class SLMRequest:
    """One model call: the structured input (for oracle-style backends) and its rendering.

    ``messages`` may be given directly or as a ``render`` callable; rendering
    then happens on first access, so backends that answer from the structured
    input (the oracle) never pay for it.
    """

    __slots__ = ("primitive", "input", "_messages", "_render", "feedback", "_json_schema", "adapter")

    def __init__(
        self,
        primitive: str,
        input: BaseModel,
        messages: list[Message] | None = None,
        feedback: tuple[str, ...] = (),
        json_schema: dict[str, Any] | Callable[[], dict[str, Any] | None] | None = None,
        adapter: str | None = None,
        *,
        render: Callable[[], list[Message]] | None = None,
    ):
        self.primitive = primitive
        self.input = input
        self._messages = messages
        self._render = render
        self.feedback = tuple(feedback)
        self._json_schema = json_schema  # a dict, or a thunk computed on first access
        self.adapter = adapter

    @property
    def json_schema(self) -> dict[str, Any] | None:
        if callable(self._json_schema):
            self._json_schema = self._json_schema()
        return self._json_schema

    @property
    def messages(self) -> list[Message]:
        if self._messages is None:
            try:
                self._messages = self._render() if self._render is not None else []
            except Exception as exc:
                # Raised inside a backend, but the program's fault: the engine must not
                # take it for a backend failure (it is a runtime violation of the step).
                raise RenderError(f"{self.primitive}: render raised {exc!r}") from exc
        return self._messages

    def __repr__(self) -> str:
        return f"SLMRequest({self.primitive!r}, adapter={self.adapter!r}, feedback={len(self.feedback)})"


@dataclass(frozen=True)
class SLMReply:
    text: str
    model: dict[str, Any] = field(default_factory=dict)  # backend, model id, adapter


class Backend(Protocol):
    """Answers batches of SLM requests. Must return one reply per request, in order."""

    name: str

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]: ...


def default_parse(text: str) -> Any:
    """Parse a model reply as strict JSON (no NaN or infinity, no key twice: forethought/bounded.py), tolerating a fenced
    code block around it."""
    from forethought.bounded import loads_json

    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`")
        if body.startswith("json"):
            body = body[4:]
    return loads_json(body, "reply")


class Primitive:
    """A typed, contract-bearing operation.

    Use :func:`symbolic` or :func:`slm` to build one.
    """

    def __init__(
        self,
        name: str,
        *,
        kind: Kind,
        input_type: type[BaseModel],
        output_type: type[BaseModel],
        contract: Contract | None,
        fn: Callable[..., Any] | None = None,
        uses_context: bool = False,
        pure: bool = True,
        render: Callable[[BaseModel, Sequence[str]], list[Message]] | None = None,
        parse: Callable[[str], Any] = default_parse,
        json_schema: dict[str, Any] | Callable[[BaseModel], dict[str, Any]] | None = None,
        adapter: str | None = None,
        version: str = "1",
    ):
        where = f"primitive {name!r}"
        if not name or not isinstance(name, str):
            raise DesignError(f"{where}: a primitive needs a non-empty name")
        if kind not in ("symbolic", "slm"):
            raise DesignError(f"{where}: kind must be 'symbolic' or 'slm', got {kind!r}")
        for label, model_type in (("input_type", input_type), ("output_type", output_type)):
            if not (isinstance(model_type, type) and issubclass(model_type, BaseModel)):
                raise DesignError(f"{where}: {label} must be a pydantic model class, got {model_type!r}")
        if contract is None:
            raise DesignError(
                f"{where} has no contract: every primitive needs an output contract "
                "(use Contract() for an explicit type-only contract)"
            )
        if not isinstance(contract, Contract):
            raise DesignError(f"{where}: contract must be a Contract, got {type(contract).__name__}")
        if kind == "symbolic" and fn is None:
            raise DesignError(f"{where}: a symbolic primitive needs a function")
        if kind == "slm" and render is None:
            raise DesignError(f"{where}: an SLM primitive needs a render function (input -> messages)")
        self.name = name
        self.kind: Kind = kind
        self.input_type = input_type
        self.output_type = output_type
        self.contract = contract
        self.fn = fn
        self.uses_context = uses_context
        # Effectful symbolic steps (tool execution) are never cached or replayed.
        self.pure = pure
        self.render = render
        self.parse = parse
        self.json_schema = (
            json_schema if json_schema is not None else (output_type.model_json_schema() if kind == "slm" else None)
        )
        self.adapter = adapter or name
        self.version = version

    def __repr__(self) -> str:
        return f"Primitive({self.name!r}, {self.kind}, {self.input_type.__name__} -> {self.output_type.__name__})"

    def request(self, inp: BaseModel, feedback: Sequence[str] = ()) -> SLMRequest:
        assert self.render is not None
        fb = tuple(feedback)
        render = self.render
        return SLMRequest(
            primitive=self.name,
            input=inp,
            feedback=fb,
            # A callable schema is specialised to the input (e.g. tool names as an enum) for constrained
            # decoding; it is computed only if a backend asks for it.
            json_schema=(lambda s=self.json_schema: s(inp)) if callable(self.json_schema) else self.json_schema,
            adapter=self.adapter,
            render=lambda: render(inp, fb),
        )


def symbolic(
    name: str,
    fn: Callable[..., Any],
    input_type: type[BaseModel],
    output_type: type[BaseModel],
    contract: Contract | None,
    *,
    uses_context: bool = False,
    pure: bool = True,
    version: str = "1",
) -> Primitive:
    return Primitive(
        name,
        kind="symbolic",
        input_type=input_type,
        output_type=output_type,
        contract=contract,
        fn=fn,
        uses_context=uses_context,
        pure=pure,
        version=version,
    )


def slm(
    name: str,
    input_type: type[BaseModel],
    output_type: type[BaseModel],
    contract: Contract | None,
    *,
    render: Callable[[BaseModel, Sequence[str]], list[Message]],
    parse: Callable[[str], Any] = default_parse,
    json_schema: dict[str, Any] | Callable[[BaseModel], dict[str, Any]] | None = None,
    adapter: str | None = None,
    version: str = "1",
) -> Primitive:
    return Primitive(
        name,
        kind="slm",
        input_type=input_type,
        output_type=output_type,
        contract=contract,
        render=render,
        parse=parse,
        json_schema=json_schema,
        adapter=adapter,
        version=version,
    )
