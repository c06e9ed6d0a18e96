"""Helpers shared by the domain tests: the domain folders, a domain's worked solutions and their replay,
and a harness to call a tool, expect a failure that leaves the state unchanged."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from forethought.kernel import toolgate
from forethought.kernel.domains import Domain
from forethought.kernel.solution_file import solution_files

ROOT = Path(__file__).resolve().parents[1]
DOMAIN_FOLDERS = ROOT / "kernel" / "domains"
SOLUTIONS = ROOT / "data_gen" / "solutions"


def domain_folders() -> list[str]:
    """Every domain folder under kernel/domains/, read from the listing itself rather than from the plugin
    discovery, so a folder the discovery misses (no __init__.py, say) still gets its own failing tests."""
    return sorted(p.name for p in DOMAIN_FOLDERS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def solution_paths(domain: str, at_least: int) -> list[Path]:
    """The worked solutions in data_gen/solutions/<domain>/; fewer than ``at_least`` is an error at collection
    (an empty parametrisation would otherwise skip silently)."""
    folder = SOLUTIONS / domain
    paths = solution_files([folder]) if folder.is_dir() else []
    if len(paths) < at_least:
        raise AssertionError(
            f"{folder}: {len(paths)} worked solutions for domain {domain!r}, expected at least {at_least}"
        )
    return paths


def assert_solution_verifies(path: Path) -> None:
    """Replay one worked solution through the kernel with the oracle backend (forethought verify's check)."""
    from forethought.data_gen.verify import verify_paths

    [result] = verify_paths([path])
    assert result.ok, f"{path}: {result.error}"


class Harness:
    def __init__(self, domain: Domain, scenario: dict[str, Any] | None = None):
        self.dom = domain
        self.scenario = scenario or {}

    def state(self) -> Any:
        """A fresh state from the scenario; a deep copy, so no test sees what another one loaded or changed."""
        return self.dom.load_state(copy.deepcopy(self.scenario))

    def call(self, world: Any, tool: str, **args: Any) -> dict[str, Any]:
        return self.dom.tools[tool](world, args)

    def fails(self, world: Any, tool: str, match: str, **args: Any) -> dict[str, Any]:
        before = self.dom.snapshot(world)
        out = self.call(world, tool, **args)
        assert "error" in out, out
        assert match in out["error"]
        assert self.dom.snapshot(world) == before, f"{tool} changed the state although it failed"
        return out

    def writes(self, tool: str, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        return toolgate.declared_writes(self.dom.tools[tool].spec, args, result)
