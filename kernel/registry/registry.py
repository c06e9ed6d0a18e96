"""A registry: the named tools a kernel run may match and execute."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .model import ToolSpec


class Registry:
    def __init__(self, tools: Iterable[ToolSpec] = (), *, name: str = "registry"):
        self.name = name
        self._tools: dict[str, ToolSpec] = {}
        self._derived: dict[str, Any] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: ToolSpec) -> None:
        if tool.name in self._tools:
            raise ValueError(f"registry {self.name!r}: duplicate tool name {tool.name!r}")
        self._tools[tool.name] = tool
        self._derived.clear()

    def derived(self, key: str, make: Callable[[Registry], Any]) -> Any:
        """A value computed from the tools once (e.g. what primitives see), dropped when a tool is added."""
        if key not in self._derived:
            self._derived[key] = make(self)
        return self._derived[key]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> ToolSpec:
        return self._tools[name]

    def get(self, name: str | None) -> ToolSpec | None:
        return self._tools.get(name) if name is not None else None

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def signatures(self) -> dict[str, list[str]]:
        """Tool name -> parameter names in declared order, for binding positional call arguments."""
        return self.derived("signatures", lambda reg: {t.name: t.param_names for t in reg})

    def tool_for_provider_name(self, name: str) -> str | None:
        """The tool a provider's reply names (its provider_name, model.py), or None when no tool is offered under it."""
        from .model import provider_name

        return self.derived("provider_names", lambda reg: {provider_name(t.name): t.name for t in reg}).get(name)

    def merged(self, other: Registry, *, name: str | None = None) -> Registry:
        return Registry(list(self) + [t for t in other if t.name not in self], name=name or self.name)
