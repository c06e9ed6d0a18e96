"""The simulated world a scenario runs against: one state per domain.

Tool calls run on a copy of the state; the copy replaces the live state only
when the call is committed (after its postcondition holds), so a rejected
result leaves the world unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from .domains import Domain, DomainTool, load_domain
from .registry import Registry


class Environment:
    def __init__(self, domains: Iterable[Domain | str], initial: dict[str, Any] | None = None):
        self.domains: dict[str, Domain] = {}
        for domain in domains:
            dom = load_domain(domain) if isinstance(domain, str) else domain
            self.domains[dom.name] = dom
        initial = initial or {}
        unknown = [k for k in initial if k not in self.domains]
        if unknown:
            raise ValueError(f"initial state names domains not in this scenario: {unknown}")
        self.states: dict[str, BaseModel] = {n: d.load_state(initial.get(n)) for n, d in self.domains.items()}
        self._tools: dict[str, DomainTool] = {}
        for dom in self.domains.values():
            for tname, tool in dom.tools.items():
                if tname in self._tools:
                    raise ValueError(
                        f"tool {tname!r} is defined by both {self._tools[tname].domain!r} and {dom.name!r}"
                    )
                self._tools[tname] = tool

    def tool(self, name: str) -> DomainTool | None:
        return self._tools.get(name)

    def registry(self, include: Iterable[str] | None = None, exclude: Iterable[str] = ()) -> Registry:
        names = list(include) if include is not None else list(self._tools)
        missing = [n for n in names if n not in self._tools]
        if missing:
            raise KeyError(f"no tools named {missing} in domains {list(self.domains)}")
        ex = set(exclude)
        return Registry((self._tools[n].spec for n in names if n not in ex), name="+".join(self.domains))

    def stage(self, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], BaseModel | None]:
        """Run a tool on a copy of its domain's state; returns (result, staged state)."""
        tool = self._tools.get(name)
        if tool is None:
            return {"error": f"no implementation for tool {name!r}"}, None
        staged = self.domains[tool.domain].copy_state(self.states[tool.domain])
        try:
            result = tool(staged, dict(args))
        except Exception as exc:  # a domain bug must not crash the kernel; it fails the call
            return {"error": f"tool raised {type(exc).__name__}: {exc}"}, None
        return result, staged

    def apply(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run a tool directly on the live state, without staging a copy.

        Only for replaying reference calls, where any failure stops everything and the
        state is discarded (the kernel always stages, so a rejected call changes nothing).
        """
        tool = self._tools.get(name)
        if tool is None:
            return {"error": f"no implementation for tool {name!r}"}
        try:
            return tool(self.states[tool.domain], dict(args))
        except Exception as exc:
            return {"error": f"tool raised {type(exc).__name__}: {exc}"}

    def commit(self, name: str, staged: BaseModel) -> None:
        self.states[self._tools[name].domain] = staged

    def snapshot(self) -> dict[str, Any]:
        return {n: self.domains[n].snapshot(s) for n, s in self.states.items()}
