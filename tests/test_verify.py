"""forethought verify: broken solutions are rejected with a message naming file, turn and step."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from data_gen.verify import verify_paths
from forethought.cli import main

FIG1 = Path("data_gen/solutions/file_system/paper_figure1.json")


def _write(tmp_path: Path, data: dict, name: str = "broken.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def _fig1() -> dict:
    return json.loads(FIG1.read_text())


def _verify_one(path: Path) -> str:
    (res,) = verify_paths([path])
    assert not res.ok
    return res.error


def test_the_corpus_verifies_with_coverage_minimums(capsys):
    rc = main(["verify", "min_per_domain=30", "min_per_tag=10"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "solutions verified" in out and "cyclic_dependency" in out


def test_wrong_order(tmp_path):
    d = _fig1()
    d["turns"][0]["order"] = ["t2", "t1"]
    assert _verify_one(_write(tmp_path, d)) == "turn 0, get_order: expected order ['t2', 't1'], got ['t1', 't2']"


def test_unbound_parameter(tmp_path):
    d = _fig1()
    del d["turns"][1]["tasks"][1]["parameters"]["pattern"]  # the search pattern is no longer grounded anywhere
    msg = _verify_one(_write(tmp_path, d))
    assert msg.startswith("turn 1, ") and "pattern" in msg


def test_wrong_source(tmp_path):
    d = _fig1()
    d["turns"][1]["tasks"][0]["bindings"]["folder"]["source"] = "tau"
    msg = _verify_one(_write(tmp_path, d))
    assert msg == "turn 1, task t1/parameter folder: expected source tau, got S (value 'archive')"


def test_wrong_call(tmp_path):
    d = _fig1()
    d["turns"][1]["calls"][1] = "grep(file_name='${file}', pattern='profit')"
    msg = _verify_one(_write(tmp_path, d))
    assert msg == "turn 1, call 2: expected grep(file_name='report.txt', pattern='profit'), got grep(file_name='report.txt', pattern='revenue')"


def test_annotation_that_violates_a_contract(tmp_path):
    d = _fig1()
    d["turns"][0]["tasks"][0]["parameters"]["dir_name"] = "attic"  # not in the request: decompose's grounding contract
    d["turns"][0]["tasks"][0]["bindings"]["dir_name"]["value"] = "attic"
    msg = _verify_one(_write(tmp_path, d))
    assert "turn 0" in msg and "decompose" in msg and "values_grounded" in msg and "attic" in msg


def test_unbacked_tag(tmp_path):
    d = _fig1()
    d["tags"].append("prereq_not_met_blocked")
    assert "tag 'prereq_not_met_blocked' is not backed" in _verify_one(_write(tmp_path, d))


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: d.pop("turns"), "turns: Field required"),
        (lambda d: d["turns"][0]["tasks"][0].update(tool_name="mkdir"), "turns.0.tasks.0.tool_name: unknown field"),
        (lambda d: d["turns"][0].update(user="Move ${nope} now"), "undefined slot ${nope}"),
        (lambda d: d["turns"][0]["tasks"][0]["bindings"]["dir_name"].update(source="cache"), "turns.0.tasks.0.bindings.dir_name.source"),
        (lambda d: d["turns"][0]["calls"].__setitem__(0, "ls(a=__import__(1))"), "turns.0: Value error, calls[0] 'ls(a=__import__(1))' is not a call"),
        (lambda d: d["turns"][0]["order"].append("t99"), "order names unknown task ids ['t99']"),
        (lambda d: d["turns"][0]["tasks"][1]["depends_on"].append("t7"), "depends on unknown task ids ['t7']"),
    ],
)
def test_malformed_files_name_the_field(tmp_path, mutate, needle):
    d = copy.deepcopy(_fig1())
    mutate(d)
    path = _write(tmp_path, d)
    msg = _verify_one(path)
    assert needle in msg, msg


def test_not_json_names_line_and_column(tmp_path, capsys):
    p = tmp_path / "bad.json"
    p.write_text('{"id": "x",\n  "domains": [file_system]}')
    rc = main(["verify", str(p)])
    out = capsys.readouterr().out
    assert rc == 1
    assert f"FAIL {p}: not valid JSON" in out.replace("\n", "") and "line 2" in out


def test_missing_path_is_a_located_error(capsys):
    rc = main(["verify", "does/not/exist"])
    assert rc == 2
    assert "does/not/exist: no such file or directory" in capsys.readouterr().err
