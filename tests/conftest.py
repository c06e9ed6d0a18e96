"""Shared, expensive fixtures: one tiny end-to-end pipeline run serves every test that needs trained adapters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURE_SOLUTIONS = Path(__file__).parent / "fixtures" / "solutions"
TINY_SIZES = "{decompose:24,get_order:12,check_prerequisites:12,match_func:24,match_fill:12}"


def tiny_pipeline_args(run_dir: Path) -> list[str]:
    """A pipeline small enough for the test suite: fixture solutions, 2 training steps, a few generations."""
    return [
        "pipeline",
        f"run_dir={run_dir}",
        f'overrides.generate=["data.solutions=[{FIXTURE_SOLUTIONS}]","data.sizes={TINY_SIZES}","data.workers=1","data.validation_fraction=0.25"]',
        'overrides.train=["model=tiny","train=quick","train.max_steps=2","train.max_eval_examples=4","model.tiny.vocab_size=1024","logging=none"]',
        'overrides.validate=["max_examples=4","max_new_tokens=8"]',
        'overrides.package=["allow_failed_gates=true"]',
        'overrides.evaluate=["max_scenarios=2","backend.max_new_tokens=8","backend.allow_smoke=true","kernel.retries=0"]',
    ]


@pytest.fixture(scope="session")
def tiny_pipeline(tmp_path_factory) -> Path:
    from forethought.cli import main

    run = tmp_path_factory.mktemp("pipeline") / "run"
    assert main(tiny_pipeline_args(run)) == 0
    return run
