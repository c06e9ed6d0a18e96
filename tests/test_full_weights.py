"""``train.finetuning=full``: every weight fine-tuned per primitive, shipped whole in the bundle, loaded by the kernel's
hf backend behind the same calls as LoRA adapters (the built-here profiles; docs/training.md)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from forethought.bundle.manifest import load_bundle  # noqa: E402
from forethought.bundle.models import PerPrimitiveModels, adapter_kind  # noqa: E402
from forethought.config import ConfigError  # noqa: E402
from forethought.kernel.backends.hf import HFBackend  # noqa: E402
from forethought.kernel.specs import PRIMITIVE_NAMES, SPECS, spec_hashes  # noqa: E402
from forethought.primitives import SLMRequest  # noqa: E402
from forethought.training.artifacts import load_adapters  # noqa: E402
from forethought.training.package import PackageConfig, package  # noqa: E402
from forethought.training.train import config_from_overrides, run  # noqa: E402
from forethought.training.validate import ValidateConfig, run_validation  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def full_run(generated_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    cfg = config_from_overrides(
        [
            "primitive=all",
            "model=tiny",
            "model.pretrain=null",
            f"dataset_dir={generated_data}",
            f"output_dir={out / 'train'}",
            "train=quick",
            "train.max_steps=2",
            "train.finetuning=full",
            "model.tiny.vocab_size=1024",
            "logging=none",
            "logging.progress=false",
        ]
    )
    results = run(cfg)
    return out, results


def test_full_finetuning_trains_every_weight_and_saves_the_whole_model(full_run):
    from safetensors.torch import load_file

    out, results = full_run
    base = load_file(str(out / "train" / "base" / "model.safetensors"))
    for primitive in PRIMITIVE_NAMES:
        metrics = results[primitive].metrics
        assert metrics["adapter"]["kind"] == "full" and metrics["adapter"]["parameters"] == sum(
            t.numel() for t in base.values()
        )
        assert adapter_kind(out / "train" / primitive / "adapter") == "full"
        tuned = load_file(str(out / "train" / primitive / "adapter" / "model.safetensors"))
        assert tuned.keys() == base.keys()
        changed = [k for k in base if not torch.equal(base[k], tuned[k])]
        assert len(changed) == len(base), (
            f"{primitive}: weights that did not train: {sorted(set(base) - set(changed))[:5]}"
        )


def test_validate_package_and_the_kernel_backend_load_full_weights(full_run, generated_data):
    out, _ = full_run
    model, tok = load_adapters(out / "train")
    assert isinstance(model, PerPrimitiveModels) and set(model.peft_config) == set(PRIMITIVE_NAMES)
    gates = run_validation(
        ValidateConfig(
            train_dir=str(out / "train"),
            dataset_dir=str(generated_data),
            output_dir=str(out / "validate"),
            max_examples=2,
            max_new_tokens=8,
            compare_decoding=False,
            device="cpu",
        ),
        model=model,
        tokenizer=tok,
    )
    assert set(gates["primitives"]) == set(PRIMITIVE_NAMES)
    bundle_dir = out / "bundle"
    package(
        PackageConfig(
            train_dir=str(out / "train"),
            validate_dir=str(out / "validate"),
            dataset_dir=str(generated_data),
            output_dir=str(bundle_dir),
            allow_failed_gates=True,
        )
    )
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    assert {p["kind"] for p in manifest["primitives"].values()} == {"full"}
    assert all(
        p["probe_delta"] > 0 for p in manifest["primitives"].values()
    )  # each primitive's weights change the output
    bundle = load_bundle(bundle_dir, spec_hashes(), allow_smoke=True)
    backend = HFBackend.from_bundle(bundle_dir, device="cpu", allow_smoke=True, max_new_tokens=48)
    assert backend.adapters == set(PRIMITIVE_NAMES) and bundle.adapter_digest("match_func")
    spec = SPECS["match_func"]
    row = json.loads((generated_data / "match_func" / "validation.jsonl").read_text().splitlines()[0])
    inp = spec.input_type.model_validate_json(row["input"])
    reply = backend.complete(
        [SLMRequest("match_func", inp, spec.messages(inp), json_schema=spec.decoding_schema(inp))]
    )[0]
    assert spec.check_output(inp, json.loads(reply.text)).ok  # decoded under its contract-compiled grammar


def test_full_finetuning_is_refused_for_gemma3_12b(tmp_path):
    with pytest.raises(ConfigError, match="train.finetuning=full is for the built-here profiles"):
        config_from_overrides(["model=gemma3_12b", f"model.path={tmp_path}", "train.finetuning=full"])
