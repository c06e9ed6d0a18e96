"""Which weights must train? A probe of full fine-tuning of one primitive on a built-here base, some weights frozen.

``forethought train ... train.finetuning=full`` trains every weight; this script trains a chosen part of them
(every weight, the decoder's linear layers, those and the norms, ...) from the same base, with the same trainer
settings (``train=converge``), and prints the exact match on the primitive's dev rows (carved from its train
solutions, decoded under its contract-compiled grammar) at every epoch's end. docs/training.md ("Training to
convergence") records what it measured::

    python scripts/probe_trainable.py --dataset-dir runs/data --output-dir runs/probe/linear --primitive match_func \\
        --trainable linear --learning-rate 3e-3 --epochs 12

The base is the one ``forethought train`` builds into ``<output-dir>/base`` (built on first use); ``--start random``
starts from its random initialisation instead (the base stage skipped: "a base trained on nothing").
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def trainable(name: str, parts: set[str]) -> bool:
    if "all" in parts:
        return True
    return (
        ("linear" in parts and any(k in name for k in LINEAR))
        or ("norm" in parts and "norm" in name)
        or ("embed" in parts and "embed" in name)
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset-dir", required=True)
    ap.add_argument("--output-dir", required=True)
    ap.add_argument("--primitive", required=True)
    ap.add_argument("--trainable", default="all", help="all, or a '+'-joined set of linear, norm, embed")
    ap.add_argument("--start", choices=["base", "random"], default="base")
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--epochs", type=float, default=8)
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        help="another `forethought train` override (e.g. model.tiny.hidden_size=192)",
    )
    args = ap.parse_args(argv)

    import torch
    import transformers
    from trl import SFTTrainer

    from forethought.bundle.models import load_model, load_tokenizer
    from forethought.training.callbacks import DevExactMatch
    from forethought.training.data import load_splits, use_dataset_rendering
    from forethought.training.lm_head import compact_on_cpu
    from forethought.training.train import _sft_config, config_from_overrides, prepare_base

    cfg = config_from_overrides(
        [
            f"primitive={args.primitive}",
            "model=tiny",
            "train=converge",
            f"dataset_dir={args.dataset_dir}",
            f"output_dir={args.output_dir}",
            f"train.learning_rate={args.learning_rate}",
            f"train.epochs={args.epochs}",
            "train.early_stopping_patience=null",
            "train.cpu_threads=1",
            "logging=none",
            "logging.progress=false",
            f"train.per_primitive.{args.primitive}.epochs={args.epochs}",
            *args.override,
        ]
    )
    use_dataset_rendering(cfg.dataset_dir)
    torch.set_num_threads(1)
    base = prepare_base(cfg)
    start = base.path if args.start == "base" else Path(cfg.output_dir) / "base_run" / "init"
    transformers.set_seed(cfg.seed)
    train_ds, eval_ds, dev = load_splits(
        cfg.dataset_dir, args.primitive, dev_fraction=cfg.train.dev_fraction, seed=cfg.seed
    )
    tok = load_tokenizer(start)
    model = load_model(start, dtype=torch.float32, attn_implementation="sdpa", device="cpu")
    parts = set(args.trainable.split("+"))
    for name, parameter in model.named_parameters():
        parameter.requires_grad = trainable(name, parts)
    n = sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)
    print(
        f"trainable: {args.trainable} ({n:,} of {sum(parameter.numel() for parameter in model.parameters()):,} parameters)",
        flush=True,
    )
    sft = _sft_config(
        cfg,
        ckpt_dir=Path(cfg.output_dir) / args.primitive / "probe",
        device="cpu",
        dtype=torch.float32,
        primitive=args.primitive,
        has_eval=True,
        notes=[],
    )
    sft.save_strategy, sft.load_best_model_at_end = "no", False
    subset = list(dev)
    random.Random(f"{cfg.seed}:{args.primitive}:dev").shuffle(subset)  # the rows forethought train selects on
    compact_on_cpu()
    trainer = SFTTrainer(
        model=model,
        args=sft,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tok,
        callbacks=[DevExactMatch(tok, args.primitive, subset[: cfg.train.dev_em_examples], constrained=True)],
    )
    t0 = time.time()
    trainer.train()
    print(f"wall {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
