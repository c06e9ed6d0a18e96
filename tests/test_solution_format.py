"""Solution files carry a format version (issue 25 part 3; kernel/solution_format.py).

Per-entity prerequisite keys (``order_status[${order}]``) changed what a solution records: a file written before
(``order_status``) then failed verify with "expected met, got met". Now such a file is version 1 (it names none),
read by migrating it in memory with a warning naming each change, and ``forethought migrate`` rewrites it with a
backup. A version newer than the code is refused, a divergence names every field that differs, and ``run`` refuses
prerequisite keys that cannot mean what their tool checks.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from forethought.cli import main
from forethought.data_gen.verify import verify_paths
from forethought.kernel.registry.model import fact_of
from forethought.kernel.solution_file import load_solution, parse_solution, solution_files
from forethought.kernel.solution_format import FORMAT_VERSION
from tests.disk import tree

CORPUS = Path("data_gen/solutions")
TWO_ORDERS = CORPUS / "retail" / "cancel_two_pending_orders.json"
OTHER_LINE = CORPUS / "telecom" / "read_suspended_then_refuel_other_line.json"


def _prerequisite_lists(solution: dict):
    for turn in solution.get("turns", []):
        for task in turn.get("tasks") or []:
            yield task.get("prerequisites") or []
            for inst in task.get("instances") or []:
                if inst.get("prerequisites") is not None:
                    yield inst["prerequisites"]


def as_version_2(solution: dict) -> dict:
    """The solution as it was written before the words: sources tau and S, fill_from tau:/S:, the tag tau_over_s."""
    old = copy.deepcopy(solution)
    old["format_version"] = 2
    letters = {"request": "tau", "scratchpad": "S"}
    for turn in old.get("turns", []):
        for task in turn.get("tasks") or []:
            for bindings in [
                task.get("bindings") or {},
                *[i.get("bindings") or {} for i in task.get("instances") or []],
            ]:
                for binding in bindings.values():
                    binding["source"] = letters.get(binding["source"], binding["source"])
                    ff = binding.get("fill_from") or ""
                    for word, letter in letters.items():
                        if ff.startswith(word + ":"):
                            binding["fill_from"] = letter + ":" + ff[len(word) + 1 :]
    old["tags"] = ["tau_over_s" if x == "request_over_scratchpad" else x for x in old.get("tags", [])]
    return old


def as_version_1(solution: dict) -> dict:
    """The solution as it was written before per-entity keys: no format_version, every key domain-wide (and the
    letters of version 2)."""
    old = as_version_2(solution)
    old.pop("format_version")
    for prereqs in _prerequisite_lists(old):
        for prerequisite in prereqs:
            prerequisite["key"] = fact_of(prerequisite["key"])
    return old


def _keys(solution: dict) -> list[str]:
    return [p["key"] for prereqs in _prerequisite_lists(solution) for p in prereqs]


def test_every_file_of_the_corpus_names_the_current_version():
    files = solution_files([CORPUS, "tests/fixtures/solutions"])
    assert len(files) == 591 and {json.loads(f.read_text())["format_version"] for f in files} == {FORMAT_VERSION}


def test_every_solution_of_the_corpus_written_as_version_1_migrates_back_to_itself():
    """The migration, checked on the corpus itself: each file with a per-entity key, its keys made domain-wide (as
    the file was before), is read back with exactly the keys it has now, slots and all."""
    migrated = 0
    for path in solution_files([CORPUS]):
        solution = json.loads(path.read_text())
        old = as_version_1(solution)
        if _keys(old) == _keys(solution):
            continue
        sol = parse_solution(old, str(path))
        assert _keys(sol.model_dump(mode="json")) == _keys(solution), path
        assert sol.format_notes and "format_version 1 read as 3" in sol.format_notes[0], path
        migrated += 1
    assert migrated >= 100


def test_every_file_of_the_corpus_written_as_version_2_migrates_back_to_itself():
    """Version 3 names the binding sources in words: every file, written with the letters (tau, S) as it was, is read
    back exactly as it is now, with a note naming the change."""
    for path in solution_files([CORPUS, "tests/fixtures/solutions"]):
        solution = json.loads(path.read_text())
        old = as_version_2(solution)
        sol = parse_solution(old, str(path))
        assert sol.model_dump(mode="json", exclude_none=True) == parse_solution(solution, str(path)).model_dump(
            mode="json", exclude_none=True
        ), path
        if old != {**solution, "format_version": 2}:
            assert sol.format_notes and "format_version 2 read as 3 (binding sources in words" in sol.format_notes[0], (
                path
            )


def test_verify_reads_a_version_1_file_with_a_warning_naming_each_change(tmp_path, capsys):
    # Issue 25: this file failed with "expected met, got met" (the differing key was not shown).
    path = tmp_path / "old.json"
    path.write_text(json.dumps(as_version_1(json.loads(TWO_ORDERS.read_text())), indent=2))
    assert main(["verify", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"WARN {path}: format_version 1 read as 3 (per-entity prerequisite keys" in err
    assert "turn 0, task t1, prerequisite 1: 'order_status' -> 'order_status[${o1}]'" in err
    assert "turn 0, task t3, prerequisite 1: 'order_status' -> 'order_status[${o2}]'" in err
    assert f"rewrite the file with `forethought migrate {path}`" in err


def test_a_version_newer_than_the_code_is_refused_naming_it(tmp_path, capsys):
    solution = json.loads(TWO_ORDERS.read_text())
    path = tmp_path / "new.json"
    path.write_text(json.dumps({**solution, "format_version": FORMAT_VERSION + 1}))
    assert main(["verify", str(path)]) == 2
    assert (
        f"format_version {FORMAT_VERSION + 1} is newer than this forethought reads (up to {FORMAT_VERSION})"
        in capsys.readouterr().err
    )


def test_migrate_rewrites_older_files_with_a_backup_and_leaves_current_ones(tmp_path, capsys):
    old = as_version_1(json.loads(OTHER_LINE.read_text()))
    (tmp_path / "a").mkdir()
    v1 = tmp_path / "a" / "old.json"
    v1.write_text(json.dumps(old, indent=1))
    original = v1.read_bytes()
    current = tmp_path / "a" / "current.json"
    current.write_bytes(TWO_ORDERS.read_bytes())
    assert main(["migrate", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert f"migrated {v1}: format_version 1 -> 3" in out and f"current  {current} (format_version 3)" in out
    assert "'line_status' -> 'line_status[${good}]'" in out
    assert (tmp_path / "a" / "old.json.v1.bak").read_bytes() == original
    assert current.read_bytes() == TWO_ORDERS.read_bytes()
    assert json.loads(v1.read_text()) == json.loads(OTHER_LINE.read_text())  # the keys it has today, in the corpus
    [result] = verify_paths([v1])
    assert result.ok and not [w for w in result.warnings if "format_version" in w]
    assert main(["migrate", str(v1)]) == 0 and "current  " in capsys.readouterr().out


def test_migrate_refuses_before_writing_anything(tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(as_version_1(json.loads(TWO_ORDERS.read_text()))))
    second.write_text(json.dumps(as_version_1(json.loads(OTHER_LINE.read_text()))))
    (tmp_path / "b.json.v1.bak").write_text("an earlier original")
    before = tree(tmp_path)
    assert (
        main(["migrate", str(first), str(second)]) == 2
    )  # b.json's backup would be overwritten: neither file is touched
    assert "a backup is already there" in capsys.readouterr().err
    assert tree(tmp_path) == before


def test_migrate_writes_nothing_when_an_annotation_cannot_be_migrated(tmp_path, capsys, monkeypatch):
    """A file migrate can only partly rewrite would still fail verify: every file is left as it was, and the message
    names what must be corrected by hand (the replay could not find the entity a key is checked for)."""
    import forethought.data_gen.migrate as migrate_cli

    real = migrate_cli.migrate

    def partly(data, where):
        new, changed, _ = real(data, where)
        return (
            new,
            changed,
            ["turn 1, task t1, prerequisite 1 ('line_status': the kernel did not check it for one entity)"],
        )

    monkeypatch.setattr(migrate_cli, "migrate", partly)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(as_version_1(json.loads(TWO_ORDERS.read_text()))))
    second.write_text(json.dumps(as_version_1(json.loads(OTHER_LINE.read_text()))))
    before = tree(tmp_path)
    assert main(["migrate", str(first), str(second)]) == 2
    err = capsys.readouterr().err
    assert "cannot be migrated automatically, so nothing was written" in err and "'line_status'" in err
    assert tree(tmp_path) == before


def test_a_divergence_names_every_field_that_differs(tmp_path):
    solution = json.loads(OTHER_LINE.read_text())
    prereq = solution["turns"][1]["tasks"][0]["prerequisites"][1]
    assert prereq["key"] == "line_status[${good}]"
    prereq["key"] = "line_status[${bad}]"  # well formed, but another line's entry
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(solution))
    [result] = verify_paths([path])
    assert not result.ok
    assert (
        "check_prerequisites/line_status[L-9009]: key: expected 'line_status[L-9009]', got 'line_status[L-4096]'"
        in result.error
    )
    assert (
        "outcome: expected" not in result.error
    )  # the outcome and recheck agree: only the fields that differ are named


@pytest.mark.parametrize(("key", "needle"), [
    ("line_status[${good}", "'line_status[L-4096' is not a prerequisite key"),
    ("line_status]", "'line_status]' is not a prerequisite key"),
    ("line_status", "'line_status' names no entity, but refuel_data checks line_status per line_id"),
    ("customer_identified[${good}]", "'customer_identified[L-4096]' names an entity, but refuel_data checks customer_identified once"),
    ("roaming", "'roaming' is not a prerequisite of refuel_data"),
])  # fmt: skip
def test_run_refuses_a_malformed_per_entity_key_and_writes_nothing(key, needle, tmp_path, capsys):
    # Issue 25: run accepted these (verify flagged them); with the oracle backend it even ran them.
    solution = json.loads(OTHER_LINE.read_text())
    index = 0 if key.startswith("customer") else 1
    solution["turns"][1]["tasks"][0]["prerequisites"][index]["key"] = key
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(solution))
    before = tree(tmp_path)
    assert main(["run", str(path), f"output_dir={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err
    assert needle in err.replace("${good}", "L-4096"), err
    assert tree(tmp_path) == before


def test_load_solution_keeps_no_note_for_a_current_file():
    assert load_solution(OTHER_LINE).format_notes == []


# ------------------------------------------------------------------ the other versioned files
@pytest.mark.parametrize(
    ("version", "remedy"), [(0, "regenerate the dataset with forethought generate"), (2, "upgrade forethought")]
)
def test_a_dataset_of_another_format_is_refused_naming_it(generated_data, tmp_path, capsys, version, remedy):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(generated_data, data)
    manifest = json.loads((data / "dataset.json").read_text())
    (data / "dataset.json").write_text(json.dumps({**manifest, "format": version}))
    assert (
        main(["train", "primitive=match_fill", "model=tiny", f"dataset_dir={data}", f"output_dir={tmp_path / 'out'}"])
        == 2
    )
    err = capsys.readouterr().err
    assert f"field 'format' is {version}, not the dataset format this forethought reads (1): {remedy}" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("version", "remedy"), [(3, "repackage the adapters with this forethought"), (6, "upgrade forethought")]
)
def test_a_bundle_of_another_format_is_refused_naming_it(tiny_pipeline, tmp_path, version, remedy):
    import shutil

    from forethought.bundle.manifest import BundleError, load_bundle
    from forethought.kernel.specs import spec_hashes

    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_pipeline / "bundle", bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    (bundle / "manifest.json").write_text(json.dumps({**manifest, "format_version": version}))
    with pytest.raises(
        BundleError, match=f"format_version {version} is not one this forethought reads \\(4, 5\\): {remedy}"
    ):
        load_bundle(bundle, spec_hashes(), allow_smoke=True)


@pytest.mark.parametrize("data", [
    {"format_version": 2, "turns": ["x"]},
    {"format_version": 2, "turns": 5},
    {"format_version": 2, "turns": [{"tasks": ["x"]}]},
    {"format_version": 2, "turns": [{"tasks": [{"instances": ["x"], "bindings": {"a": {"source": ["x"]}}}]}], "tags": [["x"]]},
    {"format_version": 1, "turns": ["x"]},
])  # fmt: skip
def test_a_malformed_older_file_is_located_not_a_crash_in_its_migration(data, tmp_path, capsys):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    before = tree(tmp_path)
    for command in ("verify", "migrate"):
        assert main([command, str(path)]) == 2
        err = capsys.readouterr()
        assert "Traceback" not in err.err and "internal error" not in err.err
    assert tree(tmp_path) == before
