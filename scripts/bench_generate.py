"""Dataset generation throughput: examples/s of `forethought generate` at the default (Table 4) sizes.

    python scripts/bench_generate.py [--repeats 3] [--workers 2]

Prints the median wall time and examples/s over the repeats (one process each
time, outputs in a temporary folder).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forethought.data_gen.generate import DataConfig, generate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--solutions", default="data_gen/solutions")
    options = ap.parse_args()
    times, n = [], 0
    for _ in range(options.repeats):
        with tempfile.TemporaryDirectory() as folder:
            cfg = DataConfig(solutions=[options.solutions], output_dir=folder, workers=options.workers)
            t0 = time.perf_counter()
            stats = generate(cfg)
            times.append(time.perf_counter() - t0)
            n = stats["examples"]
            print(f"  run: {times[-1]:.1f} s, {n} examples, {stats['variants_replayed']} variants replayed")
    med = statistics.median(times)
    print(f"examples: {n}, workers: {options.workers}, median {med:.1f} s -> {n / med:.0f} examples/s")


if __name__ == "__main__":
    main()
