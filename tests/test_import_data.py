"""``forethought import-data``: a ``datasets`` dataset (a hub-layout folder of jsonl or parquet) in, through the one row
model and the same checks as generated data (issue 28 item 6). Local folders only."""

from __future__ import annotations

import json

import pytest

from forethought.cli import main
from forethought.data_gen.row import read_rows
from forethought.training.synthetic import write_dataset

datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """Generated-format data laid out as a hub repository: match_func as jsonl, get_order as parquet."""
    data = write_dataset(
        tmp_path_factory.mktemp("gen"), n_train=6, n_val=2, seed=3, primitives=("match_func", "get_order")
    )
    hub = tmp_path_factory.mktemp("hub")
    for split in ("train", "validation"):
        (hub / "match_func").mkdir(exist_ok=True)
        (hub / "match_func" / f"{split}.jsonl").write_bytes((data / "match_func" / f"{split}.jsonl").read_bytes())
        rows = [json.loads(x) for x in (data / "get_order" / f"{split}.jsonl").read_text().splitlines() if x]
        (hub / "data" / "get_order").mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_list(rows).to_parquet(str(hub / "data" / "get_order" / f"{split}-00000-of-00001.parquet"))
    return data, hub


def test_a_hub_layout_folder_imports_as_the_same_rows(source, tmp_path, capsys):
    data, hub = source
    out = tmp_path / "data"
    assert main(["import-data", str(hub), f"output_dir={out}"]) == 0
    assert "match_func" in capsys.readouterr().out and (out / "dataset.json").is_file()
    for prim in ("match_func", "get_order"):
        for split in ("train", "validation"):
            assert read_rows(out, prim, split) == read_rows(data, prim, split)


def test_bad_rows_are_listed_with_their_place_and_nothing_is_written(source, tmp_path, capsys):
    _, hub = source
    bad = tmp_path / "bad"
    (bad / "match_func").mkdir(parents=True)
    rows = [json.loads(x) for x in (hub / "match_func" / "train.jsonl").read_text().splitlines() if x]
    rows[1]["completion"][0]["content"] = '{"tool_name": "nope"}'
    del rows[2]["solution_id"]
    (bad / "match_func" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc = main(["import-data", str(bad), f"output_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert rc == 2 and "2 bad row(s)" in err and "match_func/train row 1" in err and "row 2: field 'solution_id'" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_a_solution_on_both_sides_of_the_split_is_refused(source, tmp_path, capsys):
    _, hub = source
    leak = tmp_path / "leak"
    (leak / "match_func").mkdir(parents=True)
    train = (hub / "match_func" / "train.jsonl").read_text()
    (leak / "match_func" / "train.jsonl").write_text(train)
    (leak / "match_func" / "validation.jsonl").write_text(train.splitlines()[0] + "\n")
    assert main(["import-data", str(leak), f"output_dir={tmp_path / 'out'}"]) == 2
    assert "shares 1 solution(s) with validation" in capsys.readouterr().err
