"""The benchmarks' own JSON, read as every file the project does not write is read (issue 25 part 5; docs/guarantees.md
"Parsing bounds and strict JSON"): bfcl-eval's entries and possible answers by forethought/bounded.py's strict reader,
each row checked before any is run (a located error, never a KeyError or a silently kept NaN mid-run), and a tau2 tool
response that is not strict JSON kept as the text it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forethought.bench.tau2_env import response_value
from forethought.errors import UserError
from tests.disk import tree


# ------------------------------------------------------------------ tau2: a tool response
@pytest.mark.parametrize(
    "content",
    ['{"balance": NaN}', '{"balance": Infinity}', '{"balance": 1e999}', '{"id": "L1", "id": "L2"}'],
)
def test_a_tau2_response_that_is_not_strict_json_is_kept_as_text(content):
    # Python's json turned these into a float nan / inf, or kept the last "id" silently, and the kernel bound from it.
    assert response_value(content) == content


def test_a_tau2_response_that_is_json_is_its_value():
    assert response_value('{"lines": [{"id": "L1", "data_gb": 1.5}]}') == {"lines": [{"id": "L1", "data_gb": 1.5}]}
    assert response_value("Error: no such line") == "Error: no such line"
    assert response_value(None) is None


# ------------------------------------------------------------------ bfcl: entries and possible answers
CATEGORY = "multi_turn_miss_func"  # its rows carry every field read here, missed_function included


@pytest.fixture
def bfcl_copy(tmp_path, monkeypatch):
    """A copy of bfcl-eval's data folder for one category (two entries), with the function docs linked, in its place."""
    pytest.importorskip("bfcl_eval")
    from forethought.bench import bfcl_data

    real = bfcl_data.bfcl_data_dir()
    data = tmp_path / "data"
    (data / "possible_answer").mkdir(parents=True)
    (data / "multi_turn_func_doc").symlink_to(real / "multi_turn_func_doc")
    for rel in (f"BFCL_v4_{CATEGORY}.json", f"possible_answer/BFCL_v4_{CATEGORY}.json"):
        lines = (real / rel).read_text(encoding="utf-8").split("\n")
        (data / rel).write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    bfcl_data.load_category.cache_clear()
    monkeypatch.setattr(bfcl_data, "bfcl_data_dir", lambda: data)
    yield data
    bfcl_data.load_category.cache_clear()


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x]


def _write(path: Path, rows: list, second: str | None = None) -> None:
    lines = [json.dumps(r) for r in rows]
    if second is not None:
        lines[1] = second
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _entry(row: dict, **changes) -> dict:
    return {**row, **changes}


ENTRY_CASES = {
    "a NaN": (lambda r: json.dumps(r).replace('"initial_config": {', '"initial_config": {"x": NaN, ', 1), "NaN is not a JSON number at initial_config.x"),
    "a key twice": (lambda r: json.dumps(r).replace('{"id": ', '{"id": "other", "id": ', 1), "duplicate key 'id'"),
    "not an object": (lambda r: "[1, 2]", "expected a JSON object, got list"),
    "not JSON": (lambda r: json.dumps(r)[:-1], "not JSON"),
    "no id": (lambda r: json.dumps({k: v for k, v in r.items() if k != "id"}), "field 'id': Field required"),
    "a turn that is text": (lambda r: json.dumps(_entry(r, question=["hello"])), "field 'question[0]': Input should be a valid list"),
    "a message without its text": (lambda r: json.dumps(_entry(r, question=[[{"role": "user"}]] * len(r["question"]))), "field 'question[0][0].content': Field required"),
    "an unknown class": (lambda r: json.dumps(_entry(r, involved_classes=["NopeAPI"])), "field 'involved_classes': no function docs for ['NopeAPI']"),
    "a withheld turn that is not one": (lambda r: json.dumps(_entry(r, missed_function={"x": ["sort"]})), "field 'missed_function.x': not a turn of the entry"),
    "a withheld function no class has": (lambda r: json.dumps(_entry(r, missed_function={"1": ["teleport"]})), "field 'missed_function.1': no involved class has ['teleport']"),
    "a turn more than its answer": (lambda r: json.dumps(_entry(r, question=[*r["question"], []])), "turns, but its possible answer has"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ENTRY_CASES))
def test_a_bad_bfcl_entry_is_a_located_error_before_any_entry_runs(case, bfcl_copy):
    from forethought.bench import bfcl_data

    path = bfcl_copy / f"BFCL_v4_{CATEGORY}.json"
    rows = _rows(path)
    make, needle = ENTRY_CASES[case]
    _write(path, rows, make(rows[1]))
    with pytest.raises(UserError) as err:
        bfcl_data.load_category(CATEGORY)
    assert err.value.where == str(path)
    assert str(err.value).startswith(f"{path}: line 2") and needle in str(err.value), str(err.value)


def test_an_id_given_twice_is_located(bfcl_copy):
    from forethought.bench import bfcl_data

    path = bfcl_copy / f"BFCL_v4_{CATEGORY}.json"
    rows = _rows(path)
    _write(path, [rows[0], rows[0]])
    with pytest.raises(UserError, match=f"line 2: id '{rows[0]['id']}' given twice"):
        bfcl_data.load_category(CATEGORY)


@pytest.mark.parametrize(
    ("second", "needle"),
    [
        ('{"id": "x", "ground_truth": [["cd(folder=\'a\')"]], "ground_truth": []}', "duplicate key 'ground_truth'"),
        ('{"id": "x", "ground_truth": "cd()"}', "field 'ground_truth': Input should be a valid list"),
        ('{"ground_truth": []}', "field 'id': Field required"),
    ],
)
def test_a_bad_possible_answer_is_located(second, needle, bfcl_copy):
    from forethought.bench import bfcl_data

    path = bfcl_copy / "possible_answer" / f"BFCL_v4_{CATEGORY}.json"
    _write(path, _rows(path), second)
    with pytest.raises(UserError) as err:
        bfcl_data.load_category(CATEGORY)
    assert err.value.where == str(path) and f"line 2: {needle}" in str(err.value), str(err.value)


def test_bfcl_data_that_is_not_utf8_is_located(bfcl_copy):
    from forethought.bench import bfcl_data

    path = bfcl_copy / f"BFCL_v4_{CATEGORY}.json"
    path.write_bytes(path.read_bytes() + b'{"id": "caf\xe9"}\n')
    with pytest.raises(UserError, match="not UTF-8 text"):
        bfcl_data.load_category(CATEGORY)


def test_the_bench_command_refuses_bad_bfcl_data_with_exit_2_and_writes_nothing(bfcl_copy, tmp_path, capsys):
    from forethought.cli import main

    path = bfcl_copy / f"BFCL_v4_{CATEGORY}.json"
    rows = _rows(path)
    _write(path, rows, json.dumps(_entry(rows[1], involved_classes=["NopeAPI"])))
    before = tree(tmp_path)
    out = tmp_path / "out"
    assert main(["bench", "bfcl", "mode=ceiling", "categories=[miss_func]", f"output_dir={out}"]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: line 2" in err and "no function docs for ['NopeAPI']" in err and "Traceback" not in err
    assert tree(tmp_path) == before
