"""One dataset row model (forethought.data_gen.row.DatasetRow): generate writes it, the card describes it, and
train and validate read it through the same reader, so they accept and refuse the same rows."""

from __future__ import annotations

import json
import shutil

import pytest

from forethought.data_gen.formats import card_front_matter, features, field_kinds, field_list
from forethought.data_gen.row import DatasetRow
from forethought.data_gen.unit import seal
from forethought.errors import UserError
from forethought.kernel.specs import PRIMITIVE_NAMES
from forethought.training.data import read_split
from forethought.training.validate import _read_rows


def test_generate_writes_exactly_the_row_model(generated_data):
    for primitive in PRIMITIVE_NAMES:
        for split in ("train", "validation"):
            lines = [
                x for x in (generated_data / primitive / f"{split}.jsonl").read_text(encoding="utf-8").split("\n") if x
            ]
            assert lines
            for line in lines:
                assert DatasetRow.model_validate_json(line).line() == line  # every field, in the model's order


def test_the_card_and_the_features_describe_the_model_s_fields():
    names = list(DatasetRow.model_fields)
    assert list(features()) == names == list(field_kinds())
    assert [
        x.removeprefix("  - name: ") for x in card_front_matter().splitlines() if x.startswith("  - name: ")
    ] == names
    assert [x.split("`")[1] for x in field_list().splitlines()] == names
    assert all(DatasetRow.model_fields[n].description for n in names)


def _first(generated_data, primitive, split):
    return json.loads((generated_data / primitive / f"{split}.jsonl").read_text(encoding="utf-8").split("\n")[0])


BROKEN = {
    "a field missing": (lambda r: {k: v for k, v in r.items() if k != "input"}, "field 'input' is missing"),
    "an unknown field": (lambda r: {**r, "weight": 1}, "field 'weight' is not a dataset row field"),
    "a mistyped field": (
        lambda r: {**r, "near_duplicate_across_split": 0},
        "field 'near_duplicate_across_split': Input should be a valid boolean",
    ),
    "a target that is not the completion": (
        lambda r: {**r, "target": {"tool_name": "something_else"}},
        "field 'target' is not the completion's JSON",
    ),
    "another primitive's row": (
        lambda r: {**r, "primitive": "get_order"},
        "field 'primitive' is 'get_order', expected 'match_func'",
    ),
    "a completion by the user": (
        lambda r: {**r, "completion": [{**r["completion"][0], "role": "user"}]},
        "field 'completion': the completion message's role",
    ),
    "a prompt with a tool message": (
        lambda r: {**r, "prompt": [*r["prompt"][:1], {"role": "tool", "content": "x"}]},
        "field 'prompt': roles must be",
    ),
    "input that is not JSON": (lambda r: {**r, "input": "{"}, "field 'input': not valid JSON"),
    # Issue 25: train accepted these two (validate refused them): the row model itself now checks the primitive's types.
    "a target that is JSON but not the primitive's output": (
        lambda r: {**r, "target": {"tool": 3}, "completion": [{"role": "assistant", "content": '{"tool": 3}'}]},
        "field 'target' is not a valid match_func target (its output type MatchFuncOutput): tool_name: Field required",
    ),
    "an input the primitive's input type refuses": (
        lambda r: {**r, "input": json.dumps({"task": "not a task"})},
        "field 'input' is not a MatchFuncInput: task:",
    ),
    "a NaN in the completion": (
        lambda r: {**r, "completion": [{"role": "assistant", "content": '{"tool_name": NaN}'}]},
        "field 'completion': the completion's content: NaN is not a JSON number at tool_name",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_train_and_validate_refuse_the_same_bad_row_with_its_line_and_field(generated_data, tmp_path, case):
    break_row, needle = BROKEN[case]
    data = tmp_path / "d"
    shutil.copytree(generated_data, data)
    for split in ("train", "validation"):
        good = _first(generated_data, "match_func", split)
        path = data / "match_func" / f"{split}.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps(break_row(good)) + "\n", encoding="utf-8")
    seal(data)
    with pytest.raises(UserError) as train_err:
        read_split(data, "match_func", "train")
    with pytest.raises(UserError) as val_err:
        _read_rows(str(data), "match_func", None)
    for err, split in ((train_err.value, "train"), (val_err.value, "validation")):
        assert err.where == str(data / "match_func" / f"{split}.jsonl")
        assert f"1 bad row(s):\n  line 2: {needle}" in str(err), str(err)


def test_the_train_command_refuses_a_target_its_primitive_does_not_accept(generated_data, tmp_path, capsys):
    from forethought.cli import main
    from tests.disk import tree

    data = tmp_path / "d"
    shutil.copytree(generated_data, data)
    path = data / "match_func" / "train.jsonl"
    good = _first(generated_data, "match_func", "train")
    bad = {
        **good,
        "target": {"tool_name": ["ls"]},
        "completion": [{"role": "assistant", "content": '{"tool_name": ["ls"]}'}],
    }
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    seal(data)
    before = tree(tmp_path)
    assert (
        main(["train", "primitive=match_func", "model=tiny", f"dataset_dir={data}", f"output_dir={tmp_path / 'out'}"])
        == 2
    )
    err = capsys.readouterr().err
    assert f"error: {path}: 1 bad row(s):\n  line 2: field 'target' is not a valid match_func target" in err
    assert tree(tmp_path) == before  # refused before any folder was made
