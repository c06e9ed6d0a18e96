"""Probe-only: made-up lookups of the scratchpad state, trained before match_fill's rows.

match_fill's validation errors (run #10; docs/training.md, "Probe of 2026-12-06, last: what match_fill gets wrong, and
made-up lookups of the state") are mostly one in-context step: the value a missing parameter wants is written in the
prompt's ``State:`` line, under a key the task points to ("Send Henry the message" beside ``"user_id:Henry":
"USR008"``), and the model copies another entry's value or answers null. match_func's version of that step (find the
tool line, copy its name) started only when asked densely (training/lookup_corpus.py). Here it is asked the same way for
values: each sequence is a ``State:`` line of ``--entries`` real (key, value) pairs of match_fill's train prompts (never
a dev solution's or a validation row), their values shuffled among them (a value stays beside its own key only by
chance), then up to ``--queries`` tasks, each 1-3 consecutive words of one shown key that no other shown key holds,
answered ``{"values": {"value": VALUE}}`` with that key's value. The loss reads the values only. Trained by the real trl
trainer on every weight of ``--base`` (the primitive's full weights, as match_func's lookups), saved to ``--out``;
match_fill's rows then train from those weights by the profile's recipe (the base's weights swapped, as the match_func
corpus probe did).

    python scripts/probe_state_lookups.py --base runs/spread/s0/base --data runs/spread/data --steps 2000 \\
        --out runs/state/s0/weights
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time

from forethought.training import lookup_corpus
from forethought.training.data import train_and_dev_rows

PRIMITIVE = "match_fill"


def state_pairs(rows) -> list[tuple[str, str]]:
    """Distinct (key, value as JSON) of the train prompts' ``State:`` lines whose value is a short string or number."""
    pairs = set()
    for row in rows:
        found = re.search(r"^State: (.*)$", row.prompt_messages()[-1]["content"], re.M)
        if not found:
            continue
        for key, value in json.loads(found.group(1)).items():
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                continue
            rendered = json.dumps(value, ensure_ascii=False)
            if len(rendered) <= 48:
                pairs.add((key, rendered))
    return sorted(pairs)


def key_words(key: str) -> list[str]:
    """A state key's words: ``"user_id:Henry"`` -> ``["user", "id", "Henry"]``."""
    return [word for word in re.split(r"[._:\[\]\s]+", key) if word]


def sequence(pool: list[tuple[str, str]], rng: random.Random, entries: int, queries: int):
    """One sequence as (text, is_answer) parts, and how many lookups it asks."""
    chosen: dict[str, str] = {}
    while len(chosen) < entries:
        key, value = rng.choice(pool)
        chosen.setdefault(key, value)
    keys = list(chosen)
    values = [chosen[key] for key in keys]
    rng.shuffle(values)
    shown = dict(zip(keys, values, strict=True))
    lowered = [" ".join(key_words(key)).lower() for key in keys]
    asks = []
    for index, key in enumerate(keys):
        words = key_words(key)
        own = [" ".join(words[start : start + size]) for size in (1, 2, 3) for start in range(len(words) - size + 1)]
        own = [
            span
            for span in own
            if not any(
                re.search(rf"(^| ){re.escape(span.lower())}( |$)", other)
                for other_index, other in enumerate(lowered)
                if other_index != index
            )
        ]
        if own:
            asks.append((rng.choice(own), shown[key]))
    rng.shuffle(asks)
    asks = asks[:queries]
    state = "{" + ", ".join(f"{json.dumps(key, ensure_ascii=False)}: {value}" for key, value in shown.items()) + "}"
    parts = [(f"State: {state}\n", False)]
    for task, value in asks:
        parts.append((f'Task: {task}\n{{"values": {{"value": ', False))
        parts.append((f"{value}}}}}", True))
        parts.append(("\n", False))
    return parts, len(asks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--entries", type=int, default=8)
    parser.add_argument("--queries", type=int, default=6)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dev-fraction", type=float, default=0.2)  # the converge profile's
    parser.add_argument("--show", type=int, default=0, help="print N sequences and stop")
    args = parser.parse_args()

    rows = train_and_dev_rows(args.data, PRIMITIVE, args.dev_fraction, args.seed)[0]
    pool = state_pairs(rows)
    rng = random.Random(f"state-lookup:{args.seed}")
    if args.show:
        for _ in range(args.show):
            print("".join(text for text, _ in sequence(pool, rng, args.entries, args.queries)[0]))
        print(len(pool), "state entries in the pool", file=sys.stderr)
        return 0

    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from forethought.training.lm_head import compact_on_cpu
    from forethought.training.run_support import checkpointing_kwargs

    compact_on_cpu()  # score only the answer positions in trl's LM head, as the product's lookup phase does

    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.base)
    model = AutoModelForCausalLM.from_pretrained(args.base, dtype=torch.float32)
    count = args.steps * args.batch
    encoded = [
        lookup_corpus.encode(tokenizer, sequence(pool, rng, args.entries, args.queries)[0]) for _ in range(count)
    ]
    lengths = sorted(len(row["input_ids"]) for row in encoded)
    print(f"{len(pool)} entries; {count} sequences, median {lengths[len(lengths) // 2]} tokens", flush=True)
    config = SFTConfig(
        output_dir=args.out + "_ckpt",
        seed=args.seed,
        data_seed=args.seed,
        max_steps=args.steps,
        learning_rate=args.lr,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=30,
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch",
        per_device_train_batch_size=args.batch,
        max_length=None,
        packing=False,
        use_cpu=True,
        logging_steps=50,
        logging_first_step=True,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        **checkpointing_kwargs(False),  # ~40 % slower on CPU and not needed at these sizes
    )
    trainer = SFTTrainer(
        model=model, args=config, train_dataset=datasets.Dataset.from_list(encoded), processing_class=tokenizer
    )
    started = time.perf_counter()
    trainer.train()
    print(f"trained {args.steps} steps in {time.perf_counter() - started:.0f} s", flush=True)
    for entry in trainer.state.log_history:
        if "loss" in entry:
            print(f"step {entry['step']} loss {entry['loss']:.4f}", flush=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
