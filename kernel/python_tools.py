"""Your own Python functions as the kernel's tools: ``@tool`` on plain typed functions, or on the methods of a class
whose instance holds the tools' state.

The schema of each tool comes from its signature and docstring (Google style ``Args:``), as a domain tool's does
(kernel/domains/base.py); what the JSON formats cannot carry is declared on the decorator: ``side_effect``,
``prerequisites`` (ToolGate's preconditions over the scratchpad), ``writes`` (what the call puts in the scratchpad)
and ``post`` (postconditions over the arguments, the result and the state).

Two kinds of world, as the kernel's environment interface allows (docs/kernel.md, "Your own tools"):

- **methods of an object** (``PythonTools(CalendarTools())``): the world can be copied, so a call runs on a deep copy
  of the object and the copy replaces it only when the kernel commits (after the postconditions hold). A rejected
  call changes nothing.
- **plain functions** (``PythonTools([get_weather, send_email])``): they act on a world outside the process, which
  cannot be copied. They are *live*: a call runs for real; a failed postcondition is recorded, its result is not
  written to the scratchpad and the task halts (the kernel does not try another tool after a live call).
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from .domains.base import PostCheck, ToolError, doc_parts, schema_from_signature
from .registry import Registry
from .registry.model import Prerequisite, Sat, ToolSpec

_MARK = "__forethought_tool__"


def _options(*, side_effect: bool = False, prerequisites: Iterable[Prerequisite | str] = (), writes: dict[str, str] | None = None,
             post: Iterable[PostCheck] = (), name: str | None = None, secret: Iterable[str] = (),
             output_schema: dict[str, Any] | None = None, alternatives: Iterable[str] = ()) -> dict[str, Any]:  # fmt: skip
    return {"side_effect": side_effect, "prerequisites": list(prerequisites), "writes": dict(writes or {}),
            "post": list(post), "name": name, "secret": list(secret), "output_schema": output_schema,
            "alternatives": list(alternatives)}  # fmt: skip


def tool(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Mark a function or method as a tool (``@tool`` or ``@tool(side_effect=True, ...)``); the function is unchanged.

    Options: ``side_effect`` (False: a read-only tool); ``prerequisites``: keys (``"session"``: present and not null)
    or :class:`Prerequisite` objects; ``writes``: scratchpad key -> ``"result"``, ``"result.<path>"``,
    ``"params.<name>"`` or ``"const:<json>"``; ``post``: checks ``(arguments, result, state) -> message | None``
    (state: the staged copy of the tools object for a method, None for a plain function); ``name``, ``secret``
    (parameters never written to the scratchpad), ``output_schema``, ``alternatives`` (tools to try when a call to
    this one is rejected: never after a live call that ran)."""
    marked = _options(**options)  # an unknown option is a TypeError here, where it was written

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        setattr(function, _MARK, marked)
        return function

    return mark(fn) if fn is not None else mark


@dataclass
class PythonTool:
    """One registered Python tool: its spec, the callable and its postconditions (what ``Environment.tool`` returns)."""

    spec: ToolSpec
    fn: Callable[..., Any]
    post: list[PostCheck] = field(default_factory=list)
    method: bool = False  # a method of the tools object: called on the staged copy


def _spec(fn: Callable[..., Any], options: dict[str, Any], *, skip_first: bool) -> ToolSpec:
    tname = options["name"] or fn.__name__
    desc, pdesc = doc_parts(fn)
    prereqs = [p if isinstance(p, Prerequisite) else Prerequisite(key=p, sat=Sat()) for p in options["prerequisites"]]
    try:
        return ToolSpec(
            name=tname,
            description=desc,
            parameters=schema_from_signature(fn, pdesc, skip_first=skip_first),
            output_schema=options["output_schema"],
            side_effect=options["side_effect"],
            prerequisites=prereqs,
            writes=options["writes"],
            secret=options["secret"],
            alternatives=options["alternatives"],
            source="python",
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(
            f"tool {tname!r} ({fn.__module__}.{fn.__qualname__}): {where + ': ' if where else ''}{first['msg']}"
        ) from None


def _result(out: Any) -> Any:
    if out is None:
        return {}
    if isinstance(out, BaseModel):
        return out.model_dump(mode="json")
    return out if isinstance(out, dict) else {"result": out}


def _stateless(check: PostCheck) -> PostCheck:
    def run(args: dict[str, Any], result: Any, state: Any) -> str | None:
        return check(args, result, None)  # a live function's world is not in the process: no state to show it

    run.__name__ = getattr(check, "__name__", "check")
    return run


class LiveCall:
    """The staged token of a call that already happened (a live tool): committing it changes nothing here."""

    def __init__(self, name: str):
        self.name = name


class PythonTools:
    """The kernel's environment over Python tools: plain functions (live) or an object's ``@tool`` methods (staged).

    ``PythonTools([f, g])`` takes functions (each may carry ``@tool`` options; an unmarked one is read-only);
    ``PythonTools(obj)`` takes every ``@tool`` method of ``obj``, whose attributes are the state the tools change.
    """

    def __init__(self, tools: Iterable[Callable[..., Any]] | object, *, name: str = "python"):
        self.name = name
        self._tools: dict[str, PythonTool] = {}
        self.owner: object | None = None
        if isinstance(tools, (list, tuple)):
            for fn in tools:
                if not callable(fn):
                    raise TypeError(f"PythonTools: {fn!r} is not a function")
                options = getattr(fn, _MARK, None) or _options()
                self._add(
                    PythonTool(_spec(fn, options, skip_first=False), fn, [_stateless(c) for c in options["post"]])
                )
        else:
            self.owner = tools
            for _, member in inspect.getmembers(type(tools), predicate=inspect.isfunction):
                options = getattr(member, _MARK, None)
                if options is not None:
                    self._add(
                        PythonTool(_spec(member, options, skip_first=True), member, list(options["post"]), method=True)
                    )
            if not self._tools:
                raise ValueError(f"PythonTools: {type(tools).__name__} has no @tool methods")

    def _add(self, tool: PythonTool) -> None:
        if tool.spec.name in self._tools:
            raise ValueError(f"PythonTools: two tools named {tool.spec.name!r}")
        self._tools[tool.spec.name] = tool

    # ------------------------------------------------------------ the environment interface
    @property
    def live(self) -> bool:
        """Plain functions act on a world that cannot be copied: a call is real when it runs (see the module doc)."""
        return self.owner is None

    def registry(self) -> Registry:
        return Registry((t.spec for t in self._tools.values()), name=self.name)

    def tool(self, name: str) -> PythonTool | None:
        return self._tools.get(name)

    def stage(self, name: str, args: dict[str, Any]) -> tuple[Any, Any]:
        """Run the tool: on a copy of the tools object (returned as the staged world), or for real (a live function:
        a :class:`LiveCall`). A raised exception fails the call as ``{"error": ...}``, with nothing staged."""
        tool = self._tools.get(name)
        if tool is None:
            return {"error": f"no implementation for tool {name!r}"}, None
        staged: Any = copy.deepcopy(self.owner) if tool.method else LiveCall(name)
        try:
            out = tool.fn(staged, **args) if tool.method else tool.fn(**args)
        except ToolError as exc:
            return {"error": str(exc)}, None
        except Exception as exc:  # the tool's own failure is the call's, never the kernel's crash
            return {"error": f"tool raised {type(exc).__name__}: {exc}"}, None
        # what a call returns goes into S, traces and files as JSON: dates and sets as JSON values; NaN fails the call
        result = to_jsonable_python(_result(out), fallback=str)
        try:
            json.dumps(result, allow_nan=False)
        except ValueError as exc:
            return {"error": f"the tool returned a value JSON cannot hold ({exc})"}, None
        return result, staged

    def commit(self, name: str, staged: Any) -> None:
        if not isinstance(staged, LiveCall):
            self.owner = staged

    def snapshot(self) -> dict[str, Any]:
        """The tools object's public attributes as JSON values (nothing for live functions: their world is outside)."""
        if self.owner is None:
            return {}
        return {k: to_jsonable_python(v, fallback=str) for k, v in vars(self.owner).items() if not k.startswith("_")}
