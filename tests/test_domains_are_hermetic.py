"""The simulated domains never touch the real file system, network or clock (issue: deterministic,
simulated). Checked two ways: statically (what their modules import and call) and at run time (the
whole worked-solution corpus replays with the file system, sockets, processes and the clock cut off)."""

from __future__ import annotations

import ast
import builtins
import datetime
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

DOMAINS = Path(__file__).resolve().parents[1] / "kernel" / "domains"
FORBIDDEN_MODULES = {
    "os",
    "pathlib",
    "shutil",
    "socket",
    "subprocess",
    "time",
    "random",
    "urllib",
    "http",
    "requests",
    "httpx",
    "tempfile",
    "glob",
    "io",
    "uuid",
    "secrets",
    "threading",
}
FORBIDDEN_CALLS = {"open", "input", "eval", "exec", "__import__"}
CLOCK_READS = {"now", "today", "utcnow"}  # datetime parsing is fine; the simulated clock lives in the state


def _domain_files() -> list[Path]:
    return sorted(p for p in DOMAINS.rglob("*.py") if p.name != "__init__.py" or p.parent != DOMAINS)


@pytest.mark.parametrize("path", _domain_files(), ids=lambda p: str(p.relative_to(DOMAINS)))
def test_domain_modules_import_nothing_that_reaches_outside(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                bad.append(node.module)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            bad.append(f"{node.func.id}() at line {node.lineno}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCK_READS:
            bad.append(f".{node.func.attr}() at line {node.lineno}")
    assert bad == []


def test_the_corpus_replays_with_file_system_network_and_clock_cut_off(monkeypatch):
    from forethought.data_gen.verify import verify_solution
    from forethought.kernel.domains import available, load_domain
    from forethought.kernel.grounding import synonym_table
    from forethought.kernel.solution_file import load_solution

    for name in available():  # plugin discovery lists a folder: do it before the cut
        load_domain(name)
    synonym_table()  # the kernel's grounding table reads the domains' synonyms.json once (cached): not a domain call
    solutions = [
        load_solution(p)
        for p in sorted((DOMAINS.parents[1] / "data_gen" / "solutions").rglob("*.json"))
        if p.name != "schema.json"
    ]
    assert len(solutions) >= 300

    def cut(name):
        def refuse(*args, **kwargs):
            raise AssertionError(f"a domain reached outside the simulation: {name}")

        return refuse

    monkeypatch.setattr(builtins, "open", cut("open"))
    for name in ("listdir", "scandir", "remove", "mkdir", "rename", "replace", "system"):
        monkeypatch.setattr(os, name, cut(f"os.{name}"))
    monkeypatch.setattr(socket, "socket", cut("socket"))
    monkeypatch.setattr(subprocess, "Popen", cut("subprocess"))
    monkeypatch.setattr(time, "time", cut("time.time"))
    monkeypatch.setattr(time, "sleep", cut("time.sleep"))

    class NoClock(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            raise AssertionError("a domain read the wall clock")

        @classmethod
        def today(cls):
            raise AssertionError("a domain read the wall clock")

    monkeypatch.setattr(datetime, "datetime", NoClock)
    replayed = [verify_solution(s) for s in solutions]  # raises Divergence at the first mismatch
    assert len(replayed) == len(solutions)
