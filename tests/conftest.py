"""Shared, expensive fixtures: one tiny end-to-end pipeline run serves every test that needs trained adapters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings as _hypothesis_settings

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURE_SOLUTIONS = Path(__file__).parent / "fixtures" / "solutions"


def sizes_override(**sizes: int) -> str:
    """``data.sizes`` for every registered primitive: 12 examples, or the number given for it."""
    from forethought.kernel.specs import PRIMITIVE_NAMES

    return "{" + ",".join(f"{p}:{sizes.get(p, 12)}" for p in PRIMITIVE_NAMES) + "}"


# Property tests draw the same examples on every run (a CI run must not depend on luck); a failure found once is
# kept as an explicit @example.
_hypothesis_settings.register_profile("deterministic", derandomize=True)
_hypothesis_settings.load_profile("deterministic")

TINY_SIZES = sizes_override(decompose=24, match_func=24)
# `forethought generate` on the fixture solutions with small per-primitive sizes (about a second).
TINY_GENERATE = [
    f"data.solutions=[{FIXTURE_SOLUTIONS}]",
    f"data.sizes={TINY_SIZES}",
    "data.workers=1",
    "data.validation_fraction=0.25",
]


def tiny_pipeline_args(run_dir: Path) -> list[str]:
    """A pipeline small enough for the test suite: fixture solutions, 2 training steps, a few generations."""
    return [
        "pipeline",
        f"run_dir={run_dir}",
        "overrides.generate=[" + ",".join(f'"{o}"' for o in TINY_GENERATE) + "]",
        'overrides.train=["model=tiny","train=quick","train.max_steps=2","train.max_eval_examples=4","model.tiny.vocab_size=1024","logging=none",'
        '"model.pretrain.max_steps=2","model.pretrain.em_eval_steps=null","train.em_eval_steps=null"]',
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


@pytest.fixture(scope="session")
def generated_data(tmp_path_factory) -> Path:
    """Real SFT data: `forethought generate` on the fixture solutions (the five primitives, train + validation).

    Shared read-only: tests that change files copy it first.
    """
    from forethought.cli import main

    out = tmp_path_factory.mktemp("generated") / "data"
    # match_fill (short prompts) gets 18 train examples: the tiny training tests train it for a few steps
    sizes = sizes_override(decompose=24, match_func=24, match_fill=24)
    assert main(["generate", *TINY_GENERATE, f"data.sizes={sizes}", f"data.output_dir={out}"]) == 0
    return out


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models gain nothing from a second thread, and on a shared 2-core machine OpenMP's
    spinning threads make a step 5-10x slower; restore the setting after the module."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _plain_rendering_after_each_test():
    """A test that loads a bundle or data sets the process's tool rendering and demonstrations stores (as a command
    does): the next test starts with the defaults, so its prompts and spec hashes are the plain ones."""
    yield
    from forethought.kernel.specs import set_stores, set_tool_rendering

    set_stores([])
    set_tool_rendering("full")
