"""One default per artefact path, shared by the standalone commands and the pipeline (issue 28, item 2).

Every command reads and writes, by default, where ``forethought pipeline`` puts the stage's output
(``runs/pipeline/{data,train,validate,bundle,evaluate}``, forethought.config.LAYOUT): the chain run by hand with
defaults only ends where the pipeline's does, and a command run after the pipeline finds its inputs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forethought.cli import main
from forethought.config import LAYOUT, RUN_DIR, compose_and_validate, shipped_path
from tests.conftest import FIXTURE_SOLUTIONS, TINY_GENERATE

# command -> {config key: the LAYOUT folder it defaults to}
READS_AND_WRITES = {
    "generate": {"data.output_dir": "data"},
    "train": {"dataset_dir": "data", "output_dir": "train"},
    "validate": {"train_dir": "train", "dataset_dir": "data", "output_dir": "validate"},
    "package": {"train_dir": "train", "validate_dir": "validate", "dataset_dir": "data", "output_dir": "bundle"},
    "evaluate": {"dataset_dir": "data", "output_dir": "evaluate", "backend.bundle": "bundle"},
    "run": {},  # backend=oracle by default; backend=hf reads backend.bundle (below)
}


def _schemas():
    from forethought.data_gen.generate import GenerateConfig
    from forethought.evaluation import EvaluateConfig
    from forethought.kernel.run_command import RunConfig
    from forethought.training.config import TrainConfig
    from forethought.training.package import PackageConfig
    from forethought.training.validate import ValidateConfig

    return {
        "generate": GenerateConfig,
        "train": TrainConfig,
        "validate": ValidateConfig,
        "package": PackageConfig,
        "evaluate": EvaluateConfig,
        "run": RunConfig,
    }


def _get(model, dotted: str):
    for part in dotted.split("."):
        model = getattr(model, part)
    return model


@pytest.mark.parametrize("command", sorted(READS_AND_WRITES))
def test_every_command_defaults_to_the_pipelines_layout(command):
    model = compose_and_validate(command, [], _schemas()[command])[1]
    for key, stage in READS_AND_WRITES[command].items():
        assert _get(model, key) == LAYOUT[stage] == f"{RUN_DIR}/{stage}", (command, key)
    if command in ("run", "evaluate"):  # every command with a model backend reads the package's output
        hf = compose_and_validate(command, ["backend=hf"], _schemas()[command])[1]
        assert hf.backend.bundle == LAYOUT["bundle"]


def test_the_schemas_defaults_are_the_configs():
    """A config that leaves a path out gets the same default from the schema."""
    from forethought.kernel.backends.factory import HFBackendConfig

    schemas = _schemas()
    for command, keys in READS_AND_WRITES.items():
        for key, stage in keys.items():
            if "." in key:
                continue
            assert schemas[command].model_fields[key].default == LAYOUT[stage], (command, key)
    assert HFBackendConfig.model_fields["bundle"].default == LAYOUT["bundle"]
    assert schemas["evaluate"]().solutions == [str(shipped_path("data_gen/solutions"))]


def test_the_pipelines_paths_are_the_standalone_defaults():
    """With its default run_dir, the pipeline's own path overrides change nothing: they are every command's
    defaults."""
    from forethought.pipeline import PipelineConfig, _stage_overrides

    cfg = compose_and_validate("pipeline", [], PipelineConfig)[1]
    assert cfg.run_dir == RUN_DIR
    for stage, overrides in _stage_overrides(cfg, Path(cfg.run_dir)).items():
        name = "train" if stage == "base" else stage
        if name not in READS_AND_WRITES:
            continue
        model = compose_and_validate(name, [], _schemas()[name])[1]
        for override in overrides:
            key, _, value = override.partition("=")
            if value.startswith(RUN_DIR):
                assert str(_get(model, key)) == value, (stage, override)


def test_the_chain_by_hand_with_default_paths(tmp_path, monkeypatch, capsys, one_torch_thread):
    """verify, generate, train, validate, package, run: not one path given, each finds the last one's output."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FORETHOUGHT_DOMAINS", raising=False)
    assert main(["verify", str(FIXTURE_SOLUTIONS)]) == 0
    assert main(["generate", *TINY_GENERATE]) == 0
    tiny = [
        "model=tiny",
        "model.tiny.vocab_size=600",
        "model.tiny.hidden_size=32",
        "model.tiny.intermediate_size=64",
        "model.tiny.num_layers=1",
        "model.tiny.num_heads=2",
        "model.tiny.num_kv_heads=1",
        "model.pretrain.max_steps=1",
        "model.pretrain.em_eval_steps=null",
        "train=quick",
        "train.max_steps=2",
        "train.learning_rate=1e-2",
        "train.max_eval_examples=2",
        "train.em_eval_steps=null",
        "train.cpu_threads=1",
        "logging=none",
        "logging.progress=false",
    ]
    assert main(["train", *tiny]) == 0
    # a 1-step model fails its gates: exit 1, gates.json written all the same
    assert (
        main(["validate", "max_examples=2", "max_new_tokens=4", "base_comparison=false", "compare_decoding=false"]) == 1
    )
    capsys.readouterr()
    assert main(["package"]) == 2  # it read the gates where validate wrote them, and refuses them
    assert "runs/pipeline/validate/gates.json: refusing to package" in capsys.readouterr().err
    assert main(["package", "allow_failed_gates=true"]) == 0
    runs = tmp_path / RUN_DIR
    assert sorted(p.name for p in runs.iterdir()) == ["bundle", "data", "train", "validate"]
    assert (runs / "bundle" / "manifest.json").is_file()
    shutil.copy(FIXTURE_SOLUTIONS / "paper_figure1.json", tmp_path / "scenario.json")
    capsys.readouterr()
    rc = main(
        [
            "run",
            "scenario.json",
            "backend=hf",
            "backend.allow_smoke=true",
            "backend.max_new_tokens=4",
            "kernel.retries=0",
        ]
    )
    err = capsys.readouterr().err
    assert rc in (0, 1), err  # a 1-step model may halt a turn (exit 1); the bundle itself must load
    assert "manifest.json" not in err and "Traceback" not in err
    out = tmp_path / "runs" / "run"
    trace = [json.loads(x) for f in out.rglob("trace.jsonl") for x in f.read_text().splitlines()]
    slm = [r for r in trace if r.get("kind") == "slm"]
    assert slm and all(r["model"]["backend"] == "hf" for r in slm), "the run asked the packaged bundle"
