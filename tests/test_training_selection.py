"""Training to convergence: the dev split carved from train solutions, best-epoch selection and early stopping on it,
per-primitive budgets, and resuming such a run (real trl SFTTrainer on a tiny model, real generated data)."""

from __future__ import annotations

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["WANDB_MODE"] = "offline"

from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")
from safetensors.torch import load_file  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from forethought.bundle.models import WEIGHT_FILES, adapter_kind  # noqa: E402
from forethought.data_gen.row import is_dev_solution, read_rows  # noqa: E402
from forethought.data_gen.unit import load_manifest  # noqa: E402
from forethought.training.config import PRIMITIVE_NAMES  # noqa: E402
from forethought.training.data import train_and_dev_rows  # noqa: E402
from forethought.training.train import config_from_overrides, run  # noqa: E402

PRIM = "match_func"  # the fixture data's match_func rows come from several solutions: a dev split exists
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def overrides(data: Path, out: Path, *extra: str, epochs: int = 3) -> list[str]:
    # the converge profile as shipped (full weights, its per-primitive budgets), shrunk to the fixture's size
    return [
        f"primitive={PRIM}",
        "model=tiny",
        "model.pretrain=null",
        f"dataset_dir={data}",
        f"output_dir={out}",
        "train=converge",
        f"train.per_primitive.{PRIM}.epochs={epochs}",
        "train.per_device_batch_size=4",
        # its made-up lookups too, shrunk (tests/test_lookup_corpus.py measures the phase itself)
        f"train.per_primitive.{PRIM}.lookup.steps=2",
        f"train.per_primitive.{PRIM}.lookup.per_device_batch_size=2",
        # the selection pass alone, whatever the preset says: the refit has its own tests below
        f"train.per_primitive.{PRIM}.refit=false",
        "train.dev_fraction=0.3",
        "train.dev_em_examples=4",
        "train.cpu_threads=1",
        "train.early_stopping_patience=null",
        "model.tiny.vocab_size=1024",
        "logging=none",
        "logging.progress=false",
        "seed=3",
        *extra,
    ]


def test_the_dev_split_is_carved_from_train_solutions_only(generated_data):
    held_out = set(load_manifest(generated_data)["validation_solutions"])
    dev_by_primitive = {}
    for primitive in PRIMITIVE_NAMES:
        train, dev = train_and_dev_rows(generated_data, primitive, 0.3, seed=0)
        train_ids, dev_ids = {r.solution_id for r in train}, {r.solution_id for r in dev}
        assert not (train_ids | dev_ids) & held_out, "a validation solution reached training or selection"
        assert not train_ids & dev_ids, "a solution is all dev or all train"
        assert {r.id for r in train} | {r.id for r in dev} == {
            r.id for r in read_rows(generated_data, primitive, "train")
        }
        dev_by_primitive[primitive] = dev_ids
    # one rule for every primitive (and the base stage): a solution that is dev for one is dev for all
    every = set().union(*dev_by_primitive.values())
    for primitive in PRIMITIVE_NAMES:
        train_ids = {r.solution_id for r in train_and_dev_rows(generated_data, primitive, 0.3, seed=0)[0]}
        assert not train_ids & {s for s in every if is_dev_solution(s, 0.3, 0)}
    assert dev_by_primitive[PRIM], "the fixture's match_func rows must yield a dev split"


def test_the_base_stage_reads_exactly_the_train_rows_left_after_the_dev_carve(generated_data, tmp_path):
    from forethought.training.data import trainer_rows
    from forethought.training.pretrain import mixed_train_rows

    cfg = config_from_overrides(
        [o for o in overrides(generated_data, tmp_path, "primitive=all") if o != "model.pretrain=null"]
    )
    got = sorted(
        json.dumps(r["messages"], sort_keys=True) for r in mixed_train_rows(cfg)
    )  # the tiny base: requests only
    want = sorted(
        json.dumps(r["prompt"], sort_keys=True)
        for p in PRIMITIVE_NAMES
        for r in trainer_rows(train_and_dev_rows(generated_data, p, 0.3, seed=3)[0])
    )
    assert got == want and len(got) < sum(len(read_rows(generated_data, p, "train")) for p in PRIMITIVE_NAMES)


def test_a_base_seed_changes_the_base_and_its_row_order_never_the_dev_split(generated_data, tmp_path):
    from forethought.training.pretrain import fingerprint, mixed_train_rows

    def cfg(*extra):
        return config_from_overrides(
            [o for o in overrides(generated_data, tmp_path, "primitive=all", *extra) if o != "model.pretrain=null"]
        )

    run_seed, same, other = cfg(), cfg("model.pretrain.seed=3"), cfg("model.pretrain.seed=4")
    # null is the run's seed: a base built before the key existed (no "seed" under "pretrain") stays current
    assert "seed" not in fingerprint(run_seed)["pretrain"] and fingerprint(run_seed)["seed"] == 3
    assert fingerprint(other)["seed"] == 4 and fingerprint(other) != fingerprint(run_seed)
    assert fingerprint(same) != fingerprint(other)

    def texts(config):
        return [json.dumps(r["messages"], sort_keys=True) for r in mixed_train_rows(config)]

    # another order of the same rows: the rows left after the one dev carve, whatever the base's seed
    assert texts(other) != texts(run_seed) and sorted(texts(other)) == sorted(texts(run_seed))
    assert texts(same) == texts(run_seed)


def weights(folder: Path) -> dict:
    """The saved weights of an adapter or checkpoint folder, whichever kind (LoRA or full) the profile trains."""
    kind = adapter_kind(folder)
    assert kind, f"{folder} holds no weights"
    return load_file(str(folder / WEIGHT_FILES[kind][0]))


class StopAfterFirstSave(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        raise KeyboardInterrupt(f"simulated kill after the checkpoint of step {state.global_step}")


@pytest.fixture(scope="module")
def selected_run(generated_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("selected")
    res = run(config_from_overrides(overrides(generated_data, out)))[PRIM]
    return out, res.metrics


def test_the_adapter_kept_is_the_epoch_of_best_dev_exact_match(selected_run):
    out, metrics = selected_run
    sel = metrics["selection"]
    assert (
        sel["rule"] == "dev_exact_match"
        and sel["dev_rows"] >= 1
        and sel["dev_solutions"] >= 1
        and sel["decoding"] == "constrained"
    )
    evals = [e for e in metrics["eval_history"] if "eval_exact_match" in e]
    assert [round(e["epoch"]) for e in evals] == [1, 2, 3]  # one evaluation per epoch
    score = {e["step"]: e["eval_exact_match"] - e["eval_loss"] / 1000 for e in evals}
    assert sel["best_global_step"] == max(score, key=lambda s: (score[s], -s))  # the first of the best
    kept = weights(out / PRIM / "adapter")
    best = weights(out / PRIM / "checkpoints" / f"checkpoint-{sel['best_global_step']}")
    assert kept.keys() == best.keys() and all(torch.equal(kept[k], best[k]) for k in kept)


def test_an_interrupted_converge_run_resumes_to_the_same_selection(generated_data, selected_run, tmp_path):
    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        run(config_from_overrides(overrides(generated_data, out)), callbacks=[StopAfterFirstSave()])
    assert not (out / PRIM / "metrics.json").exists()
    metrics = run(config_from_overrides(overrides(generated_data, out, "train.resume=true")))[PRIM].metrics
    assert metrics["resumed_from"] == "checkpoint-" + str(selected_run[1]["eval_history"][0]["step"])
    assert (
        metrics["selection"] == selected_run[1]["selection"]
        and metrics["eval_history"] == selected_run[1]["eval_history"]
    )
    adapter_a = weights(selected_run[0] / PRIM / "adapter")
    adapter_b = weights(out / PRIM / "adapter")
    assert all(torch.equal(adapter_a[k], adapter_b[k]) for k in adapter_a), (
        "the resumed run keeps the same adapter as the uninterrupted one"
    )


class StopAtFirstRefitSave(TrainerCallback):
    """A kill inside the refit: after its first checkpoint, never during the selection pass."""

    def on_save(self, args, state, control, **kwargs):
        if Path(args.output_dir).name == "refit_checkpoints":
            raise KeyboardInterrupt(f"simulated kill after the refit's checkpoint of step {state.global_step}")


REFIT = (f"train.per_primitive.{PRIM}.refit=true", "train.save_steps=3")


@pytest.fixture(scope="module")
def refit_run(generated_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("refit")
    res = run(config_from_overrides(overrides(generated_data, out, *REFIT)))[PRIM]
    return out, res.metrics


def test_a_refit_trains_every_train_row_for_the_epochs_selection_kept(generated_data, selected_run, refit_run):
    import math

    out, metrics = refit_run
    _, selected = selected_run
    # the selection pass is the plain run's, to the figure: the refit only follows it
    assert metrics["selection"] == selected["selection"] and metrics["eval_history"] == selected["eval_history"]
    refit = metrics["refit"]
    rows = read_rows(generated_data, PRIM, "train")
    train, dev = train_and_dev_rows(generated_data, PRIM, 0.3, seed=3)
    assert dev and refit["epochs"] == selected["selection"]["best_epoch"] >= 1
    # every train row, the dev solutions' among them; never a validation solution
    assert (
        refit["train_examples"]
        == len(rows)
        == selected["train_examples"] + len([r for r in rows if r.solution_id in {d.solution_id for d in dev}])
    )
    held_out = set(load_manifest(generated_data)["validation_solutions"])
    assert not {r.solution_id for r in rows} & held_out
    assert refit["global_step"] == refit["epochs"] * math.ceil(len(rows) / 4)
    # the adapter is the refit's: not the kept checkpoint, and every weight moved from the base it started from
    kept = weights(out / PRIM / "adapter")
    best = weights(out / PRIM / "checkpoints" / f"checkpoint-{metrics['selection']['best_global_step']}")
    base = load_file(str(out / "base" / "model.safetensors"))
    assert any(not torch.equal(kept[k], best[k]) for k in kept)
    assert all(not torch.equal(kept[k], base[k]) for k in kept if k in base), "a weight the refit never trained"
    assert not (out / PRIM / "selection.json").exists()  # metrics.json holds the selection now


def test_a_refit_killed_part_way_resumes_to_the_same_adapter(generated_data, refit_run, tmp_path):
    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt, match="refit's checkpoint"):
        run(config_from_overrides(overrides(generated_data, out, *REFIT)), callbacks=[StopAtFirstRefitSave()])
    assert (out / PRIM / "selection.json").is_file() and not (out / PRIM / "metrics.json").exists()
    metrics = run(config_from_overrides(overrides(generated_data, out, *REFIT, "train.resume=true")))[PRIM].metrics
    assert metrics["refit"]["resumed_from"] == "checkpoint-3"
    assert metrics["selection"] == refit_run[1]["selection"]
    assert metrics["refit"]["global_step"] == refit_run[1]["refit"]["global_step"]
    adapter_a, adapter_b = weights(refit_run[0] / PRIM / "adapter"), weights(out / PRIM / "adapter")
    assert all(torch.equal(adapter_a[k], adapter_b[k]) for k in adapter_a), "the resumed refit ends where one run does"


def test_a_lora_refit_trains_a_fresh_adapter_on_every_train_row(generated_data, tmp_path):
    """The paper profile trains LoRA adapters: the refit starts a fresh adapter on the base (no made-up lookups:
    they are full weights only), trains it on every train row for the epochs kept, and ships it, loadable as the
    selection pass's adapter is."""
    from forethought.training.artifacts import load_adapters

    lora = ("train.finetuning=lora", f"train.per_primitive.{PRIM}.lookup=null", "lora.r=4", "lora.alpha=8")
    metrics = run(config_from_overrides(overrides(generated_data, tmp_path, *lora, *REFIT)))[PRIM].metrics
    refit = metrics["refit"]
    assert refit["epochs"] == metrics["selection"]["best_epoch"] >= 1
    assert refit["train_examples"] == len(read_rows(generated_data, PRIM, "train")) > metrics["train_examples"]
    adapter = tmp_path / PRIM / "adapter"
    assert adapter_kind(adapter) == "lora"
    kept = weights(adapter)
    best = weights(tmp_path / PRIM / "checkpoints" / f"checkpoint-{metrics['selection']['best_global_step']}")
    assert set(kept) == set(best) and any(not torch.equal(kept[k], best[k]) for k in kept)
    # LoRA's B matrices start at zero: every one the refit saved has trained
    lora_b = [k for k in kept if "lora_B" in k]
    assert lora_b and all(kept[k].abs().sum() > 0 for k in lora_b), "a LoRA matrix the refit never trained"
    model, _ = load_adapters(tmp_path, [PRIM], device="cpu")
    assert PRIM in model.peft_config


def test_a_refit_needs_selection(generated_data, tmp_path):
    from forethought.config import ConfigError

    with pytest.raises(ConfigError, match="train.refit trains again"):
        config_from_overrides(
            overrides(generated_data, tmp_path, "train.selection=last", "train.dev_fraction=0", "train.refit=true")
        )


def test_early_stopping_ends_a_flat_curve_and_per_primitive_budgets_apply(generated_data, tmp_path):
    # lr 1e-9: nothing is learned, so the dev score never improves after the first epoch
    cfg = config_from_overrides(
        overrides(
            generated_data,
            tmp_path,
            "train.epochs=50",
            "train.learning_rate=1e-9",
            f"+train.per_primitive.{PRIM}.early_stopping_patience=1",
            # no lookups: after them this check's dev score (exact match, ties broken by the dev loss) still rose by a hair
            f"train.per_primitive.{PRIM}.lookup=null",
            epochs=6,
        )
    )
    shipped = yaml.safe_load((Path(__file__).parent.parent / "conf/train/converge.yaml").read_text())["per_primitive"]
    # the override for PRIM, and decompose's own budget as conf/train/converge.yaml ships it
    assert cfg.train.for_primitive(PRIM).epochs == 6
    assert cfg.train.for_primitive("decompose").epochs == shipped["decompose"]["epochs"] != 50
    assert (
        cfg.train.for_primitive(PRIM).early_stopping_patience == 1
        and cfg.train.for_primitive("decompose").early_stopping_patience is None
    )
    metrics = run(cfg)[PRIM].metrics
    assert metrics["selection"]["stopped_early"] and round(metrics["epochs_completed"]) < 6


def test_selection_needs_a_dev_split_and_patience_needs_selection(generated_data, tmp_path):
    from forethought.config import ConfigError

    with pytest.raises(ConfigError, match="needs a dev split"):
        config_from_overrides(overrides(generated_data, tmp_path, "train.dev_fraction=0"))
    with pytest.raises(ConfigError, match="needs train.selection=dev_exact_match"):
        config_from_overrides(
            overrides(generated_data, tmp_path, "train.selection=last", "train.early_stopping_patience=2")
        )


def test_dev_error_analysis_reads_the_dev_rows_only(generated_data, selected_run, capsys):
    """scripts/dev_errors.py (docs/training.md's error analysis) decodes exactly the dev rows the selection used:
    rows of train solutions, never a validation row, and counts every one of them under some kind."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "dev_errors", Path(__file__).resolve().parents[1] / "scripts" / "dev_errors.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out, metrics = selected_run
    # a seed other than the default, passed on; the dev fraction (0.3 here) read from the run's metrics, so the
    # script carves the dev rows the selection used without being told
    common = ["--train-dir", str(out), "--dataset-dir", str(generated_data), "--primitive", PRIM]
    common += ["--seed", "3", "--max-new-tokens", "16"]
    assert mod.main([*common, "--show", "2"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    _, dev = train_and_dev_rows(generated_data, PRIM, 0.3, seed=3)
    assert summary.startswith(f"{PRIM}: {len(dev)} dev rows from {len({r.solution_id for r in dev})} solutions; ")
    counted = sum(int(part.rsplit(" (", 1)[0].rsplit(" ", 1)[1]) for part in summary.split("; ", 1)[1].split(", "))
    assert counted == len(dev) == metrics["selection"]["dev_rows"]
    validation = {r.solution_id for r in read_rows(generated_data, PRIM, "validation")}
    assert not validation & {r.solution_id for r in dev}
    # --rows train: a sample of the rows trained on (the generalisation gap's other side), no dev solution's
    assert mod.main([*common, "--rows", "train", "--limit", "3", "--show", "3"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip().splitlines()[-1].startswith(f"{PRIM}: 3 train rows from ")
    shown = {line[4:].split(" [")[0] for line in printed.splitlines() if line.startswith("--- ")}
    assert not shown & ({r.solution_id for r in dev} | validation)


def test_match_func_baselines_read_the_dev_rows_and_count_every_one(generated_data, selected_run, capsys):
    """scripts/match_func_baselines.py (docs/training.md, "Probes after run #7"): its baselines and the model's
    errors by familiarity are measured on the dev rows the selection used, each counted once, no validation row."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "match_func_baselines", Path(__file__).resolve().parents[1] / "scripts" / "match_func_baselines.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out, metrics = selected_run
    # the run's seed passed on (as to dev_errors.py); the dev fraction read from its metrics
    assert mod.main(["--dataset-dir", str(generated_data), "--train-dir", str(out), "--seed", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    _, dev = train_and_dev_rows(generated_data, PRIM, 0.3, seed=3)
    assert lines[0].startswith(f"match_func dev rows: {len(dev)} from ") and "(dev fraction 0.3)" in lines[0]
    assert len(dev) == metrics["selection"]["dev_rows"]
    figures = {line.split(": ")[0]: float(line.split(": ")[1].rstrip(" %")) for line in lines[1:6]}
    assert set(figures) == {
        "word overlap",
        "nearest trained task",
        "wanted tool among the 3 nearest trained tasks' tools",
        "wanted tool among the 5 nearest trained tasks' tools",
        "model",
    }
    assert figures["nearest trained task"] <= figures["wanted tool among the 3 nearest trained tasks' tools"]
    bands = [line.split(" | ") for line in lines[7:]]
    assert sum(int(rows) for _, rows, _ in bands) == len(dev)  # every dev row in one band
    wrong = sum(int(w.split(" (")[0]) for _, _, w in bands)
    assert round(100 * (len(dev) - wrong) / len(dev), 1) == figures["model"]
    # the words the baselines compare: names split at their case changes and underscores, function words left out
    assert mod.words("Stop the engine") == mod.words("stopEngine") == {"stop", "engine"}
    assert mod.words("check_tire_pressure") == {"check", "tire", "pressure"}
    # without a dev split there is nothing to measure: a located error, exit 2
    assert mod.main(["--dataset-dir", str(generated_data), "--dev-fraction", "0"]) == 2
    assert "no dev rows" in capsys.readouterr().err
    # a folder that is no dataset: its located message, exit 2, no traceback
    assert mod.main(["--dataset-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out / 'dataset.json'}: ") and "Traceback" not in err
    assert [mod._band(n) for n in (0, 1, 4, 5, 9, 10, 19, 20)] == [
        "0",
        "1-4",
        "1-4",
        "5-9",
        "5-9",
        "10-19",
        "10-19",
        "20 or more",
    ]
