#!/usr/bin/env bash
# Runs scripts/bench_gpu_lora.py on a bare GPU machine in one call (the device tool's machines
# start empty and cost device time while held, so everything happens in this one script):
#   1. installs the wheels carried in .whl/ (scripts/fetch_gpu_wheels.sh) over the image's
#      packages, without an index and without touching the image's torch;
#   2. records the GPU, driver and library versions next to the figures;
#   3. runs the benchmark and writes its JSON, log and versions under $OUT.
# Extra arguments go to bench_gpu_lora.py (e.g. --settings ours,ours_no_gc --time-budget 200).
#
#   run(command="bash scripts/gpu_bench_on_device.sh", carry=[".whl"], timeout_s=540)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 WANDB_MODE=offline TOKENIZERS_PARALLELISM=false
PY=${PYTHON:-python3}
WHEELS=${WHEELS_DIR:-.whl}
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  rm -rf /tmp/site
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
    || { echo "gpu_bench_on_device: installing $WHEELS/*.whl failed" >&2; exit 3; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
else
  echo "gpu_bench_on_device: no wheels in $WHEELS/; using the installed packages as they are" >&2
fi
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$PY" - <<'PYEOF'
import importlib.metadata as md
import platform
print("python", platform.python_version())
for name in ["torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers", "huggingface-hub",
             "safetensors", "regex", "pyarrow", "flash-attn", "liger-kernel"]:
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "not installed")
PYEOF
} 2>&1 | tee "$OUT/environment.txt"
"$PY" scripts/bench_gpu_lora.py --json "$OUT/bench_gpu_lora.json" "$@" 2>&1 | tee "$OUT/bench_gpu_lora.log"
exit "${PIPESTATUS[0]}"
