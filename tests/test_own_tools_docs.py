"""docs/own_tools.md must keep working: its Python blocks run here, in order, each printing what the text block
after it shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "own_tools.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def test_the_tutorial_runs_and_prints_what_it_shows(tmp_path, monkeypatch):
    blocks = FENCE.findall(DOC.read_text(encoding="utf-8"))
    pairs = [(body, blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "text" else None)
             for i, (lang, body) in enumerate(blocks) if lang == "python"]  # fmt: skip
    assert len(pairs) == 3 and all(expected is not None for _, expected in pairs)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs_own_tools", "SERVERS": str(ROOT / "tests" / "mcp_servers")}
    for code, expected in pairs:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), namespace)
        assert out.getvalue() == expected, f"docs/own_tools.md output drifted for block:\n{code}"
