"""A run config of the user's: ``--config-dir DIR --config-name NAME`` (Hydra's own flags), as docs/configs.md
shows them (issue 28, item 3). The page's files are written from the page itself and its commands run."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from forethought.cli import config_flags, main
from forethought.config import compose_and_validate, user_configs

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "configs.md"


def _doc_files() -> dict[str, str]:
    text = DOC.read_text()
    files = dict(re.findall(r"^`(confs/[\w/]+\.yaml)` — .*?```yaml\n(.*?)```", text, re.S | re.M))
    assert set(files) == {"confs/data/small.yaml", "confs/quick_train.yaml", "confs/my_pipeline.yaml"}, files
    return files


def _doc_commands() -> list[list[str]]:
    block = re.search(r"The commands:\n\n```bash\n(.*?)```", DOC.read_text(), re.S)
    assert block
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines() if line.strip()]


@pytest.fixture
def confs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, text in _doc_files().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_documented_configs_compose_and_run(confs, capsys):
    from forethought.pipeline import PipelineConfig, build
    from forethought.training.config import TrainConfig

    commands = _doc_commands()
    assert [c[:2] for c in commands] == [["forethought", "generate"], ["forethought", "train"]] + [
        ["forethought", "pipeline"],
        ["forethought", "train"],
    ]
    # generate runs for real: the user's group option (small sizes, its own output folder) over the shipped corpus
    assert main(commands[0][1:]) == 0
    stats = json.loads((confs / "runs/mine/data/stats.json").read_text())
    assert stats["primitives"]["decompose"]["requested"] == 24 and stats["examples"] == 84
    assert not (confs / "runs/pipeline").exists()
    # train and pipeline: composed and validated (--cfg), not run here (tests/test_paths.py trains)
    for cmd in commands[1:]:
        capsys.readouterr()
        assert main([*cmd[1:], "--cfg"]) == 0, capsys.readouterr().err
    rest, config_dir, config_name = config_flags(commands[1][2:])
    with user_configs("train", config_dir, config_name):
        cfg = compose_and_validate("train", rest, TrainConfig)[1]
    assert (cfg.dataset_dir, cfg.output_dir, cfg.primitive) == ("runs/mine/data", "runs/mine/train", "match_fill")
    assert (cfg.train.preset, cfg.train.max_steps, cfg.train.learning_rate) == ("quick", 40, 3e-3)
    assert cfg.model.profile == "tiny"  # everything else: the shipped conf/train.yaml
    rest, config_dir, config_name = config_flags(commands[2][2:])
    with user_configs("pipeline", config_dir, config_name):
        pcfg = compose_and_validate("pipeline", rest, PipelineConfig)[1]
        run = build(pcfg)  # every stage's config composed and validated, with confs/ on their search path
    assert pcfg.run_dir == "runs/mine" and pcfg.profile == "tiny"
    gen = run.stages["generate"].config.data
    assert gen.output_dir == "runs/mine/data" and gen.sizes["decompose"] == 24
    assert run.stages["train"].config.output_dir == "runs/mine/train"


def test_a_users_config_is_checked_like_a_shipped_one(confs, capsys):
    (confs / "confs/bad_train.yaml").write_text("defaults:\n  - train\n  - _self_\ntrain:\n  max_stepz: 3\nseed: one\n")
    assert main(["train", "--config-dir", "confs", "--config-name", "bad_train", "--cfg"]) == 2
    err = capsys.readouterr().err
    assert f"invalid config {confs / 'confs/bad_train.yaml'}" in err  # the user's file is named
    assert "train.max_stepz: unknown key" in err and "seed:" in err and "Traceback" not in err
    assert main(["generate", "--config-dir=confs", "data=smal"]) == 2
    assert "data=smal: no such option (did you mean 'small'?); available: default, small" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--config-dir", "nowhere", "--config-name", "quick_train"], "--config-dir nowhere: no such folder"),
        (["--config-dir", "confs", "--config-name", "absent"], "--config-name absent: no absent.yaml in"),
        (["--config-name", "quick_train"], "--config-dir DIR names the folder of your own"),
        (["--config-dir"], "--config-dir needs a value"),
        (["-cn", "a", "--config-name", "b"], "--config-name given twice"),
    ],
)
def test_bad_flags_are_one_located_error(confs, capsys, args, message):
    assert main(["train", *args, "--cfg"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_help_with_a_users_config(confs, capsys):
    assert main(["train", "-cd", "confs", "-cn", "quick_train", "--help"]) == 0
    out = capsys.readouterr().out
    assert f"config: {confs / 'confs/quick_train.yaml'}" in out and "max_steps: 40" in out
    assert main(["generate", "--help"]) == 0  # the flags hold for one command only
    assert "config: conf/generate.yaml" in capsys.readouterr().out
