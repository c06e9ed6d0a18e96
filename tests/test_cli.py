"""The CLI surface shared by every configured command: --help, flags, strict configs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from forethought.cli import CONFIGURED, HELP_LINES, main


@pytest.mark.parametrize("command", sorted(CONFIGURED))
def test_help_lists_settings_and_runs_nothing(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a command that ran would write under runs/ here
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: forethought {command}")
    assert f"conf/{command}.yaml" in out and "settings and their defaults" in out
    assert not (tmp_path / "runs").exists()


def test_help_of_every_command_and_subcommand_works_in_a_fresh_process(tmp_path):
    """Each in its own interpreter: a --help that works only after another command imported something
    (generate, validate and evaluate needed the primitive registry) fails here."""
    env = {**os.environ, "FORETHOUGHT_DEBUG": ""}
    procs = {
        " ".join(line): subprocess.Popen(
            [sys.executable, "-m", "forethought.cli", *line, "--help"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in HELP_LINES
    }
    for name, proc in procs.items():
        out, err = proc.communicate()
        assert proc.returncode == 0 and "Traceback" not in err, f"{name} --help: {err[-2000:]}"
        assert out.startswith("usage: forethought"), f"{name} --help printed {out[:200]!r}"
    assert list(tmp_path.iterdir()) == []  # --help runs nothing


def test_a_subcommand_with_its_own_config_shows_it(capsys):
    assert main(["bench", "tau2", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: forethought bench tau2") and "conf/bench_tau2.yaml" in out and "seeds:" in out


def test_help_names_config_groups_and_their_options(capsys):
    assert main(["train", "-h"]) == 0
    out = capsys.readouterr().out
    assert "model=tiny  (options: causal_lm, gemma3_12b, gemma3_12b_qlora, small, tiny)" in out
    assert "[-m|--multirun]" in out


@pytest.mark.parametrize("command", ["verify", "run", "validate", "pipeline"])
def test_unknown_flags_are_refused_before_anything_runs(command, capsys):
    assert main([command, "--dry-run"]) == 2
    assert "unknown flag(s) --dry-run; accepted: --help, --cfg" in capsys.readouterr().err


def test_configs_are_not_coerced_from_strings(capsys):
    assert main(["validate", "base_comparison=yes", "max_examples='16'", "--cfg"]) == 2
    err = capsys.readouterr().err
    assert "max_examples: Input should be a valid integer (got '16')" in err
    assert "base_comparison: Input should be a valid boolean (got 'yes')" in err


def test_errors_name_the_key_as_written_not_pydantics_union_tag(capsys):
    assert main(["run", "x.json", "backend=hf", "backend.device=tpu", "--cfg"]) == 2
    err = capsys.readouterr().err
    assert "  - backend.device: " in err and "backend.hf." not in err


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "a" * 300 + ".json"],  # a name over the file system's 255 bytes
        ["demo-dsl", "out=/tmp/" + "a" * 300],
        ["demo-dsl", "out=/proc/forethought-test/out.txt"],  # a pseudo file system: nothing can be created there
    ],
)
def test_a_path_the_file_system_cannot_hold_is_a_located_error(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and ("File name too long" in err or "No such file or directory" in err), err
    assert "Traceback" not in err and "internal error" not in err


def test_an_os_error_that_is_not_about_a_path_stays_an_internal_error(capsys):
    from forethought.errors import run_guarded

    def fails():
        raise OSError(28, "No space left on device")  # no file name: nothing the user gave to point at

    assert run_guarded(fails) == 1
    assert "internal error" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("out", "why"),
    [("{file}/trace.jsonl", "is a file, not a folder"), ("{tmp}", "is a folder; out= names the trace file")],
)
def test_demo_dsl_refuses_its_trace_path_before_it_runs(out, why, tmp_path, capsys):
    (tmp_path / "f").write_text("kept")
    assert main(["demo-dsl", "out=" + out.format(file=tmp_path / "f", tmp=tmp_path)]) == 2
    printed = capsys.readouterr()
    assert why in printed.err and printed.out == ""  # nothing ran: no program, no trace table
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"] and (tmp_path / "f").read_text() == "kept"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_is_the_installed_distributions(flag, capsys):
    from importlib.metadata import version

    assert main([flag]) == 0
    assert capsys.readouterr().out == f"forethought {version('forethought')}\n"
