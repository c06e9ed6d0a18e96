#!/usr/bin/env python
"""CPU training throughput of the tiny profile on a realistic-size fabricated dataset.

Writes a fabricated dataset in the real format, rendered through the specs (``forethought.training.synthetic``, scale
"realistic": prompts of a few hundred to ~1,500 tokens), then runs the real
``forethought train`` code path and prints tokens/s, seconds/step and wall time.

    python scripts/bench_train.py                       # 40 steps of match_func, train=quick settings
    python scripts/bench_train.py --primitive all --preset default --n-train 1500   # the real default (long)
    python scripts/bench_train.py --override model.tiny.hidden_size=64
    python scripts/bench_train.py --model causal_lm --override model.path=runs/smollm2 --override lora.last_layers=6

Nothing is downloaded; results go to a temporary folder unless --out is given.
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
    ("WANDB_MODE", "offline"),
    ("TOKENIZERS_PARALLELISM", "false"),
):
    os.environ.setdefault(variable, value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--primitive", default="match_func", help="one primitive or 'all'")
    ap.add_argument("--preset", default="quick", help="train/ preset: quick | default | paper")
    ap.add_argument(
        "--model", default="tiny", help="model/ profile: tiny | small (built here) | causal_lm (model.path=)"
    )
    ap.add_argument("--steps", type=int, default=40, help="max_steps (ignored with --epochs-run)")
    ap.add_argument("--epochs-run", action="store_true", help="run the preset's epochs instead of --steps")
    ap.add_argument("--n-train", type=int, default=1500)
    ap.add_argument("--n-val", type=int, default=150)
    ap.add_argument("--data", help="existing dataset folder (default: fabricate one)")
    ap.add_argument("--out", help="output folder (default: a temporary folder)")
    ap.add_argument("--override", action="append", default=[], help="extra key=value overrides")
    ap.add_argument("--json", help="also write the report here")
    options = ap.parse_args(argv)

    import torch

    from forethought.training.synthetic import write_dataset
    from forethought.training.train import config_from_overrides, run

    tmp = tempfile.mkdtemp(prefix="ft-bench-")
    data = (
        Path(options.data)
        if options.data
        else write_dataset(Path(tmp) / "data", n_train=options.n_train, n_val=options.n_val, seed=0, scale="realistic")
    )
    out = Path(options.out) if options.out else Path(tmp) / "out"
    ov = [
        f"primitive={options.primitive}",
        f"model={options.model}",
        f"train={options.preset}",
        f"dataset_dir={data}",
        f"output_dir={out}",
        "logging=none",
        "train.device=cpu",
    ]
    if options.model in ("tiny", "small"):
        ov.append("model.pretrain=null")  # adapter throughput only: the base stage is scripts/bench_cpu_settings.py's
    if not options.epochs_run:
        ov.append(f"train.max_steps={options.steps}")
    ov += options.override
    cfg = config_from_overrides(ov)
    t0 = time.perf_counter()
    results = run(cfg)
    wall = time.perf_counter() - t0
    rows = []
    for primitive, result in results.items():
        metrics = result.metrics
        rows.append(
            {
                "primitive": primitive,
                "steps": metrics["global_step"],
                "tokens": metrics["tokens_this_session"],
                "tokens_per_second": metrics["tokens_per_second"],
                "seconds_per_step": round(
                    metrics["train_seconds_this_session"] / max(1, metrics["steps_this_session"]), 3
                ),
                "train_seconds": metrics["train_seconds_this_session"],
                "wall_seconds": metrics["wall_time_s"],
                "eval_loss": metrics["eval_loss"],
            }
        )
    report = {
        "command": "python scripts/bench_train.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "overrides": ov,
        "machine": f"{platform.machine()} {os.cpu_count()} CPU threads visible, torch {torch.__version__}, {torch.get_num_threads()} torch threads",
        "total_wall_seconds": round(wall, 1),
        "runs": rows,
    }
    print(json.dumps(report, indent=2))
    if options.json:
        Path(options.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)  # fabricated data and default output (not --data / --out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
