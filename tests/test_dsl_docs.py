"""docs/dsl.md and `forethought demo-dsl` must keep working: their code is executed here."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from forethought.primitives import Trace

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "dsl.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def doc_blocks() -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in FENCE.findall(DOC.read_text(encoding="utf-8"))]


def test_docs_code_blocks_run_and_print_what_the_doc_shows(tmp_path, monkeypatch):
    blocks = doc_blocks()
    pairs = []  # (python code, expected output or None)
    for i, (lang, body) in enumerate(blocks):
        if lang == "python":
            nxt = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
            pairs.append((body, nxt[1] if nxt[0] == "text" else None))
    assert len(pairs) >= 3, "docs/dsl.md lost its runnable examples"
    assert all(expected is not None for _, expected in pairs), "every python block is followed by its output"

    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs_dsl"}
    for code, expected in pairs:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), namespace)
        assert out.getvalue() == expected, f"docs/dsl.md output drifted for block:\n{code}"
    # the example wrote its trace, and it loads back equal
    trace = Trace.load(tmp_path / "trace.jsonl")
    assert trace.records == namespace["run"].trace.records
    assert [r.action for r in trace] == ["retry", "accept", "accept"]


def test_docs_list_every_public_name():
    from forethought import primitives

    text = DOC.read_text(encoding="utf-8")
    missing = [
        n
        for n in primitives.__all__
        if n not in text and n not in ("Node", "canonical_json", "input_hash", "type_mismatches")
    ]
    assert missing == []


def test_demo_cli_recovers_a_violation_and_writes_the_trace(tmp_path, capsys):
    from forethought.cli import main

    out = tmp_path / "demo" / "trace.jsonl"
    assert main(["demo-dsl", f"out={out}"]) == 0
    printed = capsys.readouterr().out
    assert "scripted" in printed
    assert "cities_in_request" in printed and "retry" in printed and "accept" in printed
    assert "[value] cities_in_request: not in the request: Berlin" in printed  # feedback shown verbatim
    assert '{"legs":["Paris -> Rome"]}' in printed
    trace = Trace.load(out)
    assert [(r.primitive, r.attempt, r.action) for r in trace] == [
        ("extract_cities", 0, "retry"),
        ("extract_cities", 1, "accept"),
        ("plan_route", 0, "accept"),
    ]
    assert trace.records[0].contract["violations"][0]["constraint"] == "cities_in_request"
    assert trace.records[-1].output == {"legs": ["Paris -> Rome"]}


def test_demo_cli_default_path_and_bad_arguments(tmp_path, monkeypatch, capsys):
    from forethought.cli import main
    from forethought.dsl_demo import DEFAULT_OUT

    monkeypatch.chdir(tmp_path)
    assert main(["demo-dsl"]) == 0
    assert Trace.load(tmp_path / DEFAULT_OUT).run_id == "dsl-demo"
    capsys.readouterr()
    assert main(["demo-dsl", "outt=x"]) == 2
    assert "unknown argument 'outt=x'" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_demo_cli_help(flag, capsys):
    from forethought.dsl_demo import cli

    assert cli([flag]) == 0
    assert "demo-dsl" in capsys.readouterr().out


def test_readme_dsl_example_runs_and_prints_what_its_comments_say(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    code = next(body for lang, body in FENCE.findall(text) if lang == "python")
    # what the example says it prints: trailing "# ..." comments on print lines, then "# " comment lines
    expected = []
    for line in code.splitlines():
        if line.startswith("print(") and "#" in line:
            expected.append(
                line.split("#", 1)[1].split(":", 1)[0].strip()
                if line.startswith("print(run.output)")
                else line.split("#", 1)[1].strip()
            )
        elif line.startswith("# ") and expected:
            expected.append(line[2:])
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    lines = out.getvalue().splitlines()
    assert lines == expected
    assert [r.action for r in Trace.load(tmp_path / "trace.jsonl")] == ["retry", "accept", "accept"]
