#!/usr/bin/env python
"""CPU training throughput: forethought's settings against trl's ``SFTConfig`` defaults, in one run.

Same model (a built-here base's random initialisation, ``model=tiny`` or ``model=small`` shape), same
generated data (all five train splits mixed, as the base stage sees them), same number of optimizer
steps; only the trainer settings differ. trl's defaults need two changes to run on a CPU at all
(``bf16=True`` raises there, and ``use_cpu`` must be set); everything else is left at trl's value
(gradient checkpointing on, no packing, batch 8, max_length 1024, every position through the LM head). Prints non-padding training tokens
per second per setting and the ratio to trl's defaults.

    python scripts/bench_cpu_settings.py --data runs/pipeline/data --model small --steps 30

Nothing is downloaded; results go to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
for variable, value in (
    ("HF_HUB_OFFLINE", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("HF_DATASETS_DISABLE_PROGRESS_BARS", "1"),
):
    os.environ.setdefault(variable, value)


def settings(max_length: int) -> dict[str, dict]:
    trl_defaults = {"use_cpu": True, "bf16": False}  # the minimum for trl's defaults to run on a CPU
    # compact_lm_head: training/lm_head.py (score only the labelled positions on CPU), not an SFTConfig field
    ours = {
        **trl_defaults,
        "activation_checkpointing": False,
        "dataloader_pin_memory": False,
        "max_length": max_length,
        "completion_only_loss": True,
        "compact_lm_head": True,
    }
    return {
        "trl SFTConfig defaults": trl_defaults,
        "ours, no packing (bs 8)": {**ours, "per_device_train_batch_size": 8, "packing": False},
        "ours, packing, trl's LM head": {
            **ours,
            "per_device_train_batch_size": 2,
            "packing": True,
            "compact_lm_head": False,
        },
        "ours, packing (2 rows)": {**ours, "per_device_train_batch_size": 2, "packing": True},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a `forethought generate` output folder")
    ap.add_argument("--model", default="small", help="model shape: tiny | small")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, nargs="+", default=[2], help="torch threads to measure (e.g. 1 2)")
    ap.add_argument("--json", help="also write the figures here")
    options = ap.parse_args(argv)

    import datasets
    import torch
    from trl import SFTConfig, SFTTrainer

    from forethought.bundle.models import load_model, load_tokenizer
    from forethought.training import lm_head, pretrain
    from forethought.training.callbacks import Throughput
    from forethought.training.train import config_from_overrides

    tmp = Path(tempfile.mkdtemp(prefix="ft-bench-cpu-"))
    cfg = config_from_overrides(
        [f"model={options.model}", f"dataset_dir={options.data}", f"output_dir={tmp}", "logging=none"]
    )
    init = pretrain._init(cfg, tmp)
    tok = load_tokenizer(init)
    rows = pretrain.mixed_train_rows(cfg)[: options.steps * 16]  # enough rows for every setting's steps
    results = []
    for threads in options.threads:
        torch.set_num_threads(threads)
        for name, kw in settings(cfg.model.pretrain.max_length if cfg.model.pretrain else 1536).items():
            kw = dict(kw)
            if kw.pop("compact_lm_head", False):
                lm_head.compact_on_cpu()
            else:
                lm_head.restore()
            model = load_model(init, dtype=torch.float32, attn_implementation="sdpa")
            tp = Throughput()
            args = SFTConfig(
                output_dir=str(tmp / "ckpt"),
                max_steps=options.steps,
                save_strategy="no",
                report_to="none",
                disable_tqdm=True,
                logging_steps=options.steps,
                include_num_input_tokens_seen="non_padding",
                seed=0,
                **kw,
            )
            trainer = SFTTrainer(
                model=model,
                args=args,
                train_dataset=datasets.Dataset.from_list(rows),
                processing_class=tok,
                callbacks=[tp],
            )
            t0 = time.perf_counter()
            trainer.train()
            summary = tp.summary()
            results.append(
                {
                    "setting": name,
                    "threads": threads,
                    "tokens_per_second": summary["tokens_per_second"],
                    "tokens": summary["tokens_this_session"],
                    "seconds": round(time.perf_counter() - t0, 1),
                }
            )
            print(json.dumps(results[-1]), flush=True)
    for result in results:
        ref = next(x for x in results if x["threads"] == result["threads"] and x["setting"] == "trl SFTConfig defaults")
        result["ratio_to_trl_defaults"] = round(result["tokens_per_second"] / ref["tokens_per_second"], 2)
    print(
        f"\nmodel={options.model}, {options.steps} steps per setting, {platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}"
    )
    print(f"{'setting':<28} {'threads':>7} {'tokens/s':>9} {'vs trl':>7}")
    for row in results:
        print(
            f"{row['setting']:<28} {row['threads']:>7} {row['tokens_per_second']:>9.0f} {row['ratio_to_trl_defaults']:>6.2f}x"
        )
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
