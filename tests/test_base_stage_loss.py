"""The base stage's loss settings: what the built-here base sees of each train row (docs/training.md)."""

from __future__ import annotations

import json

import pytest


def _cfg(data, tmp_path, loss):
    from forethought.training.train import config_from_overrides

    return config_from_overrides(
        ["model=tiny", f"dataset_dir={data}", f"output_dir={tmp_path}", "logging=none", f"model.pretrain.loss={loss}"]
    )


@pytest.mark.parametrize("loss", ["completion", "full"])
def test_completion_and_full_loss_bases_train_on_prompt_and_answer(generated_data, tmp_path, loss):
    from forethought.training import pretrain

    rows = pretrain.mixed_train_rows(_cfg(generated_data, tmp_path, loss))
    assert rows and all(set(r) == {"prompt", "completion"} and r["completion"] for r in rows)


def test_a_prompt_loss_base_never_sees_an_answer(generated_data, tmp_path):
    """loss=prompt: a language model of the requests; the answers are left to the adapters."""
    from forethought.training import pretrain

    rows = pretrain.mixed_train_rows(_cfg(generated_data, tmp_path, "prompt"))
    completions = pretrain.mixed_train_rows(_cfg(generated_data, tmp_path, "completion"))
    assert len(rows) == len(completions)
    assert all(set(r) == {"messages"} and all(m["role"] in ("system", "user") for m in r["messages"]) for r in rows)
    answers = {json.dumps(r["completion"]) for r in completions}
    prompts = {json.dumps(r["messages"]) for r in rows}
    assert prompts == {json.dumps(r["prompt"]) for r in completions} and not (answers & prompts)


def test_the_prompt_loss_base_stage_trains(generated_data, tmp_path, one_torch_thread):
    """Two steps of the real base stage with loss=prompt: the base is published and its metrics record the loss."""
    from forethought.training import pretrain

    cfg = _cfg(generated_data, tmp_path, "prompt").model_copy(deep=True)
    out = pretrain.prepare(
        cfg.model_copy(
            update={
                "model": cfg.model.model_copy(
                    update={
                        "pretrain": cfg.model.pretrain.model_copy(
                            update={"max_steps": 2, "em_eval_steps": None, "max_length": 512, "packing": False}
                        )
                    }
                )
            }
        )
    )
    metrics = json.loads((pretrain.run_dir(cfg) / "metrics.json").read_text())
    assert (out / "config.json").is_file() and metrics["loss"] == "prompt" and metrics["global_step"] == 2
