"""training/lm_head.py: on CPU, trl's fused LM head scores only the labelled positions, with the same loss and gradients."""

from __future__ import annotations

import torch

from forethought.training import lm_head


def _tiny_model():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=256,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=128,
        attn_implementation="eager",
    )
    return Gemma3ForCausalLM(config)


def _loss_and_grads(compact: bool, counter: list[int]):
    import trl.trainer.utils as trl_utils
    from trl.trainer.utils import add_fused_lm_head

    lm_head.restore()
    if compact:
        assert lm_head.compact_on_cpu()
    model = _tiny_model()
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    seen = trl_utils._ChunkedLogProbFunction.apply

    def counting(hidden, *rest):
        counter.append(hidden.shape[0])
        return seen(hidden, *rest)

    trl_utils._ChunkedLogProbFunction.apply = counting
    try:
        ids = torch.randint(0, 256, (2, 40), generator=torch.Generator().manual_seed(1))
        labels = ids.clone()
        labels[:, :32] = -100  # a prompt of 32 tokens, a completion of 8: completion-only loss
        out = model(input_ids=ids, labels=labels, fused_lm_head=True)
        out.loss.backward()
    finally:
        trl_utils._ChunkedLogProbFunction.apply = seen
        lm_head.restore()
    return out.loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def test_compact_scoring_on_cpu_gives_the_same_loss_and_gradients_on_fewer_positions():
    full_rows: list[int] = []
    compact_rows: list[int] = []
    loss_full, grads_full = _loss_and_grads(False, full_rows)
    loss_compact, grads_compact = _loss_and_grads(True, compact_rows)
    assert full_rows == [2 * 39]  # trl's default on CPU: every position of both rows (labels shifted by one) projected
    assert compact_rows == [2 * 8]  # only the positions whose next-token label is set: the 8 completion tokens per row
    torch.testing.assert_close(loss_compact, loss_full)
    assert grads_full.keys() == grads_compact.keys() and grads_full
    for name in grads_full:
        torch.testing.assert_close(grads_compact[name], grads_full[name], msg=name)


def test_the_patch_is_idempotent_and_leaves_other_devices_to_trl():
    import trl.trainer.utils as trl_utils

    original = trl_utils._use_triton
    try:
        assert lm_head.compact_on_cpu() and lm_head.compact_on_cpu()
        assert trl_utils._use_triton._forethought_original is original  # wrapped once
        assert trl_utils._use_triton(torch.device("cpu")) is True
        assert trl_utils._use_triton(torch.device("meta")) == original(torch.device("meta"))
    finally:
        lm_head.restore()
    assert trl_utils._use_triton is original


def test_a_trl_without_the_hook_is_left_alone(monkeypatch):
    import trl.trainer.utils as trl_utils

    monkeypatch.delattr(trl_utils, "_use_triton")
    assert lm_head.compact_on_cpu() is False
