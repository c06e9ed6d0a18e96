"""Greedy generation throughput of the hf backend (what `forethought validate` and the kernel use).

Builds the tiny profile's base (random weights) from a dataset folder, then decodes
validation prompts of each primitive at several batch sizes; prints examples/s and
new tokens/s (medians over repeats). Tiny random models never emit the end-of-turn
token, so every example runs to --max-new-tokens: this measures the decoding loop.

    python scripts/bench_generation.py --dataset-dir runs/pipeline/data [--batch-sizes 1,8,16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset-dir", default="runs/pipeline/data")
    ap.add_argument("--base", default=None, help="a saved base model folder (default: build the tiny base)")
    ap.add_argument("--primitives", default="match_func,decompose")
    ap.add_argument("--batch-sizes", default="1,8,16")
    ap.add_argument("--examples", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    options = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from forethought.data_gen.row import read_rows
    from forethought.kernel.backends.hf import generate

    if options.base is None:
        from forethought.training.config import TinyShape
        from forethought.training.tiny import build_tiny_base

        tmp = tempfile.mkdtemp()
        base = build_tiny_base(options.dataset_dir, TinyShape(), 0, Path(tmp) / "base")
    else:
        base = Path(options.base)
    model = AutoModelForCausalLM.from_pretrained(base).eval()
    tok = AutoTokenizer.from_pretrained(base)
    print(
        f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params, torch threads {torch.get_num_threads()}"
    )
    for prim in options.primitives.split(","):
        rows = read_rows(options.dataset_dir, prim, "validation", limit=options.examples)
        msgs = [r.prompt_messages() for r in rows]
        for bs in [int(x) for x in options.batch_sizes.split(",")]:
            generate(model, tok, msgs[:bs], adapter=None, batch_size=bs, max_new_tokens=4)  # warm-up
            times = []
            for _ in range(options.repeats):
                t0 = time.perf_counter()
                generate(model, tok, msgs, adapter=None, batch_size=bs, max_new_tokens=options.max_new_tokens)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            print(
                f"{prim:<12} batch {bs:>3}: {len(msgs) / med:6.2f} examples/s, {len(msgs) * options.max_new_tokens / med:7.0f} new tokens/s "
                f"(median of {options.repeats}, {len(msgs)} examples)"
            )


if __name__ == "__main__":
    main()
