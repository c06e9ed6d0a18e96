"""The training chain, end to end: data -> chat template -> completion mask -> <end_of_turn> -> training ->
batched generation with stop tokens -> parsing -> canonical exact match.

A tiny model memorises four get_order rows (the base stage, full-parameter, then its adapter); ``validate``,
through its real code path, must then score those same rows at 100 %. Each broken-link case breaks one
link and must bring exact match below 100 %: the check can fail, and it fails for the right reasons.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forethought.training.train import config_from_overrides, run
from forethought.training.validate import ValidateConfig, run_validation

PRIM = "match_func"  # short answers after long prompts: the prompt-in-loss case dilutes the answer ~30x
ROWS = 4
# Seeded and deterministic: with the loss on the answers, 100 steps memorise the four answers (60 do not);
# with the loss on every token (prompts ~30x longer than answers) the same 100 steps do not.
STEPS = 100


@pytest.fixture(scope="module")
def memo_data(generated_data, tmp_path_factory) -> Path:
    """Four train rows, used as the validation split too: a memorisation check, not a generalisation one.

    The validation copies get their own solution ids: train and validate refuse splits that share a
    solution (a leak in a real dataset), and here the overlap is the point of the test."""
    from forethought.data_gen.unit import seal

    data = tmp_path_factory.mktemp("chain") / "data"
    (data / PRIM).mkdir(parents=True)
    rows = [
        json.loads(line) for line in (generated_data / PRIM / "train.jsonl").read_text().splitlines() if line.strip()
    ][:ROWS]
    copies = [{**r, "solution_id": f"{r['solution_id']}-memorised-copy"} for r in rows]
    for split, rs in (("train", rows), ("validation", copies)):
        (data / PRIM / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    shutil.copy(generated_data / "stats.json", data / "stats.json")
    seal(data)
    return data


def _train_and_validate(data: Path, out: Path, *extra: str) -> dict:
    cfg = config_from_overrides(
        [
            f"primitive={PRIM}",
            f"dataset_dir={data}",
            f"output_dir={out}",
            "model=tiny",
            "model.tiny.vocab_size=600",
            "model.tiny.hidden_size=64",
            "model.tiny.intermediate_size=256",
            "model.tiny.num_layers=1",
            "model.tiny.num_heads=2",
            "model.tiny.num_kv_heads=1",
            f"model.pretrain.max_steps={STEPS}",
            "model.pretrain.learning_rate=3e-3",
            "model.pretrain.per_device_batch_size=4",
            "model.pretrain.packing=false",
            "model.pretrain.max_length=512",
            "model.pretrain.em_eval_steps=null",
            "model.pretrain.loss=completion",
            "train=quick",
            "train.max_steps=2",
            "train.learning_rate=1e-5",
            "logging=none",
            "logging.progress=false",
            "train.cpu_threads=1",
            *extra,
        ]
    )
    run(cfg)
    vcfg = ValidateConfig(
        train_dir=str(out),
        dataset_dir=str(data),
        output_dir=str(out / "validate"),
        primitives=[PRIM],
        base_comparison=False,
        compare_decoding=False,
        max_new_tokens=48,
        batch_size=4,
        decoding="free",
    )  # what the model itself writes: the grammar would stop it at the JSON's end
    return run_validation(vcfg)["primitives"][PRIM]


@pytest.fixture
def drop_end_of_turn_from_loss(monkeypatch):
    """Break: <end_of_turn> carries no loss (masked like the prompt), so the model never learns to stop."""
    from trl.trainer import sft_trainer

    original = sft_trainer.DataCollatorForLanguageModeling.torch_call

    def torch_call(self, examples):
        batch = original(self, examples)
        eot = self.end_of_turn_id
        batch["labels"][batch["input_ids"] == eot] = -100
        return batch

    monkeypatch.setattr(sft_trainer.DataCollatorForLanguageModeling, "torch_call", torch_call)
    monkeypatch.setattr(sft_trainer.DataCollatorForLanguageModeling, "end_of_turn_id", None, raising=False)
    from forethought.training import pretrain

    real_init = pretrain._init

    def init(cfg, run_dir):
        path = real_init(cfg, run_dir)
        from transformers import AutoTokenizer

        sft_trainer.DataCollatorForLanguageModeling.end_of_turn_id = AutoTokenizer.from_pretrained(
            path
        ).convert_tokens_to_ids("<end_of_turn>")
        return path

    monkeypatch.setattr(pretrain, "_init", init)


@pytest.fixture
def no_stop_tokens(monkeypatch):
    """Break: generation is not told to stop at <end_of_turn> (only at <eos>, which the answers never end with)."""
    from forethought.kernel.backends import hf

    monkeypatch.setattr(hf, "stop_ids", lambda tokenizer, model=None: [tokenizer.eos_token_id])


def test_memorised_rows_score_100_percent_through_validate(memo_data, tmp_path, one_torch_thread):
    report = _train_and_validate(memo_data, tmp_path / "run")
    assert report["n"] == ROWS
    assert report["parse_rate"] == 1.0
    assert report["exact_match"] == 1.0, report["failures"]
    metrics = json.loads((tmp_path / "run" / "base_run" / "metrics.json").read_text())
    assert metrics["global_step"] == STEPS and metrics["loss"] == "completion"


@pytest.mark.parametrize("broken", ["end_of_turn_masked", "prompt_in_loss", "stop_tokens_not_passed"])
def test_a_broken_link_fails_the_chain(broken, memo_data, tmp_path, request, one_torch_thread):
    extra: list[str] = []
    if broken == "end_of_turn_masked":
        request.getfixturevalue("drop_end_of_turn_from_loss")
    elif broken == "prompt_in_loss":
        extra = ["model.pretrain.loss=full"]
    else:
        request.getfixturevalue("no_stop_tokens")
    report = _train_and_validate(memo_data, tmp_path / "run", *extra)
    assert report["exact_match"] < 1.0, f"{broken}: the chain check did not notice the broken link"
