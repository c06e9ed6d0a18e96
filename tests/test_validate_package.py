"""Gates, bundles and loading them in the kernel, on a tiny CPU run (real trl training, real files)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forethought.bundle.manifest import BundleError, load_bundle
from forethought.cli import main
from forethought.config import ConfigError, compose_and_validate
from forethought.kernel.specs import PRIMITIVE_NAMES, SPECS, spec_hashes
from forethought.training.package import PackageConfig
from forethought.training.validate import ValidateConfig, score

FIX = Path(__file__).parent / "fixtures" / "solutions"


@pytest.fixture(scope="module")
def tiny_run(tiny_pipeline):
    """generate -> train -> validate -> package, run by the tiny pipeline (tests/conftest.py)."""
    return tiny_pipeline


def _rows(spec, outputs):
    from forethought.data_gen.row import DatasetRow
    from forethought.kernel.specs import MatchFuncInput, TaskRef, ToolBrief

    inp = MatchFuncInput(task=TaskRef(id="t1", text="list files"), tools=[ToolBrief(name="ls"), ToolBrief(name="cd")])
    rows = [
        DatasetRow(
            id=str(i),
            solution_id="s",
            primitive=spec.name,
            prompt=spec.messages(inp),
            completion=[{"role": "assistant", "content": '{"tool_name": "ls"}'}],
            target={"tool_name": "ls"},
            input=inp.model_dump_json(),
            near_duplicate_across_split=False,
        )
        for i in range(len(outputs))
    ]
    return rows, outputs


def test_gate_scoring_on_controlled_outputs():
    spec = SPECS["match_func"]
    rows, texts = _rows(
        spec, ['{"tool_name": "ls"}', '{"tool_name":"ls"}', '{"tool_name": "cd"}', '{"tool_name": "rm"}', "not json"]
    )
    report = score(spec, rows, texts)
    assert (report["n"], report["exact_match"], report["parse_rate"], report["contract_valid_rate"]) == (
        5,
        0.4,
        0.8,
        0.6,
    )
    kinds = {f["kind"]: f["count"] for f in report["failures"]}
    assert kinds == {"mismatch": 1, "contract:tool_registered": 1, "unparseable": 1}
    assert report["failures"][0]["examples"][0]["target"] == '{"tool_name": "ls"}'


def test_failed_gates_exit_non_zero(tiny_run, tmp_path):
    rc = main(
        [
            "validate",
            f"train_dir={tiny_run / 'train'}",
            f"dataset_dir={tiny_run / 'data'}",
            f"output_dir={tmp_path}",
            "max_examples=2",
            "max_new_tokens=4",
            "base_comparison=false",
        ]
    )
    assert rc == 1  # tiny adapters cannot pass the real thresholds


def test_validate_refuses_data_other_than_the_adapters_were_trained_on(tiny_run, tmp_path, capsys):
    """Data regenerated after training (another split, other demonstrations) could hold, as validation rows, rows an
    adapter trained on: validate measures only on the train split each adapter recorded, and writes nothing else."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(tiny_run / "data", data)
    train = data / "match_func" / "train.jsonl"
    train.write_text("".join(train.read_text().splitlines(keepends=True)[:-1]))  # one row fewer
    out = tmp_path / "validate"
    args = ["validate", f"train_dir={tiny_run / 'train'}", f"dataset_dir={data}", f"output_dir={out}"]
    assert main([*args, "max_examples=2", "max_new_tokens=4", "base_comparison=false"]) == 2
    err = capsys.readouterr().err
    assert "adapter 'match_func' was trained on another train split than" in err and str(train) in err
    assert str(tiny_run / "train" / "match_func" / "run_state.json") in err and not out.exists()


def test_validate_writes_table5_report_and_gate_verdicts(tiny_run):
    gates = json.loads((tiny_run / "validate" / "gates.json").read_text())
    assert set(gates["primitives"]) == set(PRIMITIVE_NAMES) and gates["passed"] is False
    for primitive, gate in gates["primitives"].items():
        assert gate["n"] >= 1 and gate["passed"] == (gate["exact_match"] >= gate["threshold"])
        assert {"exact_match", "contract_valid_rate", "parse_rate", "base_exact_match", "threshold", "failures"} <= set(
            gate
        )
        assert gate["spec_hash"] == SPECS[primitive].spec_hash
        # the gate's decoding, the other decoding, and the rows with no near-duplicate in train
        assert gate["decoding"] == "constrained" and {
            "exact_match_free",
            "exact_match_constrained",
            "exact_match_no_near_duplicate",
        } <= set(gate)
        assert gate["exact_match_constrained"] == gate["exact_match"] and 0 <= gate["n_no_near_duplicate"] <= gate["n"]
        assert 0 <= gate["base_exact_match_free"] <= 1  # the base decoded the other way too, like for like
    assert gates["decoding"] == dict.fromkeys(PRIMITIVE_NAMES, "constrained") and gates["tool_rendering"] == "full"
    md = (tiny_run / "validate" / "gates.md").read_text()
    assert (
        "| Primitive | n | Decoding | Base EM | Tuned EM | Tuned EM, no near-dup (n) | Tuned EM, other decoding | Base EM, other decoding |"
        in md
    )
    assert "Weighted avg." in md
    assert (tiny_run / "validate" / "gates.png").stat().st_size > 1000


@pytest.fixture()
def perfect_decoder(generated_data, monkeypatch):
    """validate with a decoder that answers every validation prompt with its target (no model is loaded).

    Returns the set of (primitive, row index) pairs to answer wrongly instead.
    """
    import forethought.kernel.backends.hf as hf
    import forethought.training.artifacts as artifacts

    answers = {}
    for primitive in PRIMITIVE_NAMES:
        rows = [
            json.loads(x)
            for x in (generated_data / primitive / "validation.jsonl").read_text().splitlines()
            if x.strip()
        ]
        for i, row in enumerate(rows):
            answers[(primitive, json.dumps(row["prompt"], sort_keys=True))] = (
                i,
                SPECS[primitive].target_text(row["target"]),
            )
    wrong: set[tuple[str, int]] = set()

    primitive_of = {prompt: primitive for primitive, prompt in answers}

    def generate(model, tokenizer, msgs, *, adapter, on_batch=None, **kw):
        out = []
        for message in msgs:
            prompt = json.dumps(message, sort_keys=True)
            if adapter == hf.BASE:  # the base alone answers every row with its target
                out.append(answers[(primitive_of[prompt], prompt)][1])
                continue
            i, text = answers[(adapter, prompt)]
            out.append("{}" if (adapter, i) in wrong else text)
        return out

    monkeypatch.setattr(hf, "generate", generate)
    monkeypatch.setattr(artifacts, "load_adapters", lambda *args, **kwargs: (object(), object()))
    return wrong


def test_gate_passes_at_threshold_one_when_every_prediction_is_its_target(generated_data, perfect_decoder, tmp_path):
    thr = "thresholds={" + ",".join(f"{p}:1.0" for p in PRIMITIVE_NAMES) + "}"
    args = [
        "validate",
        f"train_dir={tmp_path / 'no-train'}",
        f"dataset_dir={generated_data}",
        "base_comparison=false",
        thr,
    ]
    assert main([*args, f"output_dir={tmp_path / 'ok'}"]) == 0
    gates = json.loads((tmp_path / "ok" / "gates.json").read_text())
    assert gates["passed"] is True
    for gate in gates["primitives"].values():
        assert (
            gate["exact_match"],
            gate["contract_valid_rate"],
            gate["parse_rate"],
            gate["threshold"],
            gate["passed"],
        ) == (
            1.0,
            1.0,
            1.0,
            1.0,
            True,
        )
    perfect_decoder.add(("match_fill", 1))  # one wrong answer fails that gate, and only that one
    assert main([*args, f"output_dir={tmp_path / 'one-wrong'}"]) == 1
    gates = json.loads((tmp_path / "one-wrong" / "gates.json").read_text())
    assert gates["passed"] is False
    assert [p for p, r in gates["primitives"].items() if not r["passed"]] == ["match_fill"]
    gate = gates["primitives"]["match_fill"]
    assert gate["exact_match"] == (gate["n"] - 1) / gate["n"] and gate["failures"][0]["count"] == 1


def test_an_adapter_under_its_base_is_named_in_the_gates_and_its_card(generated_data, perfect_decoder, tmp_path):
    from forethought.training.package import model_card

    thr = "thresholds={" + ",".join(f"{p}:1.0" for p in PRIMITIVE_NAMES) + "}"
    args = ["validate", f"train_dir={tmp_path / 'no-train'}", f"dataset_dir={generated_data}", thr]
    assert main([*args, f"output_dir={tmp_path / 'level'}"]) == 0
    gates = json.loads((tmp_path / "level" / "gates.json").read_text())
    assert not any(gate["under_base"] for gate in gates["primitives"].values())
    assert "Under the base" not in (tmp_path / "level" / "gates.md").read_text()

    perfect_decoder.add(("match_fill", 0))  # the adapter wrong on one row, the base right on every row
    assert main([*args, f"output_dir={tmp_path / 'under'}"]) == 1
    gates = json.loads((tmp_path / "under" / "gates.json").read_text())
    assert [p for p, gate in gates["primitives"].items() if gate["under_base"]] == ["match_fill"]
    gate = gates["primitives"]["match_fill"]
    assert gate["base_exact_match"] == 1.0 and gate["exact_match"] == (gate["n"] - 1) / gate["n"]
    md = (tmp_path / "under" / "gates.md").read_text()
    assert "**Under the base**" in md
    assert f"- **match_fill**: tuned {100 * gate['exact_match']:.1f} % against the base's 100.0 %" in md
    entry = {"gate": gate, "spec_hash": gate["spec_hash"], "kind": "full"}
    card = model_card("match_fill", entry, {"name": "tiny", "config_sha256": "0" * 64}, None, smoke=True)
    assert "base 100.0%, **over this adapter's**" in card
    level = {**entry, "gate": gates["primitives"]["match_func"]}
    assert "over this adapter's" not in model_card(
        "match_func", level, {"name": "tiny", "config_sha256": "0" * 64}, None, smoke=True
    )


def test_package_refuses_failed_gates_without_the_override(tiny_run, tmp_path, capsys):
    rc = main(
        [
            "package",
            f"train_dir={tiny_run / 'train'}",
            f"validate_dir={tiny_run / 'validate'}",
            f"output_dir={tmp_path / 'b'}",
        ]
    )
    assert rc == 2
    assert "refusing to package: the gates of" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_bundle_manifest_and_model_cards(tiny_run):
    from forethought.bundle.manifest import hash_files

    manifest = json.loads((tiny_run / "bundle" / "manifest.json").read_text())
    assert manifest["smoke"] is True and manifest["base"]["config_sha256"] and manifest["tokenizer"]["files"]
    assert manifest["base"]["attn_implementation"] == "sdpa" and manifest["code_version"].startswith("0.")
    # each gate's decoding; the hf backend decodes the same way by default, and renders prompts as they were trained
    assert (
        manifest["decoding"] == dict.fromkeys(PRIMITIVE_NAMES, "constrained") and manifest["tool_rendering"] == "full"
    )
    for primitive in PRIMITIVE_NAMES:
        entry = manifest["primitives"][primitive]
        assert entry["gate"]["decoding"] == "constrained" and "exact_match_no_near_duplicate" in entry["gate"]
        assert entry["spec_hash"] == SPECS[primitive].spec_hash and "adapter_model.safetensors" in entry["files"]
        assert entry["probe_delta"] > 0  # the adapter-applies check ran
        adir = tiny_run / "bundle" / "adapters" / primitive
        card = (adir / "README.md").read_text()
        assert "SMOKE BUNDLE" in card and "library_name: peft" in card
        assert entry["files"] == hash_files(adir), "every file shipped is hashed, the model card included"
        # the trainer's pickled TrainingArguments is removed from the run's adapter folder and never shipped
        assert (
            not (tiny_run / "train" / primitive / "adapter" / "training_args.bin").exists()
            and not (adir / "training_args.bin").exists()
        )
    for sub in ("adapters", "tokenizer", "base"):  # no pickles anywhere in the bundle
        assert not [f for f in (tiny_run / "bundle" / sub).rglob("*") if f.suffix in (".bin", ".pt", ".pth", ".pkl")]


def test_tampered_model_card_is_refused(tiny_run, tmp_path):
    bundle = _copy(tiny_run, tmp_path)
    card = bundle / "adapters" / "decompose" / "README.md"
    card.write_text(card.read_text().replace("FAILED", "passed"))
    with pytest.raises(BundleError) as ei:
        load_bundle(bundle, spec_hashes(), allow_smoke=True)
    assert str(card) in str(ei.value) and "sha256 does not match" in str(ei.value)


def test_unlisted_file_in_the_bundle_is_refused(tiny_run, tmp_path):
    bundle = _copy(tiny_run, tmp_path)
    (bundle / "adapters" / "match_func" / "notes.txt").write_text("added after packaging")
    with pytest.raises(BundleError, match="adapter file notes.txt is not listed in the manifest"):
        load_bundle(bundle, spec_hashes(), allow_smoke=True)


def _train_copy(tiny_run, tmp_path) -> Path:
    dst = tmp_path / "train"
    shutil.copytree(tiny_run / "train", dst, ignore=shutil.ignore_patterns("checkpoints"))
    return dst


def test_adapter_that_does_not_change_the_output_is_refused(tiny_run):
    import torch

    from forethought.training.artifacts import load_adapters
    from forethought.training.package import adapter_applies

    names = ["match_func", "get_order"]
    model, tok = load_adapters(tiny_run / "train", names)
    assert set(adapter_applies(model, tok, names, 1e-6)) == set(names)  # trained adapters move the logits
    with torch.no_grad():
        zeroed = [p.zero_() for n, p in model.named_parameters() if ".lora_B.get_order." in n]  # B = 0: adds nothing
    assert zeroed
    with pytest.raises(BundleError) as ei:
        adapter_applies(model, tok, names, 1e-6)
    msg = str(ei.value)
    assert msg.startswith(
        "adapter-applies check: adapters ['get_order'] do not change the model's output on the probe input"
    )
    assert "a server would silently serve the base model" in msg


@pytest.mark.parametrize("record", ["run_state.json", "metrics.json"])
def test_adapter_trained_under_another_spec_is_refused(tiny_run, tmp_path, capsys, record):
    train = _train_copy(tiny_run, tmp_path)
    record_file = train / "decompose" / record
    state = json.loads(record_file.read_text())
    state["spec_hash"] = "0" * 16  # its prompts were rendered by an older spec
    record_file.write_text(json.dumps(state))
    want = (
        "adapter 'decompose' was trained on prompts rendered by spec hash 0000000000000000, "
        f"but the code's current spec hash of 'decompose' is {SPECS['decompose'].spec_hash}"
    )
    rc = main(
        [
            "validate",
            f"train_dir={train}",
            f"dataset_dir={tiny_run / 'data'}",
            f"output_dir={tmp_path / 'v'}",
            "max_examples=1",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and want in err and str(record_file) in err
    rc = main(
        [
            "package",
            f"train_dir={train}",
            f"validate_dir={tiny_run / 'validate'}",
            f"output_dir={tmp_path / 'b'}",
            "allow_failed_gates=true",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and want in err
    assert not (tmp_path / "v" / "gates.json").exists() and not (tmp_path / "b").exists()


def test_validate_and_package_configs_are_typed():
    def errors(command, schema, *ov):
        with pytest.raises(ConfigError) as ei:
            compose_and_validate(command, list(ov), schema)
        return ei.value.errors

    assert compose_and_validate("validate", ["primitives=match_func", "device=cuda:1"], ValidateConfig)[
        1
    ].selected() == ["match_func"]
    assert compose_and_validate("validate", ["primitives=[match_fill,decompose]"], ValidateConfig)[1].selected() == [
        "decompose",
        "match_fill",
    ]
    messages = dict(
        x.split(": ", 1)
        for x in errors(
            "validate",
            ValidateConfig,
            "primitives=[match_fun]",
            "device=gpu",
            "+thresholds.decompos=0.5",
            "thresholds.get_order=1.5",
        )
    )
    assert set(messages) == {"primitives.0", "device", "thresholds.decompos.[key]", "thresholds.get_order"}
    assert (
        messages["primitives.0"].startswith("Input should be 'decompose'")
        and "(got 'match_fun')" in messages["primitives.0"]
    )
    assert "cuda:N" in messages["device"] and messages["thresholds.decompos.[key]"].startswith(
        "Input should be 'decompose'"
    )
    assert messages["thresholds.get_order"].startswith("Input should be less than or equal to 1")
    assert "expected 'all'" in errors("validate", ValidateConfig, "primitives=everything")[0]
    assert errors("package", PackageConfig, "copy_base=sometimes")[0].startswith(
        "copy_base: Input should be 'auto', 'always' or 'never'"
    )


def _copy(tiny_run, tmp_path) -> Path:
    dst = tmp_path / "bundle"
    shutil.copytree(tiny_run / "bundle", dst)
    return dst


def test_smoke_bundle_is_refused_unless_allowed(tiny_run):
    with pytest.raises(BundleError, match="marked smoke"):
        load_bundle(tiny_run / "bundle", spec_hashes())
    assert load_bundle(tiny_run / "bundle", spec_hashes(), allow_smoke=True).smoke


def test_tampered_adapter_is_refused(tiny_run, tmp_path):
    bundle = _copy(tiny_run, tmp_path)
    adapter_file = bundle / "adapters" / "match_func" / "adapter_model.safetensors"
    data = bytearray(adapter_file.read_bytes())
    data[-1] ^= 0xFF
    adapter_file.write_bytes(bytes(data))
    with pytest.raises(BundleError) as ei:
        load_bundle(bundle, spec_hashes(), allow_smoke=True)
    assert str(adapter_file) in str(ei.value) and "sha256 does not match" in str(ei.value)


def test_changed_spec_is_refused(tiny_run, tmp_path):
    bundle = _copy(tiny_run, tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["primitives"]["decompose"]["spec_hash"] = "0" * 16  # trained against another prompt/contract
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="primitives.decompose: spec hash 0000000000000000 differs"):
        load_bundle(bundle, spec_hashes(), allow_smoke=True)


def test_missing_adapter_is_refused(tiny_run, tmp_path):
    bundle = _copy(tiny_run, tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    del manifest["primitives"]["get_order"]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"primitives \['get_order'\] are missing"):
        load_bundle(bundle, spec_hashes(), allow_smoke=True)


def test_kernel_runs_on_the_bundle_and_the_trace_names_it(tiny_run, tmp_path, capsys):
    rc = main(
        [
            "run",
            str(FIX / "paper_figure1.json"),
            "backend=hf",
            f"backend.bundle={tiny_run / 'bundle'}",
            "backend.allow_smoke=true",
            "backend.max_new_tokens=8",
            "kernel.retries=0",
            f"output_dir={tmp_path}",
        ]
    )
    turns = json.loads((tmp_path / "fs-paper-figure1" / "turns.json").read_text())
    assert rc == (1 if any(t["halted"] for t in turns) else 0)  # a smoke model's turns may halt: exit 1 says so
    assert "is marked SMOKE" in capsys.readouterr().err  # loud warning
    rows = [json.loads(x) for x in (tmp_path / "fs-paper-figure1" / "trace.jsonl").read_text().splitlines()]
    slm = [r for r in rows if r["kind"] == "slm"]
    assert slm
    digest = json.loads((tiny_run / "bundle" / "manifest.json").read_text())["primitives"]
    for row in slm:
        assert row["model"]["backend"] == "hf" and row["model"]["bundle"] == str(tiny_run / "bundle")
        assert row["model"]["adapter"] == row["primitive"]
        assert row["model"]["adapter_sha256"] == digest[row["primitive"]]["files"]["adapter_model.safetensors"]


# ------------------------------------------ the bundle is checked against itself (issue 13, findings 3 and 4)
def _edit_manifest(bundle: Path, edit) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    edit(manifest)
    (bundle / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "edit, needle",
    [
        # Finding 3: smoke=false loaded a bundle whose five gates all failed, with no warning.
        (lambda m: m.update(smoke=False), "smoke is false but gates.json records failed gates"),
        (
            lambda m: m["primitives"]["match_func"]["gate"].update(passed=True, exact_match=1.0),
            "primitives.match_func.gate: does not match gates.json",
        ),
        # Finding 3: base.copied=false skipped every base-weight hash.
        (lambda m: m["base"].update(copied=False), "copied is false but path 'base' is inside the bundle"),
        (lambda m: m["base"].update(files={}), "lists no base-model files"),
        (
            lambda m: m["primitives"]["decompose"].update(adapter_path="../../etc"),
            "primitives.decompose.adapter_path: path '../../etc' points outside the bundle",
        ),
        (lambda m: m["tokenizer"].update(path="/tmp"), "tokenizer.path: path '/tmp' points outside the bundle"),
        # Finding 3: a missing or mistyped field was a KeyError/AttributeError traceback.
        (lambda m: m["base"].pop("config_sha256"), "manifest field 'base.config_sha256': Field required"),
        (lambda m: m.update(primitives=[]), "manifest field 'primitives': Input should be a valid dictionary"),
        (lambda m: m["tokenizer"].update(files="x"), "manifest field 'tokenizer.files'"),
    ],
)
def test_a_one_field_manifest_edit_is_refused(tiny_run, tmp_path, edit, needle):
    bundle = _copy(tiny_run, tmp_path)
    _edit_manifest(bundle, edit)
    with pytest.raises(BundleError) as ei:
        load_bundle(bundle, spec_hashes(), allow_smoke=True)
    assert needle in str(ei.value) and "manifest.json" in str(ei.value)


def test_an_altered_base_weight_is_refused(tiny_run, tmp_path):
    bundle = _copy(tiny_run, tmp_path)
    weights = bundle / "base" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(BundleError, match="sha256 does not match the manifest: the base model file was modified"):
        load_bundle(bundle, spec_hashes(), allow_smoke=True)


def test_a_pickle_renamed_safetensors_is_a_located_error(tiny_run, tmp_path):
    import pickle

    from forethought.bundle.manifest import sha256_file

    bundle = _copy(tiny_run, tmp_path)
    adapter_file = bundle / "adapters" / "match_fill" / "adapter_model.safetensors"
    adapter_file.write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    # Keep every digest consistent, so only the format check can catch it.
    digest = sha256_file(adapter_file)
    gates = json.loads((bundle / "gates.json").read_text())
    gates["measured"]["adapters"]["match_fill"]["adapter_model.safetensors"] = digest
    (bundle / "gates.json").write_text(json.dumps(gates))

    def edit(manifest):
        manifest["primitives"]["match_fill"]["files"]["adapter_model.safetensors"] = digest
        manifest["gates"]["sha256"] = sha256_file(bundle / "gates.json")

    _edit_manifest(bundle, edit)
    with pytest.raises(BundleError, match="not a safetensors file") as ei:
        load_bundle(bundle, spec_hashes(), allow_smoke=True)
    assert ei.value.where == str(adapter_file)


def test_an_edited_gates_file_is_refused(tiny_run, tmp_path):
    bundle = _copy(tiny_run, tmp_path)
    gates = json.loads((bundle / "gates.json").read_text())
    gates["primitives"]["decompose"]["passed"] = True
    (bundle / "gates.json").write_text(json.dumps(gates))
    with pytest.raises(BundleError, match="the gates file was modified"):
        load_bundle(bundle, spec_hashes(), allow_smoke=True)


def test_package_refuses_gates_measured_on_other_adapter_files(tiny_run, tmp_path, capsys):
    # Finding 4: an adapter retrained after validate was packaged under the old numbers.
    train = tmp_path / "train"
    shutil.copytree(tiny_run / "train", train)
    adapter_file = train / "get_order" / "adapter" / "adapter_model.safetensors"
    adapter_file.write_bytes(adapter_file.read_bytes()[:-1] + bytes([adapter_file.read_bytes()[-1] ^ 1]))  # "retrained"
    args = [
        "package",
        f"train_dir={train}",
        f"validate_dir={tiny_run / 'validate'}",
        f"dataset_dir={tiny_run / 'data'}",
        "allow_failed_gates=true",
        f"output_dir={tmp_path / 'b'}",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "the gates of ['get_order'] were measured on other adapter files" in err and "gates.json" in err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "content, needle",
    [
        ('{"primitives": {"decompose": {"pass', "not valid JSON (truncated?)"),
        ('{"passed": false}', "field 'primitives' is missing"),
        ('{"primitives": {"decompose": {"passed": "yes"}}}', "primitives.decompose.passed"),
    ],
)
def test_a_broken_gates_file_is_a_located_error(tiny_run, tmp_path, capsys, content, needle):
    # Finding 7: a truncated gates.json, or one without primitives, was a traceback.
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "gates.json").write_text(content)
    rc = main(
        ["package", f"train_dir={tiny_run / 'train'}", f"validate_dir={tmp_path / 'v'}", f"output_dir={tmp_path / 'b'}"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and str(tmp_path / "v" / "gates.json") in err


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b"5", "not a JSON object"),
        (b"\xff\xfe not text", "not UTF-8"),
        (None, "field 'target' is not the completion's JSON"),  # trained on one answer, judged on another
        ("target", "field 'target' is not a valid match_func target"),  # a target the primitive's output type rejects
        ("input", "field 'input' is not a MatchFuncInput"),  # an input the primitive's input type rejects
        ("row", "field 'near_duplicate_across_split' is missing"),  # not a dataset row
    ],
)
def test_a_bad_validation_row_is_a_located_error(generated_data, tmp_path, line, needle):
    """Finding 7: validate on such rows gave a traceback; now the file, line and field are named."""
    from forethought.data_gen.unit import seal
    from forethought.errors import UserError
    from forethought.training.validate import _read_rows

    data = tmp_path / "d"
    shutil.copytree(generated_data, data)
    path = data / "match_func" / "validation.jsonl"
    good = json.loads(path.read_text().splitlines()[0])
    if line is None:
        raw = json.dumps({**good, "target": {"tool": 3}}).encode()
    elif line == "target":
        raw = json.dumps(
            {**good, "target": {"tool": 3}, "completion": [{"role": "assistant", "content": '{"tool": 3}'}]}
        ).encode()
    elif line == "row":
        raw = json.dumps({k: v for k, v in good.items() if k != "near_duplicate_across_split"}).encode()
    elif line == "input":
        raw = json.dumps({**good, "input": json.dumps({"task": "not a task"})}).encode()
    else:
        raw = line
    path.write_bytes(raw + b"\n")
    seal(data)  # the dataset is one unit again: only the row itself is wrong
    with pytest.raises(UserError, match=needle) as exc:
        _read_rows(str(data), "match_func", None)
    assert exc.value.where == str(path)
