#!/usr/bin/env bash
# Downloads, into .whl/ (git-ignored), the wheels that scripts/gpu_bench_on_device.sh installs on a
# bare GPU machine of the project's `device` tool. That machine's image (Python 3.12, x86-64) has
# torch, accelerate, peft, tokenizers and huggingface-hub but no trl or datasets, and an older
# transformers (5.17 when last listed), and it cannot reach a package index. The pins are the
# versions this project is tested with here (pyproject.toml), so the GPU figures come from the
# same library code as the CPU tests. About 17 MB; the device tool carries at most 64 MiB.
#
#   bash scripts/fetch_gpu_wheels.sh            # Python 3.12 wheels for the device machine
#   PYVER=3.11 bash scripts/fetch_gpu_wheels.sh # another Python (to rehearse the install here)
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${PYVER:-3.12}
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  transformers==5.24.0 trl==1.16.0 datasets==5.2.0 peft==0.21.2 \
  dill==0.4.1 multiprocess==0.70.19 regex==2026.11.19 2>&1 | grep -v "is ignored: it is neither" || true
n=$(ls .whl/*.whl | wc -l)
[ "$n" -eq 7 ] || { echo "fetch_gpu_wheels: expected 7 wheels in .whl/, got $n" >&2; exit 1; }
du -sh .whl
