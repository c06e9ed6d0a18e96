"""Helpers shared by the domain tests: call a tool, expect a failure that leaves the state unchanged."""

from __future__ import annotations

from typing import Any

from forethought.kernel import toolgate
from forethought.kernel.domains import Domain


class Harness:
    def __init__(self, domain: Domain):
        self.dom = domain

    def call(self, s: Any, tool: str, **args: Any) -> dict[str, Any]:
        return self.dom.tools[tool](s, args)

    def fails(self, s: Any, tool: str, match: str, **args: Any) -> dict[str, Any]:
        before = self.dom.snapshot(s)
        out = self.call(s, tool, **args)
        assert "error" in out, out
        assert match in out["error"]
        assert self.dom.snapshot(s) == before, f"{tool} changed the state although it failed"
        return out

    def writes(self, tool: str, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        return toolgate.writes(self.dom.tools[tool].spec, args, result)
