"""The gemma3_12b profile's loading and LoRA targeting, on a tiny random *multimodal* Gemma 3 checkpoint.

The checkpoint has the 12B's structure (``Gemma3ForConditionalGeneration``: SigLIP vision
tower + projector + Gemma 3 language model, ``model_type: gemma3``) at toy sizes, saved
with ``save_pretrained`` and loaded back through the profile's code path (``model.path``).
"""

from __future__ import annotations

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["WANDB_MODE"] = "offline"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import load_file  # noqa: E402

from forethought.bundle.models import AdapterTargetError, load_model, text_model_prefix  # noqa: E402
from forethought.cli import main as forethought_main  # noqa: E402
from forethought.config import ConfigError  # noqa: E402
from forethought.errors import UserError  # noqa: E402
from forethought.training import artifacts  # noqa: E402
from forethought.training.config import LoraSettings  # noqa: E402
from forethought.training.models import check_adapter_targets, lora_config  # noqa: E402
from forethought.training.synthetic import write_dataset  # noqa: E402
from forethought.training.tiny import build_tokenizer, corpus_files, corpus_texts  # noqa: E402
from forethought.training.train import config_from_overrides, run  # noqa: E402

NON_TEXT = ("vision_tower", "multi_modal_projector")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("data"), n_train=16, n_val=4, seed=1, primitives=("match_func",))


@pytest.fixture(scope="module")
def mm_ckpt(data_dir, tmp_path_factory) -> Path:
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, SiglipVisionConfig

    tok = build_tokenizer(corpus_texts(corpus_files(data_dir)), 600)
    vocab_size = len(tok)
    text = Gemma3TextConfig(
        vocab_size=vocab_size + 3,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        query_pre_attn_scalar=32,
        sliding_window=64,
        layer_types=["sliding_attention", "full_attention"],
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
    vision = SiglipVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=56, patch_size=14
    )
    cfg = Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=4,
        boi_token_index=vocab_size,
        eoi_token_index=vocab_size + 1,
        image_token_index=vocab_size + 2,
    )
    torch.manual_seed(0)
    model = Gemma3ForConditionalGeneration(cfg)
    out = tmp_path_factory.mktemp("gemma3_mm")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    assert json.loads((out / "config.json").read_text())["model_type"] == "gemma3"
    return out


def test_profile_loads_the_multimodal_checkpoint_with_its_weights(mm_ckpt):
    model = load_model(mm_ckpt, dtype=torch.bfloat16, attn_implementation="sdpa")
    assert type(model).__name__ == "Gemma3ForConditionalGeneration"
    assert model.dtype == torch.bfloat16
    saved = load_file(str(mm_ckpt / "model.safetensors"))
    params = dict(model.named_parameters())
    # the checkpoint's key layout (language_model.model.*) differs from the module paths (model.language_model.*)
    for ckpt_key, module_key in (
        (
            "language_model.model.layers.0.self_attn.q_proj.weight",
            "model.language_model.layers.0.self_attn.q_proj.weight",
        ),
        ("language_model.model.layers.1.mlp.down_proj.weight", "model.language_model.layers.1.mlp.down_proj.weight"),
        (
            "vision_tower.encoder.layers.0.self_attn.q_proj.weight",
            "model.vision_tower.encoder.layers.0.self_attn.q_proj.weight",
        ),
    ):
        assert torch.equal(params[module_key], saved[ckpt_key].to(torch.bfloat16)), (
            f"{module_key} comes from the checkpoint"
        )
    assert text_model_prefix(model) == "model.language_model"


def test_lora_targets_the_language_model_only(mm_ckpt):
    from peft import get_peft_model

    model = load_model(mm_ckpt, dtype=torch.bfloat16, attn_implementation="sdpa")
    settings = LoraSettings()
    peft_model = get_peft_model(model, lora_config(model, settings))
    summary = check_adapter_targets(peft_model, settings)
    assert summary["lora_modules"] == 2 * 7
    lora = [n for n, _ in peft_model.named_parameters() if ".lora_" in n]
    assert lora and all(n.startswith("base_model.model.model.language_model.layers.") for n in lora)
    assert not any(part in n for n in lora for part in NON_TEXT)
    # the vision tower's attention projections exist but stay plain Linear layers
    vision_q = [n for n, m in peft_model.named_modules() if "vision_tower" in n and n.endswith("q_proj")]
    assert vision_q and all(
        type(peft_model.get_submodule(n)).__name__ == "Linear" and not hasattr(peft_model.get_submodule(n), "lora_A")
        for n in vision_q
    )


def test_suffix_targets_leak_into_the_vision_tower_and_the_check_fails_loudly(mm_ckpt):
    from peft import LoraConfig, get_peft_model

    model = load_model(mm_ckpt, dtype=torch.bfloat16, attn_implementation="sdpa")
    leaky = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    assert any("vision_tower" in n for n, _ in leaky.named_parameters() if ".lora_" in n), (
        "premise: suffix matching leaks"
    )
    with pytest.raises(AdapterTargetError, match="outside the language model"):
        check_adapter_targets(leaky)


def test_gemma3_profile_trains_and_saves_a_text_only_adapter(mm_ckpt, data_dir, tmp_path):
    out = tmp_path / "out"
    cfg = config_from_overrides(
        [
            "primitive=match_func",
            "model=gemma3_12b",
            f"model.path={mm_ckpt}",
            f"dataset_dir={data_dir}",
            f"output_dir={out}",
            "train=quick",
            "train.max_steps=2",
            "train.device=cpu",
            "train.per_device_batch_size=2",
            "logging=none",
            "logging.progress=false",
        ]
    )
    res = run(cfg)["match_func"]
    metrics = res.metrics
    assert (
        metrics["dtype"] == "bfloat16"
        and metrics["global_step"] == 2
        and metrics["adapter"]["text_model_prefix"] == "model.language_model"
    )
    keys = load_file(str(out / "match_func" / "adapter" / "adapter_model.safetensors")).keys()
    assert keys and all(k.startswith("base_model.model.model.language_model.layers.") for k in keys)
    assert json.loads((out / "base.json").read_text())["path"] == str(mm_ckpt.resolve())
    assert not (out / "base").exists(), "the 12B profile keeps its base where it is"
    # reload base + named adapter through the artifacts API; the adapter changes the output
    model, tok = artifacts.load_adapters(out, ["match_func"])
    inputs = tok.apply_chat_template(
        [{"role": "user", "content": "refuel data"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        with_adapter = model(**inputs).logits
        with model.disable_adapter():
            without = model(**inputs).logits
    assert not torch.equal(with_adapter, without)


def test_missing_model_path_is_a_clear_user_error(data_dir, tmp_path, capsys):
    rc = forethought_main(
        [
            "train",
            "primitive=match_func",
            "model=gemma3_12b",
            f"dataset_dir={data_dir}",
            f"output_dir={tmp_path}",
            "logging=none",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "model.path" in err and "local checkpoint folder" in err


def test_model_path_must_be_a_gemma3_checkpoint(data_dir, tmp_path):
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text('{"model_type": "llama"}')
    cfg = config_from_overrides(
        [
            "primitive=match_func",
            "model=gemma3_12b",
            f"model.path={tmp_path / 'llama'}",
            f"dataset_dir={data_dir}",
            f"output_dir={tmp_path / 'o'}",
        ]
    )
    with pytest.raises(UserError, match="expected a Gemma 3 checkpoint"):
        run(cfg)


def test_fp16_is_refused_for_gemma3():
    with pytest.raises(ConfigError, match="float16 is refused"):
        config_from_overrides(["model=gemma3_12b", "model.dtype=float16"])


class _FakeModel:
    def __init__(self, calls: dict) -> None:
        self.calls = calls

    def to(self, *args, **kwargs):
        self.calls.setdefault("to", []).append(args)
        return self


@pytest.fixture()
def fake_from_pretrained(monkeypatch):
    """AutoModelForCausalLM.from_pretrained replaced by a recorder (no weights, no GPU needed)."""
    from transformers import AutoModelForCausalLM

    calls: dict = {}

    def from_pretrained(path, **kwargs):
        calls["kwargs"] = kwargs
        return _FakeModel(calls), {"missing_keys": [], "mismatched_keys": []}

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", staticmethod(from_pretrained))
    return calls


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_load_model_leaves_the_model_in_place_under_fsdp(fake_from_pretrained, monkeypatch, tmp_path, device):
    """Under FSDP (accelerate sets ACCELERATE_USE_FSDP) accelerate shards and places the model; load_model must not
    move it: every rank would put the full base on its GPU, and meta tensors (cpu_ram_efficient_loading) cannot move."""
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("LOCAL_RANK", "1")
    load_model(tmp_path, dtype=torch.bfloat16, attn_implementation="sdpa", device=device)
    assert "to" not in fake_from_pretrained and "device_map" not in fake_from_pretrained["kwargs"]


def test_load_model_places_the_model_without_fsdp(fake_from_pretrained, monkeypatch, tmp_path):
    monkeypatch.delenv("ACCELERATE_USE_FSDP", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    load_model(tmp_path, dtype=torch.bfloat16, attn_implementation="sdpa", device="cuda")
    assert (
        fake_from_pretrained["kwargs"]["device_map"] == {"": 1} and "to" not in fake_from_pretrained
    )  # loaded onto this rank's GPU
    load_model(tmp_path, dtype=torch.bfloat16, attn_implementation="sdpa", device="cuda:0")
    assert fake_from_pretrained["to"] == [("cuda:0",)]


def test_fsdp_config_wraps_every_decoder_layer_of_the_multimodal_and_text_models(mm_ckpt, monkeypatch):
    """conf/accelerate/fsdp.yaml builds a wrap policy on the real model classes (no class it cannot find)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy
    from accelerate.utils.launch import prepare_multi_gpu_env
    from transformers import Gemma3ForConditionalGeneration

    from forethought.config import CONF_DIR

    args = launch_command_parser().parse_args(["--config_file", str(CONF_DIR / "accelerate" / "fsdp.yaml"), "-m", "x"])
    for name, value in prepare_multi_gpu_env(_validate_launch_command(args)[0]).items():
        monkeypatch.setenv(name, value)
    plugin = FullyShardedDataParallelPlugin()
    mm = Gemma3ForConditionalGeneration.from_pretrained(mm_ckpt)
    text = mm.model.language_model
    for model in (mm, text):
        policy = fsdp2_prepare_auto_wrap_policy(plugin, model)
        wrapped = [n for n, m in model.named_modules() if policy(m)]
        layers = [n for n, m in model.named_modules() if type(m).__name__ == "Gemma3DecoderLayer"]
        assert wrapped == layers and len(layers) == 2


def test_checkpoint_folder_without_weights_is_a_user_error(mm_ckpt, data_dir, tmp_path, capsys):
    import shutil

    ckpt = tmp_path / "no_weights"
    shutil.copytree(mm_ckpt, ckpt, ignore=shutil.ignore_patterns("*.safetensors"))
    rc = forethought_main(
        [
            "train",
            "primitive=match_func",
            "model=gemma3_12b",
            f"model.path={ckpt}",
            f"dataset_dir={data_dir}",
            f"output_dir={tmp_path / 'o'}",
            "train=quick",
            "train.max_steps=1",
            "train.device=cpu",
            "logging=none",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and f"model.path={ckpt}: cannot load the base model" in err and "Traceback" not in err
