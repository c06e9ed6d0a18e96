"""forethought run: outputs, the HTML trace view, and located errors for bad scenarios."""

from __future__ import annotations

import json

from forethought.cli import main
from forethought.primitives import Trace

FIG1 = "data_gen/solutions/file_system/paper_figure1.json"


def test_run_writes_calls_state_trace_and_html(tmp_path, capsys):
    rc = main(["run", FIG1, f"output_dir={tmp_path}"])
    assert rc == 0
    out = tmp_path / "fs-paper-figure1"
    calls = [json.loads(x) for x in (out / "calls.jsonl").read_text().splitlines()]
    assert [(c["turn"], c["tool"]) for c in calls] == [(0, "mkdir"), (0, "mv"), (1, "cd"), (1, "grep")]
    state = json.loads((out / "final_state.json").read_text())
    assert state["file_system"]["cwd"] == ["archive"]
    rows = [json.loads(x) for x in (out / "trace.jsonl").read_text().splitlines()]
    assert {r["turn"] for r in rows} == {0, 1}
    slm = [r for r in rows if r["kind"] == "slm"]
    assert slm and all(r["model"]["backend"] == "oracle" for r in slm)
    html = (out / "trace.html").read_text()
    for needle in (
        "1. Decompose",
        "2. Get-Order",
        "4. Match",
        "consulted",
        "src-scratchpad",
        "src-request",
        "grep(",
        "Contract results",
    ):
        assert needle in html
    turns = json.loads((out / "turns.json").read_text())
    assert turns[1]["bindings"]["t2"]["pattern"]["source"] == "request"
    assert "turn 2: t1=executed, t2=executed" in capsys.readouterr().out


def test_run_without_cvc_and_trace_levels(tmp_path):
    assert main(["run", FIG1, f"output_dir={tmp_path}", "kernel.cvc=false", "trace=steps"]) == 0
    rows = Trace.load(tmp_path / "fs-paper-figure1" / "trace.jsonl")
    assert len(rows) > 0 and all(r.input is None for r in rows)


def test_malformed_scenario_is_a_located_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"id": "x", "domains": ["file_system"], "turns": [{"user": "ls", "contxt": {}}]}))
    assert main(["run", str(bad), f"output_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "turns.0.contxt: unknown field" in err


def test_unannotated_scenario_needs_a_model_backend(tmp_path, capsys):
    sc = tmp_path / "plain.json"
    sc.write_text(json.dumps({"id": "plain", "domains": ["file_system"], "turns": [{"user": "list the files"}]}))
    assert main(["run", str(sc), f"output_dir={tmp_path}"]) == 2
    assert "the oracle backend needs an annotated scenario" in capsys.readouterr().err


def test_unknown_domain_is_a_located_error(tmp_path, capsys):
    sc = tmp_path / "dom.json"
    sc.write_text(
        json.dumps(
            {"id": "d", "domains": ["no_such_domain"], "turns": [{"user": "x", "tasks": [], "order": [], "calls": []}]}
        )
    )
    assert main(["run", str(sc), f"output_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "dom.json" in err and "no_such_domain" in err


def test_record_then_strict_replay_reproduces_the_run_without_the_backend(tmp_path, capsys):
    assert main(["run", FIG1, f"output_dir={tmp_path / 'a'}", "record=true"]) == 0
    rec = tmp_path / "a" / "fs-paper-figure1" / "recording.jsonl"
    header, *entries = [json.loads(x) for x in rec.read_text().splitlines()]
    # the format version, checked on load, and how the prompts were rendered (a replay renders them so)
    assert header == {"forethought_recording": 1, "rendering": {"tool_rendering": "full", "demonstrations": {}}}
    assert {e["primitive"] for e in entries} >= {"decompose", "match_func"}
    # strict replay needs no backend at all: a bundle that does not exist is never opened
    assert (
        main(
            ["run", FIG1, f"output_dir={tmp_path / 'b'}", f"replay={rec}", "backend=hf", "backend.bundle=/nonexistent"]
        )
        == 0
    )
    recorded, strict = (tmp_path / d / "fs-paper-figure1" for d in "ab")
    assert (recorded / "calls.jsonl").read_text() == (strict / "calls.jsonl").read_text()
    assert (recorded / "final_state.json").read_text() == (strict / "final_state.json").read_text()
    replayed = [json.loads(x) for x in (strict / "trace.jsonl").read_text().splitlines()]
    assert {r["source"] for r in replayed if r["kind"] == "slm"} == {"replay"}
    # a recording with an entry missing: strict replay is a located error, not a crash
    short = tmp_path / "short.jsonl"
    lines = rec.read_text().splitlines()
    short.write_text("".join(x + "\n" for x in [lines[0], *lines[2:]]))
    capsys.readouterr()
    assert main(["run", FIG1, f"output_dir={tmp_path / 'c'}", f"replay={short}"]) == 2
    assert "strict replay: no recorded output" in capsys.readouterr().err


def test_a_halted_turn_makes_the_exit_status_non_zero(tmp_path, capsys):
    cyclic = "data_gen/solutions/airline/certificate_after_booking_cycle.json"
    assert main(["run", cyclic, f"output_dir={tmp_path}"]) == 1
    out = capsys.readouterr().out
    assert "halted: " in out and "turn(s) halted" in out


def test_several_scenarios_are_all_checked_before_the_first_runs(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    out = tmp_path / "out"
    assert main(["run", FIG1, str(bad), f"output_dir={out}"]) == 2
    assert "bad.json" in capsys.readouterr().err
    assert not out.exists()  # FIG1 did not run: nothing of it was written
