"""Base models other than Gemma 3 (``model=causal_lm``): Qwen3 and Llama at toy sizes, and QLoRA's config checks.

Each checkpoint is built here from a config (hidden 32, 2 layers), saved with ``save_pretrained`` next to the
project's built-here tokenizer (:mod:`forethought.training.tiny`), and loaded through ``model.path``; nothing is
downloaded. The Qwen3 one carries a ChatML chat template (trl's ``qwen3.jinja``) with its own turn tokens, the Llama
one none (it gets Gemma 3's, as the built-here tokenizers do).
"""

from __future__ import annotations

import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["WANDB_MODE"] = "offline"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forethought.bundle.models import AdapterTargetError, text_model_prefix  # noqa: E402
from forethought.cli import main as forethought_main  # noqa: E402
from forethought.config import ConfigError  # noqa: E402
from forethought.training import artifacts  # noqa: E402
from forethought.training.config import LoraSettings  # noqa: E402
from forethought.training.models import check_adapter_targets, discover_lora_targets, lora_config  # noqa: E402
from forethought.training.synthetic import write_dataset  # noqa: E402
from forethought.training.tiny import build_tokenizer, corpus_files, corpus_texts  # noqa: E402
from forethought.training.train import config_from_overrides, run  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ARCHS = ("qwen3", "llama", "gemma3_text")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("data"), n_train=8, n_val=2, seed=1, primitives=("match_func",))


@pytest.fixture(scope="module")
def tokenizer(data_dir):
    return build_tokenizer(corpus_texts(corpus_files(data_dir)), 400)


def tiny_model(arch: str, tok):
    from transformers import (
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    shape = dict(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=2048,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
    torch.manual_seed(0)
    if arch == "qwen3":
        return Qwen3ForCausalLM(Qwen3Config(**shape, tie_word_embeddings=True))
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**shape))
    return Gemma3ForCausalLM(Gemma3TextConfig(**shape, query_pre_attn_scalar=16, sliding_window=64))


def save_checkpoint(arch: str, tok, out: Path) -> Path:
    """A checkpoint folder as a user has one: config.json, model.safetensors, the tokenizer with its template."""
    import copy

    import trl

    tok = copy.deepcopy(tok)
    if arch == "qwen3":
        tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
        tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    else:
        tok.chat_template = None
    model = tiny_model(arch, tok)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def checkpoints(tokenizer, tmp_path_factory) -> dict[str, Path]:
    return {a: save_checkpoint(a, tokenizer, tmp_path_factory.mktemp(a)) for a in ("qwen3", "llama")}


def _overrides(ckpt: Path, data_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "primitive=match_func",
        "model=causal_lm",
        f"model.path={ckpt}",
        f"dataset_dir={data_dir}",
        f"output_dir={out}",
        "train=quick",
        "train.max_steps=2",
        "train.device=cpu",
        "train.per_device_batch_size=2",
        "logging=none",
        "logging.progress=false",
        *extra,
    ]


@pytest.fixture(scope="module")
def trained(checkpoints, data_dir, tmp_path_factory) -> dict[str, Path]:
    """Two LoRA steps on each architecture through `forethought train model=causal_lm`."""
    outs = {}
    for arch, ckpt in checkpoints.items():
        out = tmp_path_factory.mktemp(f"train_{arch}")
        res = run(config_from_overrides(_overrides(ckpt, data_dir, out)))["match_func"]
        assert res.metrics["global_step"] == 2 and res.metrics["adapter"]["text_model_prefix"] == "model"
        outs[arch] = out
    return outs


@pytest.mark.parametrize("arch", ARCHS)
def test_lora_targets_are_discovered_on_each_architecture(arch, tokenizer):
    from peft import get_peft_model

    model = tiny_model(arch, tokenizer)
    assert text_model_prefix(model) == "model"
    found = discover_lora_targets(model, list(LoraSettings().target_modules))
    assert found == sorted(
        [f"self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
        + [f"mlp.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
    )
    assert discover_lora_targets(model, ["all-linear"]) == found  # these decoder layers have no other linear module
    settings = LoraSettings(target_modules=["q_proj", "down_proj"])
    peft_model = get_peft_model(model, lora_config(model, settings))
    summary = check_adapter_targets(peft_model, settings)
    assert summary["lora_modules"] == 2 * 2
    assert discover_lora_targets(peft_model, ["q_proj", "down_proj"]) == ["mlp.down_proj", "self_attn.q_proj"]


def test_a_target_the_architecture_lacks_is_named_with_what_it_has(tokenizer):
    model = tiny_model("llama", tokenizer)
    for layer in model.model.layers:  # an architecture whose MLP has no gate
        del layer.mlp.gate_proj
    with pytest.raises(AdapterTargetError, match=r"\['gate_proj'\] are not linear modules.*mlp.up_proj"):
        discover_lora_targets(model, ["q_proj", "gate_proj"])


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_causal_lm_profile_trains_and_the_bundle_loader_loads_it(arch, trained, checkpoints):
    from forethought.bundle.manifest import Bundle
    from forethought.kernel.backends.hf import stop_ids

    out = trained[arch]
    keys = json.loads((out / "match_func" / "metrics.json").read_text())["adapter"]
    assert keys["lora_modules"] == 2 * 7
    ref = json.loads((out / "base.json").read_text())
    assert ref["profile"] == "causal_lm" and ref["model_type"] == arch
    model, tok = artifacts.load_adapters(out, ["match_func"])
    # the bundle's loader: the base where it lies, its tokenizer, the adapter named after its primitive
    bundle = Bundle(
        out,
        {
            "base": {"path": str(checkpoints[arch]), "dtype": "float32"},
            "tokenizer": {"path": str(checkpoints[arch])},
            "primitives": {"match_func": {"kind": "lora", "adapter_path": str(out / "match_func" / "adapter")}},
        },
    )
    served, served_tok = bundle.load_model()
    inputs = tok.apply_chat_template(
        [{"role": "user", "content": "refuel data"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        tuned = model(**inputs).logits
        assert torch.allclose(served(**inputs).logits, tuned)
        with model.disable_adapter():
            assert not torch.equal(model(**inputs).logits, tuned)
    end = "<|im_end|>" if arch == "qwen3" else "<end_of_turn>"  # the template's own end-of-turn token
    assert stop_ids(served_tok)[0] == served_tok.convert_tokens_to_ids(end)


def test_lora_on_the_last_layers_leaves_the_layers_below_without_adapter_or_backward(tokenizer):
    """``lora.last_layers``: only the top layers are wrapped, and autograd never runs a backward pass through the
    layers below (the source of its speed on CPU); with every layer wrapped it does."""
    from peft import get_peft_model

    needs_grad = {}
    for last_layers in (1, None):
        model = tiny_model("llama", tokenizer)
        settings = LoraSettings(last_layers=last_layers)
        peft_model = get_peft_model(model, lora_config(model, settings))
        summary = check_adapter_targets(peft_model, settings)
        lora_names = [n for n, p in peft_model.named_parameters() if p.requires_grad]
        seen = []  # whether each layer's output is part of the autograd graph (else no backward runs through it)
        for layer in peft_model.get_base_model().model.layers:
            layer.register_forward_hook(lambda _, __, out, seen=seen: seen.append(out[0].requires_grad))
        ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
        peft_model(input_ids=ids, labels=ids).loss.backward()
        needs_grad[last_layers] = seen
        if last_layers == 1:
            assert summary["lora_modules"] == 7
            assert lora_names and all(".layers.1." in n for n in lora_names)
            lora_b = [p for n, p in peft_model.named_parameters() if "lora_B" in n]
            assert lora_b and all(p.grad is not None and p.grad.abs().sum() > 0 for p in lora_b)
        else:
            assert summary["lora_modules"] == 2 * 7
    assert needs_grad == {1: [False, True], None: [True, True]}


def test_more_last_layers_than_the_model_has_is_refused_before_anything_is_written(
    checkpoints, data_dir, tmp_path, capsys
):
    args = _overrides(checkpoints["llama"], data_dir, tmp_path / "o", "lora.last_layers=3")
    rc = forethought_main(["train", *args])
    err = capsys.readouterr().err
    assert rc == 2 and "lora.last_layers" in err and "2 decoder layers" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_a_last_layers_adapter_trains_and_loads(checkpoints, data_dir, tmp_path):
    out = tmp_path / "o"
    res = run(config_from_overrides(_overrides(checkpoints["llama"], data_dir, out, "lora.last_layers=1")))
    assert res["match_func"].metrics["adapter"]["lora_modules"] == 7
    assert not any("lora.last_layers" in note for note in res["match_func"].metrics["notes"])
    model, _ = artifacts.load_adapters(out, ["match_func"])
    loaded = [n for n, _ in model.named_parameters() if ".lora_" in n]
    assert loaded and all(".layers.1." in n for n in loaded)


def test_last_layers_under_gradient_checkpointing_says_it_loses_its_speed(checkpoints, data_dir, tmp_path):
    args = _overrides(checkpoints["llama"], data_dir, tmp_path / "o", "lora.last_layers=1")
    res = run(config_from_overrides([*args, "train.gradient_checkpointing=true"]))
    assert any("lora.last_layers with gradient checkpointing" in note for note in res["match_func"].metrics["notes"])


def test_the_gemma3_profile_still_refuses_another_architecture(checkpoints, data_dir, tmp_path):
    cfg = config_from_overrides(_overrides(checkpoints["llama"], data_dir, tmp_path, "model=gemma3_12b"))
    from forethought.errors import UserError

    with pytest.raises(UserError, match="expected a Gemma 3 checkpoint.*model=causal_lm"):
        run(cfg)


def test_a_checkpoint_that_is_not_a_causal_lm_is_a_located_error(data_dir, tmp_path, capsys):
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text('{"model_type": "bert_nonexistent"}')
    rc = forethought_main(["train", *_overrides(tmp_path / "bert", data_dir, tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "config.json" in err and "not a causal LM" in err and "Traceback" not in err


# --- QLoRA: the config checks run everywhere; the 4-bit load only on a CUDA GPU with bitsandbytes ---


@pytest.fixture
def no_bitsandbytes(monkeypatch):
    """Importing bitsandbytes fails: the config path must not try to."""
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)


def test_qlora_profile_config_is_valid_without_bitsandbytes(no_bitsandbytes):
    cfg = config_from_overrides(["model=gemma3_12b_qlora", "train=gemma3_12b_qlora"])
    assert cfg.model.quantization == "4bit" and cfg.model.profile == "gemma3_12b"
    assert cfg.train.per_device_batch_size * cfg.train.gradient_accumulation_steps == 8
    assert cfg.train.gradient_checkpointing is True


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model=gemma3_12b_qlora", "train.finetuning=full"], "frozen 4-bit base"),
        (["model=gemma3_12b_qlora", "train.device=cpu"], "needs a CUDA GPU"),
        (["model=gemma3_12b_qlora", "model.dtype=float32"], "computes in bfloat16"),
        (["model=tiny", "+model.quantization=4bit"], "for pretrained checkpoints"),
    ],
)
def test_qlora_config_refusals(no_bitsandbytes, overrides, message):
    with pytest.raises(ConfigError, match=message):
        config_from_overrides(overrides)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU refusal; a GPU machine runs the 4-bit test below")
def test_qlora_on_a_cpu_machine_is_a_clear_error(no_bitsandbytes, checkpoints, data_dir, tmp_path, capsys):
    args = _overrides(checkpoints["llama"], data_dir, tmp_path / "o", "model.quantization=4bit", "train.device=auto")
    rc = forethought_main(["train", *args])
    err = capsys.readouterr().err
    assert rc == 2 and "model.quantization" in err and "needs a CUDA GPU" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "match_func").exists()


def test_the_4bit_load_asks_for_nf4_double_quantisation_in_bf16(monkeypatch, tmp_path):
    """What reaches from_pretrained (recorded; no GPU, no bitsandbytes needed)."""
    import importlib.util

    from transformers import AutoModelForCausalLM

    from forethought.bundle.models import load_model

    calls = {}

    class Fake:
        pass

    def from_pretrained(path, **kwargs):
        calls.update(kwargs)
        return Fake(), {"missing_keys": [], "mismatched_keys": []}

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *args: object() if name == "bitsandbytes" else real(name, *args)
    )
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", staticmethod(from_pretrained))
    monkeypatch.delenv("ACCELERATE_USE_FSDP", raising=False)
    load_model(tmp_path, dtype=torch.bfloat16, attn_implementation="sdpa", device="cuda", quantization="4bit")
    quant_config = calls["quantization_config"]
    assert (
        quant_config.load_in_4bit
        and quant_config.bnb_4bit_quant_type == "nf4"
        and quant_config.bnb_4bit_use_double_quant
    )
    assert quant_config.bnb_4bit_compute_dtype == torch.bfloat16


@pytest.mark.skipif(
    not torch.cuda.is_available() or __import__("importlib").util.find_spec("bitsandbytes") is None,
    reason="QLoRA needs a CUDA GPU and bitsandbytes",
)
def test_qlora_trains_two_steps_on_a_gpu(checkpoints, data_dir, tmp_path):
    args = _overrides(checkpoints["llama"], data_dir, tmp_path, "model.quantization=4bit", "train.device=cuda")
    res = run(config_from_overrides(args))["match_func"]
    assert res.metrics["global_step"] == 2 and res.metrics["dtype"] == "bfloat16"
    model, _ = artifacts.load_adapters(tmp_path, ["match_func"])  # the adapter loads on the unquantised base
