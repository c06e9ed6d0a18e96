"""forethought generate: sizes, splits by solution, contract-valid targets, determinism, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import forethought.data_gen.generate as generate_module
from forethought.cli import main
from forethought.data_gen.generate import (
    DataConfig,
    Example,
    Pools,
    VariantBug,
    generate,
    load_solutions,
    masker,
    write_outputs,
)
from forethought.errors import UserError
from forethought.kernel.specs import PRIMITIVE_NAMES, SPECS

FIX = Path(__file__).parent / "fixtures" / "solutions"
SIZES = {"decompose": 40, "get_order": 12, "check_prerequisites": 12, "match_func": 30, "match_fill": 12}


def cfg(out: Path, **kw) -> DataConfig:
    base = dict(
        solutions=[str(FIX)],
        output_dir=str(out),
        seed=0,
        sizes=SIZES,
        validation_fraction=0.2,
        max_rounds=60,
        workers=1,
    )
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
    for primitive in PRIMITIVE_NAMES:
        train, validation = rows(out, primitive, "train"), rows(out, primitive, "validation")
        assert len(train) + len(validation) == SIZES[primitive], primitive
        assert stats["primitives"][primitive]["reached_requested_size"]
        for row in train[:5] + validation[:5]:
            assert set(row) == {
                "id",
                "solution_id",
                "primitive",
                "prompt",
                "completion",
                "target",
                "input",
                "near_duplicate_across_split",
                "train_only",
            }
            assert row["primitive"] == primitive
            assert [m["role"] for m in row["prompt"]] == ["system", "user"]
            assert row["completion"][0]["role"] == "assistant"
            assert json.loads(row["completion"][0]["content"]) == row["target"]
    assert (out / "README.md").read_text().startswith("# forethought per-primitive SFT datasets")


def test_every_target_passes_its_contract_and_is_rendered_by_the_spec(gen):
    out, _ = gen
    for primitive in PRIMITIVE_NAMES:
        spec = SPECS[primitive]
        for row in rows(out, primitive, "train") + rows(out, primitive, "validation"):
            inp_data = json.loads(row["input"])
            assert spec.check_output(inp_data, row["target"]).ok, row["id"]
            inp = spec.input_type.model_validate(inp_data)
            assert spec.messages(inp) == row["prompt"]  # the generator renders only through the spec
            assert spec.exact_match(row["target"], json.loads(row["completion"][0]["content"]))


def test_split_is_by_solution_with_no_shared_prompts(gen):
    out, stats = gen
    val_ids = set(stats["validation_solutions"])
    assert val_ids and len(val_ids) < stats["solutions"]
    for primitive in PRIMITIVE_NAMES:
        train, validation = rows(out, primitive, "train"), rows(out, primitive, "validation")
        assert {r["solution_id"] for r in validation} <= val_ids
        assert not {r["solution_id"] for r in train} & val_ids
        key = lambda r: json.dumps(r["prompt"])  # noqa: E731
        assert not {key(r) for r in train} & {key(r) for r in validation}
        assert len({key(r) for r in train}) == len(train)  # exact duplicates removed
        info = stats["primitives"][primitive]
        assert info["solution_overlap"] == 0 and info["shared_prompts"] == 0
        for field in (
            "examples",
            "source_solutions",
            "domains",
            "pattern_tags",
            "prompt_tokens",
            "target_tokens",
            "near_duplicate_rate",
        ):
            assert field in info["train"]
        assert isinstance(info["dropped"], dict)


def test_same_seed_byte_identical_other_seed_differs(gen, tmp_path):
    out, _ = gen
    again = tmp_path / "again"
    generate(cfg(again, workers=2))  # and independent of the number of worker processes
    for path in sorted(out.rglob("*")):
        if path.is_file():
            assert path.read_bytes() == (again / path.relative_to(out)).read_bytes(), path
    other = tmp_path / "other"
    generate(cfg(other, seed=1))
    assert (other / "decompose" / "train.jsonl").read_bytes() != (out / "decompose" / "train.jsonl").read_bytes()


def test_loadable_with_datasets(gen):
    import datasets

    from forethought.data_gen.formats import features

    out, _ = gen
    for primitive in PRIMITIVE_NAMES:
        files = {s: str(out / primitive / f"{s}.jsonl") for s in ("train", "validation")}
        dataset = datasets.load_dataset("json", data_files=files, features=features())
        assert dataset["train"].num_rows + dataset["validation"].num_rows == SIZES[primitive]
        assert dataset["train"][0]["target"] == json.loads(dataset["train"][0]["completion"][0]["content"])
        from_folder = datasets.load_dataset(str(out / primitive))  # the folder's README declares the features
        assert from_folder["validation"].num_rows == dataset["validation"].num_rows


def _break_order(solution):
    solution["turns"][0]["order"] = ["t2", "t1"]


def _break_paraphrase(solution):
    solution["turns"][0]["paraphrases"][1] = "Tell me a joke."


@pytest.mark.parametrize(
    "breaks,needle", [(_break_order, "get_order"), (_break_paraphrase, "paraphrases[1]: 'Tell me a joke.'")]
)
def test_unverifiable_solution_stops_generation_unless_skipping_is_allowed(tmp_path, breaks, needle):
    src = tmp_path / "sols"
    shutil.copytree(FIX, src)
    bad = json.loads((src / "paper_figure1.json").read_text())
    bad["id"] = "broken"
    breaks(bad)
    (src / "broken.json").write_text(json.dumps(bad))
    with pytest.raises(UserError) as ei:
        generate(cfg(tmp_path / "out", solutions=[str(src)]))
    assert "broken.json" in str(ei.value) and needle in str(ei.value)
    stats = generate(cfg(tmp_path / "out2", solutions=[str(src)], allow_skip_unverifiable=True))
    assert (
        len(stats["skipped_solutions"]) == 1
        and "broken.json" in stats["skipped_solutions"][0]
        and needle in stats["skipped_solutions"][0]
    )
    card = (tmp_path / "out2" / "README.md").read_text()
    assert "1 solution(s) were skipped" in card and "broken.json" in card


def test_dropped_variants_name_their_solution_file_and_full_reason(tmp_path, monkeypatch):
    real = generate_module.make_variant

    def breaking(sol, rng, vcfg):  # every varied copy of Figure 1 gets a wrong order
        variant = real(sol, rng, vcfg)
        if sol.id == "fs-paper-figure1":
            first_turn = variant.solution.turns[0]
            turns = [
                first_turn.model_copy(update={"order": list(reversed(first_turn.order))}),
                *variant.solution.turns[1:],
            ]
            variant.solution = variant.solution.model_copy(update={"turns": turns})
        return variant

    monkeypatch.setattr(generate_module, "make_variant", breaking)
    stats = generate(
        cfg(tmp_path / "out", allow_undersized=True, max_dropped_fraction=1.0)
    )  # this test reads the record
    fig1 = str(FIX / "paper_figure1.json")
    assert list(stats["variants_dropped"]) == [fig1]
    reasons = stats["variants_dropped"][fig1]
    assert all(r.startswith("turn 0, get_order: expected order [") and "got [" in r for r in reasons), reasons
    card = (tmp_path / "out" / "README.md").read_text()
    assert (
        "did not verify and were discarded" in card
        and "paper_figure1.json" in card
        and "turn 0, get_order: expected order" in card
    )


def test_a_bug_while_replaying_a_variant_raises_instead_of_dropping_it(tmp_path, monkeypatch):
    real = generate_module.verify_solution

    def buggy(sol, kernel=None, **kw):
        if kw.get("slot_values") is not None:  # a varied copy
            raise ZeroDivisionError("kernel bug")
        return real(sol, kernel, **kw)

    monkeypatch.setattr(generate_module, "verify_solution", buggy)
    with pytest.raises(VariantBug) as ei:
        generate(cfg(tmp_path / "out"))
    assert "ZeroDivisionError: kernel bug" in str(ei.value) and ".json: variant 1" in str(ei.value)


def test_undersized_output_fails_unless_allowed(tmp_path, capsys):
    big = dict(SIZES, decompose=100000)
    with pytest.raises(UserError) as ei:
        generate(cfg(tmp_path / "out", sizes=big, max_rounds=2))
    assert "requested sizes not reached within max_rounds=2: decompose " in str(ei.value) and "< 100000" in str(
        ei.value
    )
    stats = generate(cfg(tmp_path / "out2", sizes=big, max_rounds=2, allow_undersized=True))
    assert not stats["primitives"]["decompose"]["reached_requested_size"]
    args = [
        "generate",
        f"data.solutions=[{FIX}]",
        f"data.output_dir={tmp_path / 'cli'}",
        "data.workers=1",
        "data.max_rounds=1",
        "data.sizes={decompose:100000,get_order:1,check_prerequisites:1,match_func:1,match_fill:1}",
    ]
    assert main(args) != 0
    assert "requested sizes not reached" in capsys.readouterr().err
    assert main(args + ["data.allow_undersized=true"]) == 0


def test_contract_valid_rate_is_computed_from_the_written_targets(gen, tmp_path):
    out, stats = gen
    assert stats["contract_valid_rate"] == 1.0
    sols, _ = load_solutions([str(FIX)], False)
    r0, r1 = rows(out, "get_order", "train")[:2]

    # A row's completion is its target's JSON (the row model refuses anything else), so the bad target is the completion too.
    def ex(row, target):
        content = json.dumps(target)
        return Example("get_order", row["solution_id"], row["prompt"], [{"role": "assistant", "content": content}],
                       target, json.dumps(row["prompt"]), (), json.loads(row["input"]))  # fmt: skip

    bad_target = {"ordered_task_ids": ["nope"] + r1["target"]["ordered_task_ids"]}  # not a permutation of the batch
    pools = Pools({(p, s): 10 for p in PRIMITIVE_NAMES for s in ("train", "validation")})
    pools.add(ex(r0, r0["target"]), "train")
    pools.add(ex(r1, bad_target), "train")
    config = cfg(tmp_path / "w", allow_undersized=True)
    st = write_outputs(
        config,
        sols,
        {s: "train" for s in sols},
        pools,
        [],
        {},
        0,
        0,
        generate_module.Counter(),
        0.0,
        out=tmp_path / "w",
    )
    assert st["contract_valid_rate"] == 0.5 and st["primitives"]["get_order"]["train"]["contract_valid_rate"] == 0.5


def test_near_duplicates_mask_the_substituted_slot_values(gen):
    mask = masker(["report.txt", "archive", 42])
    assert (
        mask("Move report.txt into Archive, 7 times")
        == mask("Move report.txt into archive, 12 times")
        == "move <slot> into <slot>, # times"
    )
    assert masker(["budget.csv", "finance"])("Move budget.csv into finance") == mask("Move report.txt into archive")
    _, stats = gen
    for primitive in PRIMITIVE_NAMES:
        info = stats["primitives"][primitive]
        assert 0 <= info["cross_split_near_duplicate_rate"] <= 1 and 0 <= info["train"]["near_duplicate_rate"] <= 1
        # the per-row flag agrees with the split's rate (validation rows whose masked prompt occurs in train)
        rows = [json.loads(x) for x in (gen[0] / primitive / "validation.jsonl").read_text().splitlines() if x.strip()]
        flagged = sum(r["near_duplicate_across_split"] for r in rows)
        assert flagged == round(info["cross_split_near_duplicate_rate"] * len(rows))
    card = (gen[0] / "README.md").read_text()
    assert (
        "near-dup val↔train" in card
        and "Source solutions by domain" in card
        and "Source solutions by pattern tag" in card
    )


def test_get_order_batches_are_never_presented_in_the_target_order(gen):
    out, stats = gen
    for split in ("train", "validation"):
        rs = rows(out, "get_order", split)
        assert rs and all(
            [t["id"] for t in json.loads(r["input"])["tasks"]] != r["target"]["ordered_task_ids"] for r in rs
        )
        assert stats["primitives"]["get_order"][split]["input_order_is_target_rate"] == 0.0


def test_stats_record_the_spec_hashes(gen):
    out, _ = gen
    on_disk = json.loads((out / "stats.json").read_text())
    assert on_disk["spec_hashes"] == {p: SPECS[p].spec_hash for p in PRIMITIVE_NAMES}


def test_a_user_id_built_from_a_name_follows_the_substituted_name():
    import random

    from forethought.data_gen.augment import substitute_entities
    from forethought.kernel.solution_file import load_solution

    sol = load_solution("data_gen/solutions/airline/paper_c4_passenger_name.json")  # uid ethan_nguyen_7360
    changed = 0
    for seed in range(40):
        values = substitute_entities(sol, random.Random(seed))
        first, last = str(values["old_first"]).lower(), str(values["last"]).lower()
        assert values["uid"].startswith(f"{first}_{last}_"), values
        changed += values["uid"] != "ethan_nguyen_7360"
    assert changed > 20  # the names really are substituted, and the id with them


# ------------------------------------------------------- the dataset is one unit (issue 13, finding 2)
def _train_cli(data: Path, tmp_path: Path) -> int:
    return main(["train", "model=tiny", "primitive=all", f"dataset_dir={data}", f"output_dir={tmp_path / 'train'}"])


def test_a_dataset_mixed_from_two_runs_is_refused_by_train_and_validate(gen, tmp_path, capsys):
    # Finding 2: after a killed generate, decompose/train.jsonl came from seed 1 while
    # validation.jsonl and stats.json still came from seed 0, and train accepted it.
    from forethought.training.data import read_split
    from forethought.training.validate import _read_rows

    out, _ = gen
    mixed = tmp_path / "mixed"
    shutil.copytree(out, mixed)
    other = tmp_path / "other"
    generate(cfg(other, seed=1))
    shutil.copy(other / "decompose" / "train.jsonl", mixed / "decompose" / "train.jsonl")
    with pytest.raises(UserError, match="mixes files of different runs") as ei:
        read_split(mixed, "decompose", "train")
    assert ei.value.where == str(mixed / "decompose" / "train.jsonl")
    assert _train_cli(mixed, tmp_path) == 2
    assert "mixes files of different runs" in capsys.readouterr().err
    shutil.copy(other / "get_order" / "validation.jsonl", mixed / "get_order" / "validation.jsonl")
    with pytest.raises(UserError, match="mixes files of different runs"):
        _read_rows(str(mixed), "get_order", None)
    (mixed / "dataset.json").unlink()  # no manifest: nothing says the files belong together
    with pytest.raises(UserError, match="not written as one unit"):
        read_split(mixed, "match_func", "train")


def test_train_and_validation_sharing_a_solution_is_refused(gen, tmp_path):
    from forethought.data_gen.unit import MANIFEST, seal
    from forethought.training.data import read_split

    out, _ = gen
    folder = tmp_path / "d"
    shutil.copytree(out, folder)
    val = (folder / "match_func" / "validation.jsonl").read_text().splitlines()
    with open(folder / "match_func" / "train.jsonl", "a") as train_file:
        train_file.write(val[0] + "\n")  # a held-out solution's example, now also trained on
    with pytest.raises(UserError, match="shares 1 solution"):
        seal(folder, validation_solutions=json.loads((folder / MANIFEST).read_text())["validation_solutions"])
    # A manifest written by hand over the mixed splits: the reader still refuses the row.
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"]["match_func/train.jsonl"] = generate_module.hashlib.sha256(
        (folder / "match_func" / "train.jsonl").read_bytes()
    ).hexdigest()
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="is held out for validation .* but appears in train"):
        read_split(folder, "match_func", "train")


def test_generate_replaces_the_dataset_as_a_whole_and_refuses_a_non_dataset_folder(gen, tmp_path):
    out, _ = gen
    folder = tmp_path / "d"
    shutil.copytree(out, folder)
    (folder / "decompose" / "stray.jsonl").write_text("{}\n")  # a file of no run
    generate(cfg(folder, seed=1))
    assert not (folder / "decompose" / "stray.jsonl").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".d.")]  # no staging folder left behind
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="is not a dataset"):
        generate(cfg(precious))
    assert (precious / "notes.txt").read_text() == "mine"


def _break_figure1_variants(monkeypatch):
    real = generate_module.make_variant

    def breaking(sol, rng, vcfg):  # every varied copy of Figure 1 gets a wrong order
        variant = real(sol, rng, vcfg)
        if sol.id == "fs-paper-figure1":
            first_turn = variant.solution.turns[0]
            variant.solution = variant.solution.model_copy(
                update={
                    "turns": [
                        first_turn.model_copy(update={"order": list(reversed(first_turn.order))}),
                        *variant.solution.turns[1:],
                    ]
                }
            )
        return variant

    monkeypatch.setattr(generate_module, "make_variant", breaking)


def test_too_many_dropped_variants_fail_naming_the_file_and_reason(tmp_path, monkeypatch, capsys):
    _break_figure1_variants(monkeypatch)
    fig1 = str(FIX / "paper_figure1.json")
    with pytest.raises(UserError) as ei:
        generate(cfg(tmp_path / "out", allow_undersized=True))
    error = ei.value
    assert error.where == fig1 and "above data.max_dropped_fraction=0.02" in error.message, str(error)
    assert f"{fig1}: turn 0, get_order: expected order [" in error.message and " × " in error.message
    assert (
        "nothing is written" in error.message and not (tmp_path / "out").exists()
    )  # refused before it is put in place
    # the CLI exits non-zero with the located message; below the threshold it prints the drops and exits 0
    args = [
        "generate",
        f"data.solutions=[{FIX}]",
        f"data.output_dir={tmp_path / 'cli'}",
        "data.workers=1",
        "data.max_rounds=4",
        "data.allow_undersized=true",
        "data.sizes={decompose:40,get_order:12,check_prerequisites:12,match_func:30,match_fill:12}",
    ]
    assert main(args) == 2
    assert "above data.max_dropped_fraction" in capsys.readouterr().err
    assert main(args + ["data.max_dropped_fraction=1.0"]) == 0
    err = capsys.readouterr().err
    assert (
        "varied copies did not verify and were dropped:" in err
        and "paper_figure1.json: turn 0, get_order: expected order" in err
    )


def test_a_corpus_too_small_for_a_validation_split_is_refused_naming_its_domains(tmp_path, capsys):
    from tests.conftest import FIXTURE_SOLUTIONS, TINY_SIZES

    out = tmp_path / "data"
    one = Path(FIXTURE_SOLUTIONS) / "paper_figure1.json"
    assert (
        main(
            [
                "generate",
                f"data.solutions=[{one}]",
                f"data.sizes={TINY_SIZES}",
                "data.workers=1",
                f"data.output_dir={out}",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "too small to hold out a validation split: domain file_system has 1 solution" in err
    assert not out.exists()  # refused before train would have found no validation rows


def test_a_domain_without_slot_values_is_warned_about(tmp_path, capsys, monkeypatch):
    import forethought.data_gen.augment as augment

    monkeypatch.setattr(augment, "slot_values", lambda domain: {})
    from forethought.data_gen.generate import _warn_unvaried_domains
    from forethought.kernel.solution_file import load_solution
    from tests.conftest import FIXTURE_SOLUTIONS

    sol = load_solution(Path(FIXTURE_SOLUTIONS) / "paper_figure1.json")
    assert sol.slots  # the fixture names its entities
    _warn_unvaried_domains({sol.id: sol})
    err = capsys.readouterr().err
    assert "warning: domain file_system: 1 solution(s) declare slots" in err and "not varied" in err


def test_without_target_adds_null_match_func_rows_to_train_only(gen, tmp_path):
    """data.variations.without_target: a match_func decision also written with its tool (and the tool's
    alternatives) off the list, answered null; train rows only: validation rows are those of a dataset without it."""
    out = tmp_path / "data"
    generate(cfg(out, variations={"without_target": 1.0}))

    def decisions(folder):  # (task text, listed tools, wanted tool) of each train row
        got = []
        for row in rows(folder, "match_func", "train"):
            inp, target = json.loads(row["input"]), row["target"]
            got.append((inp["task"]["text"], {t["name"] for t in inp["tools"]}, target["tool_name"], inp))
        return got

    train, before = decisions(out), decisions(gen[0])
    wanted = {text: tool for text, _, tool, _ in train + before if tool}
    made = [d for d in train if d[2] is None and d[0] in wanted and wanted[d[0]] not in d[1]]
    nulls = lambda ds: sum(d[2] is None for d in ds)  # noqa: E731
    assert made and nulls(train) > nulls(before), (nulls(train), nulls(before))
    for _, names, _, inp in made:
        assert names and SPECS["match_func"].check_output(inp, {"tool_name": None}).ok
    for primitive in PRIMITIVE_NAMES:
        assert rows(out, primitive, "validation") == rows(gen[0], primitive, "validation"), primitive


def test_tool_description_adds_match_func_rows_whose_task_is_a_listed_tools_description(gen, tmp_path):
    """data.variations.tool_description: a match_func decision also written with its task replaced by one listed
    tool's own description, answered with that tool; train rows only."""
    out = tmp_path / "data"
    generate(cfg(out, variations={"tool_description": 1.0}))
    made = []
    for row in rows(out, "match_func", "train"):
        inp, target = json.loads(row["input"]), row["target"]
        described = {tool["description"]: tool["name"] for tool in inp["tools"] if tool["description"]}
        if inp["task"]["text"] in described:
            made.append((inp, target))
            assert target["tool_name"] == described[inp["task"]["text"]]
    assert made  # the fixture's varied decisions are few; the profile's data: see docs/data.md
    assert all(
        row["train_only"]
        == (
            json.loads(row["input"])["task"]["text"]
            in {tool["description"] for tool in json.loads(row["input"])["tools"] if tool["description"]}
        )
        for row in rows(out, "match_func", "train")
    )
    assert not any(row["train_only"] for row in rows(out, "match_func", "validation"))
    for inp, target in made:
        assert SPECS["match_func"].check_output(inp, target).ok
    for primitive in PRIMITIVE_NAMES:
        assert rows(out, primitive, "validation") == rows(gen[0], primitive, "validation"), primitive


def test_the_dev_split_leaves_out_the_rows_written_for_training_only(gen, tmp_path):
    """Selection measures what validation measures: dev rows (carved from train solutions) are decisions the
    solutions hold, never a without_target row; those rows of dev solutions are not trained on either."""
    from forethought.data_gen.row import read_rows
    from forethought.training.data import train_and_dev_rows

    out = tmp_path / "data"
    generate(cfg(out, variations={"without_target": 1.0}))
    made = {row.solution_id for row in read_rows(out, "match_func", "train") if row.train_only}
    assert made
    # a carve whose dev solutions have such rows (the fixture's are few: look through the seeds, deterministically)
    for seed in range(64):
        train, dev = train_and_dev_rows(out, "match_func", 0.5, seed=seed)
        dev_solutions = {row.solution_id for row in dev}
        if dev_solutions & made and made - dev_solutions:
            break
    assert dev_solutions & made, "no carve puts a solution with train-only rows in dev"
    assert not any(row.train_only for row in dev)
    assert not {row.solution_id for row in train} & dev_solutions
    assert any(row.train_only for row in train)  # the train solutions' own are trained on


def test_a_held_out_file_fixes_the_validation_solutions_and_every_other_one_trains(gen, tmp_path):
    out, stats = gen
    chosen = sorted(stats["validation_solutions"])
    train_ids = sorted({r["solution_id"] for p in PRIMITIVE_NAMES for r in rows(out, p, "train")})
    # hold out one train solution instead of one chosen one: the file, not the seed's choice, decides
    held = sorted([*chosen[1:], train_ids[0]])
    held_file = tmp_path / "held_out.json"
    held_file.write_text(json.dumps({"format_version": 1, "solutions": held}))
    again = generate(cfg(tmp_path / "a", held_out=str(held_file)))
    assert sorted(again["validation_solutions"]) == held and again["held_out"] == "held_out.json"
    assert {r["solution_id"] for p in PRIMITIVE_NAMES for r in rows(tmp_path / "a", p, "validation")} <= set(held)
    assert chosen[0] in {r["solution_id"] for p in PRIMITIVE_NAMES for r in rows(tmp_path / "a", p, "train")}
    # an earlier dataset's stats.json holds out what that dataset held out
    same = generate(cfg(tmp_path / "b", held_out=str(out / "stats.json")))
    assert sorted(same["validation_solutions"]) == chosen


@pytest.mark.parametrize(
    "content, needle",
    [
        ({"format_version": 1, "solutions": ["no-such-solution"]}, "does not hold (or that did not verify): no-such"),
        ({"format_version": 2, "solutions": ["x"]}, "format_version 2 is not one this version reads"),
        (["x"], "expected"),
    ],
)
def test_a_bad_held_out_file_is_refused_before_anything_is_written(tmp_path, capsys, content, needle):
    from tests.conftest import FIXTURE_SOLUTIONS, TINY_SIZES

    held_file, out = tmp_path / "held.json", tmp_path / "data"
    held_file.write_text(json.dumps(content))
    argv = ["generate", f"data.solutions=[{FIXTURE_SOLUTIONS}]", f"data.sizes={TINY_SIZES}", "data.workers=1"]
    assert main([*argv, f"data.output_dir={out}", f"data.held_out={held_file}"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "held.json" in err and "Traceback" not in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".data.")]


def test_the_shipped_held_out_file_names_solutions_the_shipped_corpus_holds():
    from forethought.config import shipped_path
    from forethought.data_gen.generate import read_held_out
    from forethought.kernel.solution_file import load_solution, solution_files

    held = read_held_out(str(shipped_path("data_gen/held_out.json")))
    ids = {load_solution(f).id for f in solution_files([str(shipped_path("data_gen/solutions"))])}
    assert held and held <= ids


def test_registry_coverage_lists_the_decisions_no_train_row_holds(gen):
    from forethought.data_gen.coverage import registry_coverage
    from forethought.kernel.domains import load_domain

    out, stats = gen
    coverage = stats["registry_coverage"]
    assert coverage == json.loads((out / "stats.json").read_text())["registry_coverage"]
    prerequisites = coverage["prerequisite_decisions"]
    assert 0 < prerequisites["held"] < prerequisites["declared"]  # the fixture corpus covers some, not all
    domain_of = {name: d for d in ("vehicle", "file_system") for name in load_domain(d).tools}
    for row in rows(out, "check_prerequisites", "train"):  # a decision some train row holds is never listed unheld
        inp = json.loads(row["input"])
        decision = f"{domain_of[inp['task']['tool_name']]}: {inp['key'].split('[')[0]} {inp['outcome']}"
        assert decision not in prerequisites["not_held"], decision
    assert "Registry coverage of the train split" in (out / "README.md").read_text()

    class Row:  # one more train row holding a decision the fixture leaves uncovered
        solution_id, target = "extra", None
        input = {"task": {"tool_name": "startEngine"}, "key": "doors_locked", "outcome": "absent"}

    assert "vehicle: doors_locked absent" in prerequisites["not_held"]
    again = registry_coverage(["vehicle", "file_system"], {"check_prerequisites": [Row()]})
    assert "vehicle: doors_locked absent" in again["prerequisite_decisions"]["held_by_one_solution"]
    assert "vehicle: doors_locked absent" not in again["prerequisite_decisions"]["not_held"]
    per_tool = again["prerequisite_decisions_per_tool"]
    assert "vehicle: startEngine doors_locked absent" in per_tool["held_by_one_solution"]
    assert "vehicle: startEngine doors_locked not_met" in per_tool["not_held"]
