"""Gates, bundles and loading them in the kernel, on a tiny CPU run (real trl training, real files)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forethought.cli import main
from kernel.specs import PRIMITIVE_NAMES, SPECS
from training.bundle import BundleError, load_bundle
from training.validate import score

FIX = Path(__file__).parent / "fixtures" / "solutions"


@pytest.fixture(scope="module")
def tiny_run(tiny_pipeline):
    """generate -> train -> validate -> package, run by the tiny pipeline (tests/conftest.py)."""
    return tiny_pipeline


def _rows(spec, outputs):
    from kernel.specs import MatchFuncInput, TaskRef, ToolBrief

    inp = MatchFuncInput(task=TaskRef(id="t1", text="list files"), tools=[ToolBrief(name="ls"), ToolBrief(name="cd")])
    return [{"id": str(i), "input": inp.model_dump(mode="json"), "target": {"tool_name": "ls"}} for i in range(len(outputs))], outputs


def test_gate_scoring_on_controlled_outputs():
    spec = SPECS["match_func"]
    rows, texts = _rows(spec, ['{"tool_name": "ls"}', '{"tool_name":"ls"}', '{"tool_name": "cd"}', '{"tool_name": "rm"}', "not json"])
    r = score(spec, rows, texts)
    assert (r["n"], r["exact_match"], r["parse_rate"], r["contract_valid_rate"]) == (5, 0.4, 0.8, 0.6)
    kinds = {f["kind"]: f["count"] for f in r["failures"]}
    assert kinds == {"mismatch": 1, "contract:tool_registered": 1, "unparseable": 1}
    assert r["failures"][0]["examples"][0]["target"] == '{"tool_name": "ls"}'


def test_failed_gates_exit_non_zero(tiny_run, tmp_path):
    rc = main(["validate", f"train_dir={tiny_run / 'train'}", f"dataset_dir={tiny_run / 'data'}", f"output_dir={tmp_path}",
               "max_examples=2", "max_new_tokens=4", "base_comparison=false"])
    assert rc == 1  # tiny adapters cannot pass the real thresholds


def test_validate_writes_table5_report_and_gate_verdicts(tiny_run):
    gates = json.loads((tiny_run / "validate" / "gates.json").read_text())
    assert set(gates["primitives"]) == set(PRIMITIVE_NAMES) and gates["passed"] is False
    for p, r in gates["primitives"].items():
        assert r["n"] >= 1 and r["passed"] == (r["exact_match"] >= r["threshold"])
        assert {"exact_match", "contract_valid_rate", "parse_rate", "base_exact_match", "threshold", "failures"} <= set(r)
        assert r["spec_hash"] == SPECS[p].spec_hash
    md = (tiny_run / "validate" / "gates.md").read_text()
    assert md.startswith("| Primitive | n | Base EM | Tuned EM |") and "Weighted avg." in md
    assert (tiny_run / "validate" / "gates.png").stat().st_size > 1000


def test_gate_passes_with_a_reachable_threshold(tiny_run, tmp_path):
    thr = "thresholds={" + ",".join(f"{p}:0.0" for p in PRIMITIVE_NAMES) + "}"
    rc = main(["validate", f"train_dir={tiny_run / 'train'}", f"dataset_dir={tiny_run / 'data'}", f"output_dir={tmp_path}",
               "max_examples=2", "max_new_tokens=4", "base_comparison=false", thr])
    assert rc == 0 and json.loads((tmp_path / "gates.json").read_text())["passed"] is True


def test_package_refuses_failed_gates_without_the_override(tiny_run, tmp_path, capsys):
    rc = main(["package", f"train_dir={tiny_run / 'train'}", f"validate_dir={tiny_run / 'validate'}", f"output_dir={tmp_path / 'b'}"])
    assert rc == 2
    assert "refusing to package: the gates of" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_bundle_manifest_and_model_cards(tiny_run):
    m = json.loads((tiny_run / "bundle" / "manifest.json").read_text())
    assert m["smoke"] is True and m["base"]["config_sha256"] and m["tokenizer"]["files"]
    for p in PRIMITIVE_NAMES:
        e = m["primitives"][p]
        assert e["spec_hash"] == SPECS[p].spec_hash and "adapter_model.safetensors" in e["files"]
        assert e["probe_delta"] > 0  # the adapter-applies check ran
        card = (tiny_run / "bundle" / "adapters" / p / "README.md").read_text()
        assert "SMOKE BUNDLE" in card and "library_name: peft" in card


def _copy(tiny_run, tmp_path) -> Path:
    dst = tmp_path / "bundle"
    shutil.copytree(tiny_run / "bundle", dst)
    return dst


def test_smoke_bundle_is_refused_unless_allowed(tiny_run):
    with pytest.raises(BundleError, match="marked smoke"):
        load_bundle(tiny_run / "bundle")
    assert load_bundle(tiny_run / "bundle", allow_smoke=True).smoke


def test_tampered_adapter_is_refused(tiny_run, tmp_path):
    b = _copy(tiny_run, tmp_path)
    f = b / "adapters" / "match_func" / "adapter_model.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(BundleError) as ei:
        load_bundle(b, allow_smoke=True)
    assert str(f) in str(ei.value) and "sha256 does not match" in str(ei.value)


def test_changed_spec_is_refused(tiny_run, tmp_path):
    b = _copy(tiny_run, tmp_path)
    m = json.loads((b / "manifest.json").read_text())
    m["primitives"]["decompose"]["spec_hash"] = "0" * 16  # trained against another prompt/contract
    (b / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleError, match="primitives.decompose: spec hash 0000000000000000 differs"):
        load_bundle(b, allow_smoke=True)


def test_missing_adapter_is_refused(tiny_run, tmp_path):
    b = _copy(tiny_run, tmp_path)
    m = json.loads((b / "manifest.json").read_text())
    del m["primitives"]["get_order"]
    (b / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleError, match=r"primitives \['get_order'\] are missing"):
        load_bundle(b, allow_smoke=True)


def test_kernel_runs_on_the_bundle_and_the_trace_names_it(tiny_run, tmp_path, capsys):
    rc = main(["run", str(FIX / "paper_figure1.json"), "backend=hf", f"backend.bundle={tiny_run / 'bundle'}", "backend.allow_smoke=true",
               "backend.max_new_tokens=8", "kernel.retries=0", f"output_dir={tmp_path}"])
    assert rc == 0
    assert "is marked SMOKE" in capsys.readouterr().err  # loud warning
    rows = [json.loads(x) for x in (tmp_path / "fs-paper-figure1" / "trace.jsonl").read_text().splitlines()]
    slm = [r for r in rows if r["kind"] == "slm"]
    assert slm
    digest = json.loads((tiny_run / "bundle" / "manifest.json").read_text())["primitives"]
    for r in slm:
        assert r["model"]["backend"] == "hf" and r["model"]["bundle"] == str(tiny_run / "bundle")
        assert r["model"]["adapter"] == r["primitive"]
        assert r["model"]["adapter_sha256"] == digest[r["primitive"]]["files"]["adapter_model.safetensors"]
