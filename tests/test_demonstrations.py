"""Retrieved demonstrations (kernel/specs/demonstrations.py): one retrieval for generate and the kernel, a store that
never holds a dev or validation solution, a row never shown its own solution, and the spec hash covering it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forethought.cli import main
from forethought.data_gen.generate import DEMONSTRATIONS_FILE
from forethought.data_gen.row import dev_solutions, read_rows
from forethought.data_gen.verify import verify_solution
from forethought.errors import UserError
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.solution_file import load_solution
from forethought.kernel.specs import (
    MATCH_FUNC,
    SPECS,
    DemonstrationStore,
    MatchFuncInput,
    TaskRef,
    ToolBrief,
    active_store,
    set_stores,
    using_stores,
)
from forethought.training.data import dataset_stores

from .conftest import FIXTURE_SOLUTIONS, TINY_GENERATE, sizes_override

STORE = DemonstrationStore(
    "match_func",
    2,
    [
        ("s1", "List the files here", "ls"),
        ("s1", "Show the content of notes.txt", "cat"),
        ("s2", "List all files, hidden ones too", "ls"),
        ("s2", "Print the file notes.txt", "cat"),
        ("s3", "Count the lines of notes.txt", "wc"),
    ],
)
STORE_DECISIONS = [(d.solution_id, d.text, d.answer) for d in STORE.decisions]


def test_nearest_shows_one_decision_per_listed_tool_and_never_the_excluded_solution():
    got = STORE.nearest("Show the lines of notes.txt", ["cat", "wc", "ls"])
    assert [d.tool_name for d in got] == ["cat", "wc"]  # k = 2, one per tool, nearest first
    assert got[0].task == "Show the content of notes.txt"
    # only tools this prompt lists; the excluded solution's decisions never
    assert [d.tool_name for d in STORE.nearest("List the lines of notes.txt", ["ls", "cat"])] == ["cat", "ls"]
    assert all(
        d.task not in {"List the files here", "Show the content of notes.txt"}
        for d in STORE.nearest("Show the lines of notes.txt", ["cat", "wc", "ls"], exclude="s1")
    )
    # no shared word, or no listed tool any stored decision names (the user's own tools): nothing to show
    assert STORE.nearest("Book a table for two", ["cat", "ls"]) == []
    assert STORE.nearest("Show notes.txt", ["book_table"]) == []


def test_a_store_file_round_trips_and_a_bad_one_is_a_located_error(tmp_path):
    path = tmp_path / "store.jsonl"
    path.write_text(STORE.to_text())
    again = DemonstrationStore.read(path)
    assert again.digest() == STORE.digest() and again.k == 2 and len(again.decisions) == 5
    path.write_text(STORE.to_text().replace('"format_version": 1', '"format_version": 9'))
    with pytest.raises(UserError, match="format_version 9 is not the one this forethought reads") as ei:
        DemonstrationStore.read(path)
    assert "forethought generate" in ei.value.message and ei.value.where == str(path)
    path.write_text(STORE.to_text() + '{"solution_id": "s9"}\n')
    with pytest.raises(UserError) as ei:
        DemonstrationStore.read(path)
    assert ei.value.where == f"{path}:7"


def test_the_spec_hash_covers_the_demonstrations_and_is_unchanged_without_them():
    before = {name: spec.spec_hash for name, spec in SPECS.items()}
    with using_stores([STORE]):
        on = {name: spec.spec_hash for name, spec in SPECS.items()}
        rendering = MATCH_FUNC.golden_rendering()
    with using_stores([DemonstrationStore("match_func", 3, STORE_DECISIONS)]):
        other_k = MATCH_FUNC.spec_hash
    assert on["match_func"] != before["match_func"] and other_k not in {on["match_func"], before["match_func"]}
    assert {n: h for n, h in on.items() if n != "match_func"} == {n: h for n, h in before.items() if n != "match_func"}
    assert "Similar tasks:\\n- " in rendering  # the golden inputs shown their (golden) neighbours
    assert {name: spec.spec_hash for name, spec in SPECS.items()} == before and active_store("match_func") is None


def test_the_spec_hash_covers_the_words_the_overlap_leaves_out(monkeypatch):
    from forethought.kernel.specs import demonstrations

    with using_stores([STORE]):
        on = MATCH_FUNC.compute_spec_hash()
        monkeypatch.setattr(demonstrations, "STOP_WORDS", demonstrations.STOP_WORDS - {"the"})
        assert MATCH_FUNC.compute_spec_hash() != on  # another retrieval: an adapter trained with the first refused


def test_only_match_func_retrieves_since_only_its_kernel_step_does():
    """kernel/plan_steps.py retrieves for match_func; generate for every spec with a retrieval: a second retrieving
    spec would be trained with demonstrations and served without them until its kernel step retrieves too."""
    assert [name for name, spec in SPECS.items() if spec.retrieval is not None] == ["match_func"]


def test_a_task_of_the_users_own_tools_is_shown_none():
    inp = MatchFuncInput(task=TaskRef(id="t1", text="Book a table for two"), tools=[ToolBrief(name="book_table")])
    assert "Similar tasks" not in MATCH_FUNC.user_text(MATCH_FUNC.demonstrated(inp))  # no store: as before
    with using_stores([STORE]):
        shown = MATCH_FUNC.demonstrated(inp)
    assert shown.similar_tasks == []
    assert MATCH_FUNC.user_text(shown).splitlines()[:3] == ["Task: Book a table for two", "Similar tasks:", "(none)"]


def test_the_kernel_retrieves_from_the_active_store():
    """The kernel's match_func inputs carry the store's nearest decisions (plan_steps.topo_sort), and none without one."""
    sol = load_solution(FIXTURE_SOLUTIONS / "paper_figure1.json")
    seen: list = []

    class Recording:
        def __init__(self, inner):
            self.inner, self.name = inner, "recording"

        def complete(self, requests):
            seen.extend(r.input for r in requests if r.primitive == "match_func")
            return self.inner.complete(requests)

    store = DemonstrationStore("match_func", 3, [("other", "Create a folder named data", "mkdir")])
    with using_stores([store]):
        verify_solution(sol, Kernel(KernelConfig()), wrap_backend=Recording)
    assert seen and all(inp.similar_tasks is not None for inp in seen)
    assert any(d.tool_name == "mkdir" for inp in seen for d in inp.similar_tasks)
    seen.clear()
    verify_solution(sol, Kernel(KernelConfig()), wrap_backend=Recording)
    assert seen and all(inp.similar_tasks is None for inp in seen)


@pytest.fixture(scope="module")
def demonstrated_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demonstrated") / "data"
    sizes = sizes_override(decompose=24, match_func=24)
    args = ["generate", *TINY_GENERATE, f"data.sizes={sizes}", f"data.output_dir={out}"]
    assert main([*args, "data.demonstrations={k:3,dev_fraction:0.3,dev_seed:0}"]) == 0
    return out


def test_generated_rows_show_only_other_train_solutions_decisions(demonstrated_data):
    stats = json.loads((demonstrated_data / "stats.json").read_text())
    entry = stats["demonstrations"]["match_func"]
    assert entry["file"] == f"match_func/{DEMONSTRATIONS_FILE}" and (entry["dev_fraction"], entry["dev_seed"]) == (
        0.3,
        0,
    )
    (store,) = dataset_stores(demonstrated_data)
    assert (
        f"{len(store.decisions)} decisions of the train solutions outside the dev"
        in (demonstrated_data / "README.md").read_text()
    )  # the dataset card says what the prompts show
    train = read_rows(demonstrated_data, "match_func", "train")
    validation = read_rows(demonstrated_data, "match_func", "validation")
    dev = dev_solutions({r.solution_id for r in train}, 0.3, 0)
    stored = {d.solution_id for d in store.decisions}
    # the store: train solutions only, none of the dev split selection reads, none of validation's
    assert dev and stored and not stored & dev and not stored & {r.solution_id for r in validation}
    assert stored <= {r.solution_id for r in train}
    with using_stores([store]):
        assert stats["spec_hashes"]["match_func"] == MATCH_FUNC.spec_hash
        for row in train + validation:
            inp = MatchFuncInput.model_validate_json(row.input)
            # the one retrieval: what the kernel would show, less the row's own solution
            assert inp.similar_tasks == store.nearest(inp.task.text, [t.name for t in inp.tools], row.solution_id)
            own = {(d.text, d.answer) for d in store.decisions if d.solution_id == row.solution_id}
            others = {(d.text, d.answer) for d in store.decisions if d.solution_id != row.solution_id}
            assert all((d.task, d.tool_name) in others for d in inp.similar_tasks)
            assert not {(d.task, d.tool_name) for d in inp.similar_tasks} & (own - others)
            assert row.prompt[1].content == MATCH_FUNC.user_text(inp)  # the prompt shows them
    assert any(MatchFuncInput.model_validate_json(r.input).similar_tasks for r in train)


def test_training_refuses_data_cut_for_another_dev_split(demonstrated_data, tmp_path, capsys):
    out = tmp_path / "train"
    rc = main(
        [
            "train",
            "primitive=match_func",
            "model=tiny",
            "train=quick",
            "train.dev_fraction=0.1",
            f"dataset_dir={demonstrated_data}",
            f"output_dir={out}",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "leave out the dev split of dev_fraction=0.3 seed=0" in err and "train.dev_fraction=0.3" in err
    assert str(demonstrated_data / "stats.json") in err and not out.exists()


def test_a_dev_split_carved_from_some_rows_is_checked_as_carved(demonstrated_data):
    """With train.max_train_examples, dev is carved from the first rows: when none of theirs is a dev solution the
    split falls back to one the store shows, and training would select with its neighbours' rows: refused."""
    from forethought.data_gen.row import is_dev_solution
    from forethought.training.data import check_dev_split

    rows = read_rows(demonstrated_data, "match_func", "train")
    check_dev_split(demonstrated_data, ["match_func"], 0.3, 0)  # all the rows: the store's own split
    first = next(
        n
        for n in range(2, len(rows))
        if len({r.solution_id for r in rows[:n]}) >= 2
        and not any(is_dev_solution(r.solution_id, 0.3, 0) for r in rows[:n])
    )
    with pytest.raises(UserError, match="holds solutions whose decisions the demonstrations store shows"):
        check_dev_split(demonstrated_data, ["match_func"], 0.3, 0, limit=first)


def test_a_store_edited_after_generate_is_refused(demonstrated_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(demonstrated_data, data)
    path = data / "match_func" / DEMONSTRATIONS_FILE
    path.write_text(path.read_text().replace('"k": 3', '"k": 4'))
    with pytest.raises(UserError):
        dataset_stores(data)


def test_the_bundle_carries_the_store_and_the_kernel_loads_it(tmp_path):
    """generate -> base -> train -> validate -> package with demonstrations (the smallest such run): the bundle ships
    the store the gates' prompts retrieved from, the hf backend retrieves from it, an edited store is refused."""
    from forethought.bundle.manifest import BundleError, load_bundle
    from forethought.kernel.backends.hf import HFBackend
    from forethought.kernel.specs import bundle_stores, spec_hashes

    from .conftest import tiny_pipeline_args

    run = tmp_path / "run"
    args = tiny_pipeline_args(run) + ["stages=[generate,base,train,validate,package]"]
    at = next(i for i, a in enumerate(args) if a.startswith("overrides.generate="))
    args[at] = args[at][:-1] + ',"data.demonstrations={k:2,dev_fraction:0.0}"]'  # train=quick carves no dev split
    at = next(i for i, a in enumerate(args) if a.startswith("overrides.validate="))
    args[at] = (
        'overrides.validate=["max_examples=1","max_new_tokens=4","base_comparison=false","compare_decoding=false"]'
    )
    assert main(args) == 0
    bundle = run / "bundle"
    manifest = json.loads((bundle / "manifest.json").read_text())
    gates = json.loads((bundle / "gates.json").read_text())
    (store,) = dataset_stores(run / "data")
    assert manifest["demonstrations"]["match_func"]["path"] == "demonstrations/match_func.jsonl"
    assert manifest["format_version"] == 5  # a reader from before demonstrations says "upgrade", not a field error
    assert gates["demonstrations"] == {"match_func": store.digest()}
    assert (bundle / "demonstrations" / "match_func.jsonl").read_text() == store.to_text()
    set_stores([])  # a fresh process: no store active
    with pytest.raises(BundleError, match="prompts retrieve demonstrations"):  # said plainly, with what to do
        load_bundle(bundle, spec_hashes(), allow_smoke=True)
    assert [s.digest() for s in bundle_stores(bundle)] == [store.digest()]
    HFBackend.from_bundle(bundle, allow_smoke=True)
    assert active_store("match_func").digest() == store.digest()  # the kernel's prompts retrieve from it
    # an export carries the store beside the weights, and its card says how a server's kernel must be set
    out = tmp_path / "export"
    assert main(["export", f"bundle={bundle}", f"output_dir={out}", "allow_smoke=true"]) == 0
    marker = json.loads((out / "export.json").read_text())
    assert (out / "match_func" / "demonstrations.jsonl").read_text() == store.to_text()
    assert marker["demonstrations"]["match_func"]["path"] == "match_func/demonstrations.jsonl"
    assert marker["tool_rendering"] == manifest["tool_rendering"] and set(marker["demonstrations"]) == {"match_func"}
    card = (out / "match_func" / "README.md").read_text()
    assert "backend.demonstrations={match_func: <this folder>/demonstrations.jsonl}" in card
    assert "demonstrations" not in (out / "decompose" / "README.md").read_text().split("## Serving")[1]
    path = bundle / "demonstrations" / "match_func.jsonl"
    path.write_text(path.read_text().replace('"k": 2', '"k": 3'))
    with pytest.raises(BundleError, match="the demonstrations store was modified"):
        HFBackend.from_bundle(bundle, allow_smoke=True)


def test_a_pipeline_whose_store_and_dev_split_differ_is_refused_before_it_runs(tmp_path):
    from forethought.config import ConfigError, compose_and_validate
    from forethought.pipeline import PipelineConfig, build

    def pipeline(fraction: float):
        over = f"overrides.generate=['data.demonstrations={{k:3,dev_fraction:{fraction}}}']"
        return compose_and_validate("pipeline", ["profile=converge", f"run_dir={tmp_path}", over], PipelineConfig)[1]

    assert build(pipeline(0.2)).stages["generate"].config.data.demonstrations.k == 3  # the converge split: 0.2
    with pytest.raises(ConfigError) as ei:
        build(pipeline(0.1))
    assert "leaves out the dev split dev_fraction=0.1" in str(ei.value) and "carves dev_fraction=0.2" in str(ei.value)
    assert not any(tmp_path.iterdir())  # nothing ran


def test_the_openai_backend_retrieves_from_the_store_it_is_given(tmp_path, monkeypatch):
    """A served adapter's prompts retrieve as its bundle's did: backend.demonstrations names the store file."""
    from forethought.kernel.backends.factory import OpenAIBackendConfig, make_model_backend

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    path = tmp_path / "match_func.jsonl"
    path.write_text(STORE.to_text())
    make_model_backend(OpenAIBackendConfig(base_url="http://127.0.0.1:9/v1", demonstrations={"match_func": str(path)}))
    assert active_store("match_func").digest() == STORE.digest()
    with pytest.raises(UserError, match="the store is 'match_func'") as ei:
        make_model_backend(
            OpenAIBackendConfig(base_url="http://127.0.0.1:9/v1", demonstrations={"match_fill": str(path)})
        )
    assert ei.value.where == str(path)


def test_the_openai_backend_renders_as_the_bundle_it_names(tmp_path, monkeypatch):
    """backend.bundle: the tool rendering and the stores from the served bundle's manifest (digests checked), and
    a configuration that says otherwise refused, so a served adapter is never prompted as it was not trained."""
    from forethought.bundle.manifest import MANIFEST, sha256_file
    from forethought.kernel.backends.factory import OpenAIBackendConfig, make_model_backend
    from forethought.kernel.specs import active_tool_rendering, set_tool_rendering

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    bundle = tmp_path / "bundle"
    (bundle / "demonstrations").mkdir(parents=True)
    store = bundle / "demonstrations" / "match_func.jsonl"
    store.write_text(STORE.to_text())
    # what the backend reads of a manifest (the manifest's own schema is tests/test_validate_package.py's)
    manifest = {
        "tool_rendering": "valued",
        "demonstrations": {"match_func": {"path": "demonstrations/match_func.jsonl", "sha256": sha256_file(store)}},
    }
    monkeypatch.setattr("forethought.bundle.manifest._parse_manifest", lambda path: manifest)
    (bundle / MANIFEST).write_text("{}")
    url = "http://127.0.0.1:9/v1"
    try:
        make_model_backend(OpenAIBackendConfig(base_url=url, bundle=str(bundle)))
        assert active_tool_rendering() == "valued" and active_store("match_func").digest() == STORE.digest()
        # adapters trained under this code's specs are served; one trained under another spec is refused
        manifest["primitives"] = {"decompose": {"spec_hash": SPECS["decompose"].spec_hash}}
        make_model_backend(OpenAIBackendConfig(base_url=url, bundle=str(bundle)))
        manifest["primitives"] = {"decompose": {"spec_hash": "0" * 16}}
        with pytest.raises(UserError, match="adapters of decompose were trained on prompts of another spec"):
            make_model_backend(OpenAIBackendConfig(base_url=url, bundle=str(bundle)))
        del manifest["primitives"]
        with pytest.raises(UserError, match="trained with tool_rendering=valued, not full") as ei:
            make_model_backend(OpenAIBackendConfig(base_url=url, bundle=str(bundle), tool_rendering="full"))
        assert ei.value.where == "backend.tool_rendering"
        with pytest.raises(UserError, match="leave backend.demonstrations out"):
            make_model_backend(
                OpenAIBackendConfig(base_url=url, bundle=str(bundle), demonstrations={"match_func": str(store)})
            )
        store.write_text(STORE.to_text().replace('"k": 2', '"k": 3'))
        with pytest.raises(UserError, match="the demonstrations store was modified"):
            make_model_backend(OpenAIBackendConfig(base_url=url, bundle=str(bundle)))
    finally:
        set_tool_rendering("full")


def test_the_without_demonstrations_report_refuses_data_that_retrieves_none(generated_data, tmp_path, capsys):
    """scripts/match_func_without_demonstrations.py (docs/training.md, "Recorded run #9") compares prompts shown their
    demonstrations with prompts shown none: on data without a store there is nothing to compare, said, exit 2."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "match_func_without_demonstrations.py"
    spec = importlib.util.spec_from_file_location("match_func_without_demonstrations", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--dataset-dir", str(generated_data), "--train-dir", str(tmp_path / "none")]) == 2
    assert "its match_func prompts retrieve no demonstrations" in capsys.readouterr().err


def test_withheld_demonstrations_add_train_rows_shown_none(demonstrated_data, tmp_path):
    """data.demonstrations.withheld: a share of train rows also written showing "(none)" (what every prompt over a
    user's own tools shows), answered the same, train-only (never a validation row, never a dev row, never stored)."""
    from forethought.training.data import train_and_dev_rows

    out = tmp_path / "data"
    sizes = sizes_override(decompose=24, match_func=24)
    args = ["generate", *TINY_GENERATE, f"data.sizes={sizes}", f"data.output_dir={out}"]
    assert main([*args, "data.demonstrations={k:3,dev_fraction:0.3,dev_seed:0,withheld:0.5}"]) == 0
    plain = {r.id: r for r in read_rows(demonstrated_data, "match_func", "train")}
    rows = read_rows(out, "match_func", "train")
    withheld = [r for r in rows if r.train_only and MatchFuncInput.model_validate_json(r.input).similar_tasks == []]
    assert withheld and {r.id for r in rows} - {r.id for r in withheld} == set(plain)  # the other rows unchanged
    assert all("Similar tasks:\n(none)" in r.prompt[1].content for r in withheld)
    for row in withheld:  # the same decision as its source row, its demonstrations withheld
        source = [p for p in plain.values() if p.completion == row.completion and p.solution_id == row.solution_id]
        assert any(
            MatchFuncInput.model_validate_json(p.input).model_copy(update={"similar_tasks": []})
            == MatchFuncInput.model_validate_json(row.input)
            for p in source
        )
    assert not any(r.train_only for r in read_rows(out, "match_func", "validation"))
    (store,) = dataset_stores(out)
    assert [d.text for d in store.decisions] == [d.text for d in dataset_stores(demonstrated_data)[0].decisions]
    _, dev = train_and_dev_rows(out, "match_func", 0.3, 0)
    assert not any(r.train_only for r in dev)
    assert json.loads((out / "stats.json").read_text())["variation_ops"]["without_demonstrations"] == len(withheld)
