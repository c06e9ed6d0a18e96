"""`forethought train` configuration: composition, strict validation, presets, launchers, accelerate configs.

No training here: these run in seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from forethought.config import CONF_DIR, ConfigError, compose_and_validate, compose_config, validate
from forethought.data_gen.unit import seal
from forethought.training.config import PRIMITIVE_NAMES, TrainConfig

TRAIN_GROUPS = ("model", "lora", "train", "logging", "launcher")  # the groups conf/train.yaml composes


def load(*overrides: str) -> TrainConfig:
    return compose_and_validate("train", list(overrides), TrainConfig)[1]


def test_defaults():
    cfg = load()
    assert (
        cfg.primitive == "all"
        and cfg.dataset_dir == "runs/pipeline/data"
        and cfg.output_dir == "runs/pipeline/train"
        and cfg.seed == 0
    )
    assert cfg.model.profile == "tiny" and cfg.logging.backend == "wandb" and cfg.logging.mode == "offline"
    assert cfg.primitives() == list(PRIMITIVE_NAMES)
    assert load("primitive=match_fill").primitives() == ["match_fill"]


def test_presets():
    paper = load("train=paper").train
    assert (paper.epochs, paper.learning_rate) == (4, 1e-5)
    default = load().train
    assert 1e-4 <= default.learning_rate <= 2e-4
    assert load("train=quick").train.max_steps > 0


@pytest.mark.parametrize(
    "group,option",
    [(g, f.stem) for g in TRAIN_GROUPS for f in sorted((CONF_DIR / g).glob("*.yaml"))],
)
def test_every_group_option_composes_and_validates(group, option):
    load(f"{group}={option}")


def test_unknown_key_and_wrong_type_are_reported_together():
    with pytest.raises(ConfigError) as exc:
        load("train.lrr=1", "train.epochs=abc")
    errors = exc.value.errors
    assert len(errors) == 2
    assert errors[0].startswith("train.lrr: unknown key")
    assert errors[1].startswith("train.epochs:") and "'abc'" in errors[1]


def test_a_primitive_setting_the_preset_does_not_list_is_a_plain_override():
    """``train.per_primitive.<name>`` lists only what a preset changes; any documented field of an entry, or an entry
    the preset leaves out, is set like any other key (no ``+``), and a wrong primitive or field is still refused."""
    train = load("train=converge", "train.per_primitive.match_func.learning_rate=3e-3").train
    assert train.for_primitive("match_func").learning_rate == 3e-3 and train.for_primitive("match_func").epochs == 10
    assert load("train.per_primitive.decompose.warmup_ratio=0.1").train.per_primitive["decompose"].epochs is None
    with pytest.raises(ConfigError) as exc:
        load("train.per_primitive.match_func.learnig_rate=3e-3", "train.per_primitive.match_fn.epochs=3")
    located = sorted(error.split(":")[0] for error in exc.value.errors)
    assert located == ["train.per_primitive.match_fn.[key]", "train.per_primitive.match_func.learnig_rate"]


def test_a_table_the_preset_lists_takes_fields_it_does_not():
    """The converge preset lists match_func's ``lookup={steps: 2000}``: a table given on the command line with a field
    the preset leaves out merges as Hydra merges tables (its other fields kept), null turns it off, and a misspelt
    field is still refused with its location."""
    merged = load("train=converge", "train.per_primitive.match_func.lookup={steps:3000,none_share:0.2}").train
    assert (merged.for_primitive("match_func").lookup.steps, merged.for_primitive("match_func").lookup.none_share) == (
        3000,
        0.2,
    )
    kept = load("train=converge", "train.per_primitive.match_func.lookup={none_share:0.2}").train
    assert kept.for_primitive("match_func").lookup.steps == 2000
    off = load("train=converge", "train.per_primitive.match_func.lookup=null").train
    assert off.for_primitive("match_func").lookup is None and off.for_primitive("match_func").epochs == 10
    with pytest.raises(ConfigError) as exc:
        load("train=converge", "train.per_primitive.match_func.lookup={stepz:3}")
    assert [error.split(":")[0] for error in exc.value.errors] == ["train.per_primitive.match_func.lookup.stepz"]


def test_strict_types_are_not_coerced():
    with pytest.raises(ConfigError) as exc:
        load("seed=1.5", "train.per_device_batch_size=true", "lora.r='8'", "train.resume=yes")
    locs = sorted(e.split(":")[0] for e in exc.value.errors)
    assert locs == ["lora.r", "seed", "train.per_device_batch_size", "train.resume"]


def test_bad_values_are_rejected():
    for bad in (
        "primitive=retrieve",
        "model.tiny.head_dim=16",
        "train.max_steps=0",
        "lora.target_modules=[q_proj,lm_head]",
        "train.eval_strategy=steps",
    ):
        with pytest.raises(ConfigError):
            load(bad)


def test_resume_and_overwrite_exclude_each_other():
    with pytest.raises(ConfigError, match="exclude each other"):
        load("train.resume=true", "train.overwrite=true")


def test_fp16_and_packing_with_eager_are_refused():
    with pytest.raises(ConfigError, match="float16 is refused"):
        load("model=gemma3_12b", "model.dtype=float16")
    with pytest.raises(ConfigError, match="attn_implementation is 'eager'"):
        load("train.packing=true", "model.attn_implementation=eager")
    with pytest.raises(ConfigError, match="attn_implementation is 'eager'"):
        load("train.packing=true", "train.padding_free=true", "model.attn_implementation=eager")
    with pytest.raises(ConfigError, match="padding_free without packing"):
        load("train.padding_free=true")
    assert load("train.packing=true", "model.attn_implementation=flash_attention_2").train.packing


def test_gemma3_profile_is_bf16_only():
    for ok in ("auto", "bfloat16"):
        assert load("model=gemma3_12b", "model.path=/x", f"model.dtype={ok}").model.dtype == ok
    with pytest.raises(ConfigError, match=r"model.dtype=float32 is refused for the gemma3_12b profile: bf16 only"):
        load("model=gemma3_12b", "model.path=/x", "model.dtype=float32")
    assert load("model=tiny", "model.dtype=float32").model.dtype == "float32"  # the tiny CPU profile may use it


def test_gemma3_profile_has_no_tiny_shape_and_bf16():
    cfg = load("model=gemma3_12b", "model.path=/models/gemma-3-12b-it", "train=paper")
    assert cfg.model.tiny is None and cfg.model.dtype == "bfloat16" and cfg.model.path == "/models/gemma-3-12b-it"
    with pytest.raises(ConfigError, match="model.tiny.hidden_size: unknown key"):
        load("model=gemma3_12b", "model.tiny.hidden_size=64")


def test_slurm_launcher_composes_and_validates():
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
    from omegaconf import OmegaConf

    sweep = "primitive=decompose,get_order,check_prerequisites,match_func,match_fill"
    cfg = compose_config(
        "train",
        [
            "launcher=slurm",
            "model=gemma3_12b",
            "model.path=/m",
            "hydra.launcher.partition=gpu",
            "hydra.launcher.timeout_min=240",
        ],
        return_hydra_config=True,
    )
    conf = validate(cfg, TrainConfig)
    assert conf.train.resume is True, "SLURM jobs resume after a requeue"
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("submitit_launcher.SlurmLauncher")
    assert (launcher.partition, launcher.timeout_min, launcher.gpus_per_node, launcher.array_parallelism) == (
        "gpu",
        240,
        1,
        5,
    )
    params = {k: v for k, v in OmegaConf.to_container(launcher, resolve=False).items() if k != "_target_"}
    SlurmLauncher(**params)  # constructing the launcher submits nothing
    # typos in the launcher's own settings are caught by its structured config
    with pytest.raises(ConfigError):
        compose_config("train", ["launcher=slurm", "hydra.launcher.gpuz=1"], return_hydra_config=True)
    # every point of the five-primitive sweep validates
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    points = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides([sweep, "launcher=slurm"]), None)[0]
    assert sorted(load(*p).primitive for p in points) == sorted(PRIMITIVE_NAMES)


def test_local_launcher_is_hydras_basic_launcher():
    cfg = compose_config("train", [], return_hydra_config=True)
    assert cfg.hydra.launcher._target_ == "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
    assert cfg.hydra.job.chdir is False


@pytest.mark.parametrize("name", ["single_gpu", "multi_gpu", "fsdp"])
def test_accelerate_configs_parse_into_launch_environments(name, monkeypatch):
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    path = CONF_DIR / "accelerate" / f"{name}.yaml"
    cfg = ClusterConfig.from_yaml_file(str(path))  # rejects unknown keys
    assert cfg.mixed_precision == "bf16" and not cfg.use_cpu
    args = launch_command_parser().parse_args(["--config_file", str(path), "-m", "forethought.cli", "train"])
    args, _, _ = _validate_launch_command(args)
    if name == "fsdp":
        env = prepare_multi_gpu_env(args)
        assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
        assert env["FSDP_STATE_DICT_TYPE"] == "FULL_STATE_DICT" and env["FSDP_ACTIVATION_CHECKPOINTING"] == "false"
        for var_name, value in env.items():
            monkeypatch.setenv(var_name, value)
        from accelerate.utils import FullyShardedDataParallelPlugin

        plugin = FullyShardedDataParallelPlugin()
        assert plugin.fsdp_version == 2 and plugin.auto_wrap_policy is not None
    elif name == "multi_gpu":
        assert args.multi_gpu and prepare_multi_gpu_env(args)["ACCELERATE_MIXED_PRECISION"] == "bf16"
    else:
        assert not args.multi_gpu and args.num_processes == 1


def test_cfg_flag_prints_the_resolved_config(capsys):
    from forethought.training.train import cli

    assert cli(["--cfg", "primitive=get_order", "train=paper"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["primitive"] == "get_order" and printed["train"]["learning_rate"] == 1e-5


def test_unknown_flag_and_positional_are_user_errors():
    from forethought.errors import UserError
    from forethought.training.train import cli

    with pytest.raises(UserError, match="--resume"):
        cli(["--resume"])
    with pytest.raises(UserError, match="key=value"):
        cli(["runs/data"])


def test_conf_files_are_documented_yaml():
    for path in Path(CONF_DIR).rglob("*.yaml"):
        if (
            path.parent.name in ("model", "lora", "train", "logging", "launcher", "accelerate")
            or path.name == "train.yaml"
        ):
            text = path.read_text()
            assert text.lstrip().startswith("#"), f"{path} starts with a comment saying what it is for"
            yaml.safe_load(text)


def test_bad_dataset_rows_are_listed_with_file_and_line(tmp_path):
    import json

    from forethought.errors import UserError
    from forethought.training.data import read_split
    from forethought.training.synthetic import make_rows

    rows = make_rows("match_func", 4)
    rows[1]["completion"] = [{"role": "user", "content": "{}"}]
    rows[2]["prompt"] = [{"role": "system", "content": "s"}, {"role": "tool", "content": "x"}]
    lines = [json.dumps(r) for r in rows] + ["{not json"]
    (tmp_path / "match_func").mkdir()
    (tmp_path / "match_func" / "train.jsonl").write_text("\n".join(lines) + "\n")
    seal(tmp_path)  # a hand-made dataset is sealed, so the rows themselves are what is refused
    with pytest.raises(UserError) as exc:
        read_split(tmp_path, "match_func", "train")
    msg = str(exc.value)
    assert "3 bad row(s)" in msg and "line 2:" in msg and "line 3:" in msg and "line 5: not valid JSON" in msg
    assert str(tmp_path / "match_func" / "train.jsonl") in msg
    assert read_split(tmp_path, "match_func", "validation", required=False) is None


def test_every_error_is_listed_even_when_other_fields_fail():
    """Cross-field checks still run when a field is invalid (pydantic would skip them): one run, all errors."""
    with pytest.raises(ConfigError) as exc:
        load(
            "model.dtype=float16",
            "train.packing=true",
            "model.attn_implementation=eager",
            "train.max_steps=0",
            "train.epochs=-1",
            "lora.target_modules=[q_proj,q_proj]",
            "model.path=/x",
            "train.resume=true",
            "train.overwrite=true",
        )
    text = "\n".join(exc.value.errors)
    for expected in (
        "float16 is refused",
        "attn_implementation is 'eager'",
        "max_steps must be -1",
        "train.epochs:",
        "LoRA target modules listed more than once: q_proj",
        "model.path is only for the gemma3_12b profile",
        "exclude each other",
    ):
        assert expected in text, (expected, text)
    assert len(exc.value.errors) == 7


def test_a_bad_group_option_lists_the_options_and_the_other_errors():
    with pytest.raises(ConfigError) as exc:
        load("model=gemma3", "train.lrr=1", "train.epochs=abc")
    errors = exc.value.errors
    assert (
        errors[0]
        == "model=gemma3: no such option (did you mean 'gemma3_12b'?); available: causal_lm, gemma3_12b, gemma3_12b_qlora, small, tiny"
    )
    assert any(e.startswith("train.lrr: unknown key") for e in errors) and any(
        e.startswith("train.epochs:") for e in errors
    )


def test_settings_that_would_be_ignored_are_refused():
    with pytest.raises(ConfigError, match="model.path is only for the gemma3_12b profile"):
        load("model=tiny", "model.path=/does/not/exist")
    with pytest.raises(ConfigError, match="eval_steps is used only with eval_strategy 'steps'"):
        load("train.eval_steps=50")
    assert load("train.eval_strategy=steps", "train.eval_steps=50").train.eval_steps == 50
    with pytest.raises(ConfigError, match="'steps' would be ignored: train.selection=dev_exact_match evaluates"):
        load("train=converge", "train.eval_strategy=steps", "train.eval_steps=50")
