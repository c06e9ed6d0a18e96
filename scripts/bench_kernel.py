"""Kernel overhead on the worked solutions with the oracle backend (no model time at all).

Prints the symbolic overhead per task (everything the kernel does around the
primitives: engine, contracts, ToolGate gates, lookups, tool execution) and
two ratios on the same scenarios, medians of repeated runs in one process:

- checked / unchecked: the same kernel program with every step's output
  contract checked vs. not checked (the cost of checking);
- CVC on / CVC off: the whole contract-and-control layer (contracts,
  prerequisite checks, ToolGate gates, recovery) vs. the primitives chained
  without it (the paper's ablation; CVC on also does more work).

    python scripts/bench_kernel.py [--repeats 7] [--trace off|steps|full] [paths...]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forethought.kernel.program import Kernel  # noqa: E402
from forethought.kernel.records import KernelConfig  # noqa: E402
from forethought.kernel.runner import oracle_factory, run_solution  # noqa: E402
from forethought.kernel.solution_file import load_solution, solution_files  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*", default=["data_gen/solutions"])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--trace", default="steps", choices=["off", "steps", "full"])
    options = ap.parse_args()
    sols = [load_solution(f).rendered() for f in solution_files(options.paths)]
    kernels = {
        "checked": Kernel(KernelConfig(cvc=True)),
        "unchecked": Kernel(KernelConfig(cvc=True, check_contracts=False)),
        "cvc_off": Kernel(KernelConfig(cvc=False)),
    }
    names = list(kernels)
    times: dict[str, list[float]] = {kernel: [] for kernel in kernels}
    tasks = turns = 0
    for rep in range(options.repeats + 1):
        for name in names[rep % 3 :] + names[: rep % 3]:  # rotate the order to spread drift
            kernel = kernels[name]
            gc.collect()
            gc.disable()  # as timeit does: collector pauses land on whichever run happens to trigger them
            t0 = time.perf_counter()
            n_tasks = n_turns = 0
            for solution in sols:
                res = run_solution(solution, kernel, oracle_factory(solution), trace=options.trace)
                n_turns += len(res.turns)
                n_tasks += sum(len(t.order) for t in res.turns)
            dt = time.perf_counter() - t0
            gc.enable()
            if rep > 0:  # the first round warms caches and imports
                times[name].append(dt)
            if name == "checked":
                tasks, turns = n_tasks, n_turns
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"scenarios: {len(sols)}, turns: {turns}, tasks: {tasks}, repeats: {options.repeats}, trace: {options.trace}")
    print(
        f"checked (CVC on):            median {med['checked']:.3f} s -> {1e3 * med['checked'] / tasks:.3f} ms per task, "
        f"{1e3 * med['checked'] / turns:.3f} ms per turn"
    )
    print(
        f"unchecked (contracts off):   median {med['unchecked']:.3f} s -> {1e3 * med['unchecked'] / tasks:.3f} ms per task"
    )
    print(
        f"CVC off (ablation):          median {med['cvc_off']:.3f} s -> {1e3 * med['cvc_off'] / tasks:.3f} ms per task"
    )
    print(f"checked / unchecked ratio:   {med['checked'] / med['unchecked']:.3f}")
    print(f"CVC on / CVC off ratio:      {med['checked'] / med['cvc_off']:.3f}")


if __name__ == "__main__":
    main()
