"""forethought generate: sizes, splits by solution, contract-valid targets, determinism, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from data_gen.generate import DataConfig, generate
from forethought.errors import UserError
from kernel.specs import PRIMITIVE_NAMES, SPECS

FIX = Path(__file__).parent / "fixtures" / "solutions"
SIZES = {"decompose": 40, "get_order": 12, "check_prerequisites": 12, "match_func": 30, "match_fill": 12}


def cfg(out: Path, **kw) -> DataConfig:
    base = dict(solutions=[str(FIX)], output_dir=str(out), seed=0, sizes=SIZES, validation_fraction=0.2, max_rounds=60, workers=1)
    base.update(kw)
    return DataConfig.model_validate(base)


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "data"
    stats = generate(cfg(out))
    return out, stats


def rows(out: Path, prim: str, split: str) -> list[dict]:
    return [json.loads(x) for x in (out / prim / f"{split}.jsonl").read_text().splitlines() if x.strip()]


def test_sizes_and_format(gen):
    out, stats = gen
    for p in PRIMITIVE_NAMES:
        tr, va = rows(out, p, "train"), rows(out, p, "validation")
        assert len(tr) + len(va) == SIZES[p], p
        assert stats["primitives"][p]["reached_requested_size"]
        for r in tr[:5] + va[:5]:
            assert set(r) == {"id", "solution_id", "primitive", "prompt", "completion", "target", "input"}
            assert r["primitive"] == p
            assert [m["role"] for m in r["prompt"]] == ["system", "user"]
            assert r["completion"][0]["role"] == "assistant"
            assert json.loads(r["completion"][0]["content"]) == r["target"]
    assert (out / "README.md").read_text().startswith("# forethought per-primitive SFT datasets")


def test_every_target_passes_its_contract_and_is_rendered_by_the_spec(gen):
    out, _ = gen
    for p in PRIMITIVE_NAMES:
        spec = SPECS[p]
        for r in rows(out, p, "train") + rows(out, p, "validation"):
            inp_data = json.loads(r["input"])
            assert spec.check_output(inp_data, r["target"]).ok, r["id"]
            inp = spec.input_type.model_validate(inp_data)
            assert spec.messages(inp) == r["prompt"]  # the generator renders only through the spec
            assert spec.exact_match(r["target"], json.loads(r["completion"][0]["content"]))


def test_split_is_by_solution_with_no_shared_prompts(gen):
    out, stats = gen
    val_ids = set(stats["validation_solutions"])
    assert val_ids and len(val_ids) < stats["solutions"]
    for p in PRIMITIVE_NAMES:
        tr, va = rows(out, p, "train"), rows(out, p, "validation")
        assert {r["solution_id"] for r in va} <= val_ids
        assert not {r["solution_id"] for r in tr} & val_ids
        key = lambda r: json.dumps(r["prompt"])  # noqa: E731
        assert not {key(r) for r in tr} & {key(r) for r in va}
        assert len({key(r) for r in tr}) == len(tr)  # exact duplicates removed
        info = stats["primitives"][p]
        assert info["solution_overlap"] == 0 and info["shared_prompts"] == 0
        for field in ("examples", "source_solutions", "domains", "pattern_tags", "prompt_tokens", "target_tokens", "near_duplicate_rate"):
            assert field in info["train"]
        assert isinstance(info["dropped"], dict)


def test_same_seed_byte_identical_other_seed_differs(gen, tmp_path):
    out, _ = gen
    again = tmp_path / "again"
    generate(cfg(again, workers=2))  # and independent of the number of worker processes
    for f in sorted(out.rglob("*")):
        if f.is_file():
            assert f.read_bytes() == (again / f.relative_to(out)).read_bytes(), f
    other = tmp_path / "other"
    generate(cfg(other, seed=1))
    assert (other / "decompose" / "train.jsonl").read_bytes() != (out / "decompose" / "train.jsonl").read_bytes()


def test_loadable_with_datasets(gen):
    import datasets

    from data_gen.formats import features

    out, _ = gen
    for p in PRIMITIVE_NAMES:
        files = {s: str(out / p / f"{s}.jsonl") for s in ("train", "validation")}
        d = datasets.load_dataset("json", data_files=files, features=features())
        assert d["train"].num_rows + d["validation"].num_rows == SIZES[p]
        assert d["train"][0]["target"] == json.loads(d["train"][0]["completion"][0]["content"])
        d2 = datasets.load_dataset(str(out / p))  # the folder's README declares the features
        assert d2["validation"].num_rows == d["validation"].num_rows


def test_unverifiable_solution_stops_generation_unless_skipping_is_allowed(tmp_path):
    src = tmp_path / "sols"
    shutil.copytree(FIX, src)
    bad = json.loads((src / "paper_figure1.json").read_text())
    bad["id"] = "broken-order"
    bad["turns"][0]["order"] = ["t2", "t1"]
    (src / "broken.json").write_text(json.dumps(bad))
    with pytest.raises(UserError) as ei:
        generate(cfg(tmp_path / "out", solutions=[str(src)]))
    assert "broken.json" in str(ei.value) and "get_order" in str(ei.value)
    stats = generate(cfg(tmp_path / "out2", solutions=[str(src)], allow_skip_unverifiable=True))
    assert len(stats["skipped_solutions"]) == 1 and "broken.json" in stats["skipped_solutions"][0]
