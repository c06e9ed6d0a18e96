#!/usr/bin/env python
"""LoRA SFT throughput, MFU and peak memory on a Gemma-3-12B-shaped model (one GPU).

The model is a randomly initialised ``Gemma3ForCausalLM`` with Gemma-3-12B's text
dimensions (hidden 3840, 48 layers, 16 heads / 8 KV heads, head_dim 256, MLP 15360,
vocab 262208): the same compute and memory as the real language model, no weights
needed. Data are random token sequences shaped like forethought's SFT data (prompt
100-1500 tokens, completion 10-300, loss on the completion only), already tokenized.

Settings compared (all with forethought's LoRA defaults, ``conf/lora/default.yaml``: r=16,
alpha 32, dropout 0.05 on q,k,v,o,gate,up,down; dropout keeps one extra activation per adapted
module, which matters for the peak memory):

- ``trl_defaults``: ``SFTConfig`` defaults (bf16, gradient checkpointing, batch 8,
  max_length 1024, no packing).
- ``ours``: forethought's GPU defaults (bf16, gradient checkpointing, batch 8,
  max_length 2048, sdpa).
- ``ours_no_gc``: without gradient checkpointing (faster when it fits).
- ``ours_packing``: packing (BFD, padding-free) with flash-attention 2 when installed,
  else sdpa (transformers separates packed sequences by position_ids).
- ``ours_liger``: Liger kernels, only when ``liger-kernel`` is installed.

Each setting runs on a freshly built model: ``--warmup`` steps, then ``--steps``
timed steps. An out-of-memory setting is reported as OOM and the next one runs.

    python scripts/bench_gpu_lora.py                     # one GPU (refuses to run without CUDA)
    python scripts/bench_gpu_lora.py --json bench.json   # also write the results
    python scripts/bench_gpu_lora.py --smoke             # tiny shape on CPU: checks the script runs

Designed to finish within ~5 minutes on one H200 (``--time-budget`` skips the
remaining settings when exceeded).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for _k, _v in (
    ("HF_HUB_OFFLINE", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("WANDB_MODE", "offline"),
    ("TOKENIZERS_PARALLELISM", "false"),
):
    os.environ.setdefault(_k, _v)

GEMMA3_12B = dict(
    vocab_size=262208,
    hidden_size=3840,
    intermediate_size=15360,
    num_hidden_layers=48,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=256,
    query_pre_attn_scalar=256,
    sliding_window=1024,
    max_position_embeddings=131072,
    rope_parameters={
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    },
)
SMOKE = dict(
    vocab_size=1024,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    query_pre_attn_scalar=32,
    sliding_window=64,
    max_position_embeddings=4096,
)


def lora_config():
    """forethought's own LoRA settings (training/config.py defaults), not a copy of them."""
    from peft import LoraConfig

    from forethought.training.config import LoraSettings

    settings = LoraSettings()
    return LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        task_type="CAUSAL_LM",
    )


# Dense bf16 peak (no sparsity), TFLOP/s.
PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "H800": 989.4, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def peak_flops(name: str, override: float | None) -> tuple[float, str]:
    if override:
        return override * 1e12, "--peak-tflops"
    for key, tf in PEAK_TFLOPS.items():
        if key in name:
            return tf * 1e12, f"{key} dense bf16"
    return 989.4e12, "unknown GPU: assumed 989.4 TFLOP/s (pass --peak-tflops)"


def flops_per_token(shape: dict[str, int], mean_ctx: float, completion_fraction: float) -> float:
    """Model FLOPs per input token for LoRA SFT (no recompute counted, so this is MFU, not HFU).

    Frozen base: forward 2P, backward only input-gradients 2P (no weight gradients) -> 4P for
    the decoder matmuls; attention scores/values 4*d_attn*ctx forward, twice that backward; the
    LM head 2*V*h forward + 2*V*h backward, counted only at completion positions (the loss needs
    no logits elsewhere; computing them anyway is overhead, so it lowers MFU). LoRA's own FLOPs
    are < 1 % at r=16 and left out.
    """
    hidden, intermediate, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    dq = shape["num_attention_heads"] * shape["head_dim"]
    dkv = shape["num_key_value_heads"] * shape["head_dim"]
    p_layer = hidden * dq + 2 * hidden * dkv + dq * hidden + 3 * hidden * intermediate
    # five of six layers attend within the sliding window
    window = shape["sliding_window"]
    ctx_local, ctx_global = min(mean_ctx, window), mean_ctx
    attn = sum(4 * dq * (ctx_global if (k + 1) % 6 == 0 else ctx_local) for k in range(layers))
    head = 4 * shape["vocab_size"] * hidden * completion_fraction
    return 4 * p_layer * layers + 3 * attn + head


def make_data(n: int, vocab: int, seed: int, max_prompt: int, max_completion: int):
    import random

    from datasets import Dataset

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        prompt_length, completion_length = rng.randint(100, max_prompt), rng.randint(10, max_completion)
        rows.append(
            {
                "input_ids": [rng.randrange(10, vocab) for _ in range(prompt_length + completion_length)],
                "completion_mask": [0] * prompt_length + [1] * completion_length,
            }
        )
    return Dataset.from_list(rows)


def tokenizer_stub():
    """A small offline tokenizer: the data are pre-tokenized, the trainer only needs pad/eos ids."""
    from forethought.training.tiny import build_tokenizer

    return build_tokenizer(["forethought benchmark text"] * 10, 300)


def build_model(shape: dict[str, Any], device: str, dtype, attn: str):
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    n = shape["num_hidden_layers"]
    cfg = Gemma3TextConfig(
        **shape, layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    )
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    with torch.device(device):
        model = Gemma3ForCausalLM._from_config(cfg, dtype=dtype, attn_implementation=attn)
    return model


class StepTimer:
    def __init__(self, warmup: int, device: str):
        from transformers import TrainerCallback

        outer = self

        class _CB(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                if device == "cuda":
                    import torch

                    torch.cuda.synchronize()
                if state.global_step == warmup:
                    outer.t0, outer.tok0 = time.perf_counter(), state.num_input_tokens_seen
                outer.t1, outer.tok1, outer.steps = time.perf_counter(), state.num_input_tokens_seen, state.global_step

        self.cb = _CB()
        self.t0 = self.t1 = 0.0
        self.tok0 = self.tok1 = 0
        self.steps = 0


def run_setting(name: str, options, shape, device: str, data, tok, peak: float) -> dict[str, Any]:
    import torch
    from trl import SFTConfig, SFTTrainer

    smoke = options.smoke
    dtype = torch.float32 if smoke else torch.bfloat16
    attn = "sdpa"
    out_dir = tempfile.mkdtemp(prefix=f"bench-{name}-")
    common: dict[str, Any] = dict(
        output_dir=out_dir,
        max_steps=options.warmup + options.steps,
        report_to="none",
        save_strategy="no",
        logging_steps=1000,
        disable_tqdm=True,
        include_num_input_tokens_seen="non_padding",
        completion_only_loss=True,
        dataloader_pin_memory=not smoke,
        seed=0,
    )
    if smoke:
        common.update(use_cpu=True, bf16=False)  # trl's default bf16 fails on CPU
    note = ""
    if name == "trl_defaults":
        kw = common
    else:
        kw = dict(
            common,
            per_device_train_batch_size=8,
            max_length=2048,
            learning_rate=2e-4,
            bf16=not smoke,
            activation_checkpointing=not smoke,
            activation_checkpointing_kwargs={"use_reentrant": False} if not smoke else None,
        )
        if name == "ours_no_gc":
            kw.update(activation_checkpointing=False, activation_checkpointing_kwargs=None)
        elif name == "ours_packing":
            kw.update(packing=True, packing_strategy="bfd")
            try:
                import flash_attn  # noqa: F401

                attn = "flash_attention_2"
            except ImportError:
                note = "flash-attn not installed: sdpa with position_ids"
        elif name == "ours_liger":
            kw.update(use_liger_kernel=True)
    if smoke and "activation_checkpointing" in kw:
        kw["activation_checkpointing"] = name == "ours"  # exercise both paths on CPU
        kw["activation_checkpointing_kwargs"] = {"use_reentrant": False} if kw["activation_checkpointing"] else None
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t_build = time.perf_counter()
    row: dict[str, Any] = {"setting": name, "attn": attn, "note": note}
    try:
        model = build_model(shape, device, dtype, attn)
        row["build_s"] = round(time.perf_counter() - t_build, 1)
        timer = StepTimer(options.warmup, device)
        args = SFTConfig(**kw)
        row.update(
            batch=args.per_device_train_batch_size,
            max_length=args.max_length,
            grad_ckpt=bool(args.gradient_checkpointing),
            packing=args.packing,
        )
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=data,
            processing_class=tok,
            peft_config=lora_config(),
            callbacks=[timer.cb],
        )
        trainer.train()
        seconds = timer.t1 - timer.t0
        tokens = timer.tok1 - timer.tok0
        tps = tokens / seconds if seconds > 0 else float("nan")
        ds = trainer.train_dataset
        lens = [len(x) for x in ds["input_ids"]]
        labels = ds["labels"]
        comp = sum(sum(1 for t in lab if t != -100) for lab in labels) / max(1, sum(lens))
        # average causal context per token; a packed row attends within each of its sequences
        seqs = [n for row in ds["seq_lengths"] for n in row] if "seq_lengths" in ds.column_names else lens
        mean_ctx = sum(n * n for n in seqs) / max(1, sum(seqs)) / 2
        fpt = flops_per_token(shape, mean_ctx, comp)
        row.update(
            tokens_per_s=round(tps, 1),
            s_per_step=round(seconds / max(1, options.steps), 3),
            gflop_per_token=round(fpt / 1e9, 1),
            mfu=round(tps * fpt / peak, 4) if device == "cuda" else None,
            peak_mem_gib=round(torch.cuda.max_memory_allocated() / 2**30, 1) if device == "cuda" else None,
        )
        del trainer
        del model
    except torch.OutOfMemoryError:
        row.update(tokens_per_s=None, note=(note + "; " if note else "") + "OOM")
    except Exception as exc:  # one failing setting must not hide the others
        row.update(
            tokens_per_s=None,
            note=(note + "; " if note else "") + f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}",
        )
    finally:
        import shutil

        shutil.rmtree(out_dir, ignore_errors=True)
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--smoke", action="store_true", help="tiny shape on CPU (no GPU needed): checks that the script runs"
    )
    ap.add_argument("--steps", type=int, default=None, help="timed steps per setting (default 6; smoke 1)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 2; smoke 1)")
    ap.add_argument("--examples", type=int, default=None, help="dataset size (default 256; smoke 24)")
    ap.add_argument("--settings", default="trl_defaults,ours,ours_no_gc,ours_packing,ours_liger")
    ap.add_argument(
        "--peak-tflops", type=float, default=None, help="dense bf16 peak of the GPU (default: from its name)"
    )
    ap.add_argument("--time-budget", type=float, default=270.0, help="seconds; remaining settings are skipped past it")
    ap.add_argument("--json", help="write the results here too")
    options = ap.parse_args(argv)

    import torch

    if not options.smoke and not torch.cuda.is_available():
        print(
            "bench_gpu_lora: no CUDA device. This benchmark needs a GPU; use --smoke for a tiny CPU check.",
            file=sys.stderr,
        )
        return 2
    device = "cpu" if options.smoke else "cuda"
    options.steps = options.steps or (1 if options.smoke else 6)
    options.warmup = options.warmup if options.warmup is not None else (1 if options.smoke else 2)
    n_examples = options.examples or (24 if options.smoke else 256)
    shape = SMOKE if options.smoke else GEMMA3_12B
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    peak, peak_src = peak_flops(gpu, options.peak_tflops) if device == "cuda" else (float("nan"), "n/a")
    data = make_data(n_examples, shape["vocab_size"], 0, 200 if options.smoke else 1500, 40 if options.smoke else 300)
    tok = tokenizer_stub()

    settings = [s.strip() for s in options.settings.split(",") if s.strip()]
    if "ours_liger" in settings:
        import importlib.util

        if device != "cuda" or importlib.util.find_spec("liger_kernel") is None:
            settings.remove("ours_liger")
    t_start = time.perf_counter()
    rows = []
    for name in settings:
        if time.perf_counter() - t_start > options.time_budget:
            rows.append({"setting": name, "tokens_per_s": None, "note": "skipped: time budget"})
            continue
        rows.append(run_setting(name, options, shape, device, data, tok, peak))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)

    import transformers
    import trl

    report = {
        "device": gpu,
        "peak_flops": peak if device == "cuda" else None,
        "peak_source": peak_src,
        "shape": "smoke" if options.smoke else "gemma-3-12b text",
        "steps": options.steps,
        "warmup": options.warmup,
        "examples": n_examples,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__},
        "total_s": round(time.perf_counter() - t_start, 1),
        "results": rows,
    }
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"LoRA SFT, {report['shape']} on {gpu}")
    cols = [
        "setting",
        "batch",
        "max_length",
        "grad_ckpt",
        "packing",
        "attn",
        "tokens_per_s",
        "s_per_step",
        "mfu",
        "peak_mem_gib",
        "note",
    ]
    for column in cols:
        table.add_column(column)
    for row in rows:
        table.add_row(
            *[
                "-" if row.get(column) is None else (f"{row[column]:.1%}" if column == "mfu" else str(row[column]))
                for column in cols
            ]
        )
    Console(width=200).print(table)  # logs are piped: keep the columns readable
    if options.json:
        Path(options.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report))
    ran = [row for row in rows if "skipped" not in (row.get("note") or "")]
    if options.smoke:  # every setting must run on CPU
        return 0 if all(row.get("tokens_per_s") for row in ran) else 1
    # on a GPU an OOM setting is a result, but none running at all is a failure
    return 0 if any(row.get("tokens_per_s") for row in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
