"""``forethought registry check``: per-file report, exit status, usage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from forethought.errors import UserError
from forethought.kernel.registry.cli import cli

FIX = Path(__file__).parent / "fixtures" / "registries"
REPO = Path(__file__).resolve().parent.parent
OPENAI = str(FIX / "openai_tools.json")
MCP = str(FIX / "mcp_tools_list.json")
BFCL = str(FIX / "bfcl_multi_domain.jsonl")
BAD_TYPE = str(FIX / "broken" / "bad_type.json")


def test_check_counts_tools_per_file(capsys):
    assert cli(["check", OPENAI, MCP, BFCL]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"ok   {OPENAI}: 4 tools (openai)",
        # an OpenAI tools file cannot say which tools change anything: all are assumed to, as MCP's spec defaults
        f"note {OPENAI}: 4 tools ('get_weather', 'search_flights', 'send_email', 'get_time'): side effects: the OpenAI "
        "format cannot declare them, so assumed (the kernel then checks the request's intent before calling it); a "
        "read-only tool can say so in an annotations file",
        f"ok   {MCP}: 3 tools (mcp)",
        f"ok   {BFCL}: 10 tools (bfcl)",
        # plan_route is none of BFCL's multi-turn functions, whose side effects the importer knows.
        f"note {BFCL}: tool 'plan_route': side effects: not one of BFCL's multi-turn functions, so assumed to have them",
        "3 files checked: 3 ok, 0 failed",
    ]
    assert err == ""


def test_check_reports_every_file_then_fails(capsys):
    missing = str(FIX / "nope.json")
    assert cli(["check", BAD_TYPE, OPENAI, missing]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"ok   {OPENAI}: 4 tools (openai)",
        f"note {OPENAI}: 4 tools ('get_weather', 'search_flights', 'send_email', 'get_time'): side effects: the OpenAI "
        "format cannot declare them, so assumed (the kernel then checks the request's intent before calling it); a "
        "read-only tool can say so in an annotations file",
        "3 files checked: 1 ok, 2 failed",
    ]
    assert err.splitlines() == [
        f"FAIL {BAD_TYPE}: tool #3 'get_weather': parameters.properties.unit.type: unknown type 'temprature'",
        f"FAIL {missing}: file not found",
    ]


def test_fmt_override(capsys):
    assert cli(["check", "fmt=bfcl", str(FIX / "bfcl_list.json")]) == 0
    assert "2 tools (bfcl)" in capsys.readouterr().out
    assert cli(["check", OPENAI, "fmt=mcp"]) == 1
    assert f"FAIL {OPENAI}: tool #0: type: unknown mcp tool field" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    assert cli([]) == 2
    assert "usage: forethought registry check FILE..." in capsys.readouterr().err
    assert cli(["lint", OPENAI]) == 2
    assert capsys.readouterr().err.startswith("forethought registry: unknown subcommand 'lint'\nusage:")
    assert cli(["check"]) == 2
    assert "no files given" in capsys.readouterr().err
    assert cli(["check", "fmt=yaml", OPENAI]) == 2
    assert "fmt must be one of openai, mcp, bfcl, got 'yaml'" in capsys.readouterr().err
    assert cli(["check", "strict=true", OPENAI]) == 2
    assert "unknown option 'strict'" in capsys.readouterr().err


def test_help_exits_0(capsys):
    assert cli(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: forethought registry check")


def test_console_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "forethought.cli", "registry", "check", OPENAI, BAD_TYPE],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert f"ok   {OPENAI}: 4 tools (openai)" in proc.stdout
    assert "parameters.properties.unit.type: unknown type 'temprature'" in proc.stderr


def test_check_help_is_help_not_a_file(capsys):
    # Finding 8: `forethought registry check --help` treated --help as a file.
    assert cli(["check", "--help"]) == 0
    assert "usage" in capsys.readouterr().out.lower()


def test_json_nested_too_deep_is_a_located_error(tmp_path, capsys):
    # Finding 8: ~97 levels or deeper gave a RecursionError traceback.
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    assert cli(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}" in err and "nested deeper than 64 levels" in err


def test_check_applies_an_annotations_sidecar_and_refuses_unknown_flags(tmp_path, capsys):
    ann = tmp_path / "ann.yaml"
    ann.write_text("tools:\n  send_email: {prerequisites: [session]}\n  get_time: {side_effect: false}\n")
    assert cli(["check", OPENAI, f"annotations={ann}"]) == 0
    out = capsys.readouterr().out
    assert "2 tools ('get_weather', 'search_flights'): side effects" in out  # the two it annotates carry no note
    ann.write_text("tools:\n  send_mail: {side_effect: true}\n")  # a tool the file does not have
    assert cli(["check", OPENAI, f"annotations={ann}"]) == 1
    assert "annotates tools the registry does not have: send_mail" in capsys.readouterr().err
    ann.write_text("tools:\n  send_email: {side_efect: true}\n")
    with pytest.raises(UserError, match="tools.send_email.side_efect: unknown field"):
        cli(["check", OPENAI, f"annotations={ann}"])
    assert cli(["check", "--bogus", OPENAI]) == 2
    assert "unknown flag '--bogus'" in capsys.readouterr().err
