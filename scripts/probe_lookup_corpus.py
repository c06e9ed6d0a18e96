"""Probe-only: can the two-layer base learn the lookup from a dense, short made-up corpus (many lookups a sequence)?

The probes of 2026-12-06 gave the lookup (find the tool line whose description says what the task says, copy the
name written on it) one answer per 500-1,500-token prompt, and the model did not start it. Here each sequence is
short and asks it several times: ``--tools`` real tool lines of match_func's train prompts (their description cut
where the prompt cuts it) with their names shuffled among them (a name stays beside its own description only by
chance), then up to ``--queries`` tasks, each 2-4 consecutive words that only one shown description holds, each answered
``{"tool_name": "NAME"}`` with the name on that line. The loss is on the names (and the closing ``"}``) only; the
base's weights are trained full-parameter from ``--base`` and saved every 500 steps under ``--save``. Every
``--every`` steps it prints the whole-name exact match under teacher forcing on 40 fixed held-out sequences
(``first``: the name's first token, where the lookup happens; the rest is a copy) against chance (1 / tools).
The corpus is the base stage's own (training/lookup_corpus.py, ``model.pretrain.lookup``, built from this probe);
this loop, with its fresh draws every step and its teacher-forced score, is how it was measured (docs/training.md,
"Probe of 2026-12-06: a made-up lookup corpus").

    python scripts/probe_lookup_corpus.py --base runs/spread/s0/base --steps 2000 --save runs/recall/s0
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from forethought.training import lookup_corpus


def tool_lines(path: str) -> list[tuple[str, str, str]]:
    """The distinct tool lines of a match_func train file's prompts (the base stage's own reader)."""
    with open(path, encoding="utf-8") as rows:
        return lookup_corpus.tool_lines(json.loads(line)["prompt"] for line in rows)


def sequence(pool, rng: random.Random, tools: int, queries: int):
    """One sequence as (text, is_answer) parts, and how many lookups it asks (the base stage's own draw)."""
    return lookup_corpus.sequence(pool, rng, tools, queries)


def encode(tok, parts):
    """Token ids after ``<bos>``, and which of them the loss reads (the answers' tokens)."""
    row = lookup_corpus.encode(tok, parts)
    return row["input_ids"], [label != -100 for label in row["labels"]]


def batch(tok, pool, rng, size, tools, queries):
    """``size`` fresh sequences, padded: input ids, attention mask, labels (-100 outside the answers)."""
    encoded = [encode(tok, sequence(pool, rng, tools, queries)[0]) for _ in range(size)]
    width = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((size, width), tok.pad_token_id)
    labels = torch.full((size, width), -100)
    attention = torch.zeros((size, width), dtype=torch.long)
    for row, (ids, mask) in enumerate(encoded):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        labels[row, : len(ids)] = torch.tensor([tid if keep else -100 for tid, keep in zip(ids, mask, strict=True)])
    return input_ids, attention, labels


def answer_exact(model, tok, pool, rng, count, tools, queries):
    """Whole answers right under teacher forcing (each answer's every token the argmax)."""
    right = total = 0
    first_right = 0
    with torch.no_grad():
        for _ in range(count):
            parts, _ = sequence(pool, rng, tools, queries)
            ids, mask = encode(tok, parts)
            logits = model(torch.tensor([ids])).logits[0]
            predicted = logits.argmax(-1)
            answers = []
            start = None
            for position, keep in enumerate(mask):
                if keep and start is None:
                    start = position
                if not keep and start is not None:
                    answers.append((start, position))
                    start = None
            if start is not None:
                answers.append((start, len(mask)))
            for begin, end in answers:
                ok = all(predicted[pos - 1].item() == ids[pos] for pos in range(begin, end))
                right += ok
                first_right += predicted[begin - 1].item() == ids[begin]
                total += 1
    return right / max(total, 1), first_right / max(total, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="runs/spread/s0/base")
    parser.add_argument("--rows", default="runs/spread/data/match_func/train.jsonl")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--tools", type=int, default=6)
    parser.add_argument("--queries", type=int, default=6)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--save", default="")
    parser.add_argument("--scratch", action="store_true", help="a random model of the base's shape instead")
    parser.add_argument("--layers", type=int, default=0, help="with --scratch: this many layers (local, global, ...)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(args.base)
    model = AutoModelForCausalLM.from_pretrained(args.base, dtype=torch.float32)
    if args.scratch:
        config = model.config
        if args.layers:  # the Gemma 3 tiny shape's alternation, as the base's two layers
            config.num_hidden_layers = args.layers
            config.layer_types = [("sliding_attention", "full_attention")[index % 2] for index in range(args.layers)]
        model = AutoModelForCausalLM.from_config(config)
    pool = tool_lines(args.rows)
    print(f"{len(pool)} tool lines", flush=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 30))
    rng = random.Random(1)
    start = time.time()
    losses = []
    for step in range(1, args.steps + 1):
        model.train()
        input_ids, attention, labels = batch(tok, pool, rng, args.batch, args.tools, args.queries)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if step % args.every == 0:
            model.eval()
            exact, first = answer_exact(model, tok, pool, random.Random(99), 40, args.tools, args.queries)
            print(
                f"step {step} loss {sum(losses[-args.every :]) / args.every:.3f} exact {exact:.3f} first {first:.3f}"
                f" chance {1 / args.tools:.3f} {time.time() - start:.0f}s",
                flush=True,
            )
            if args.save and step % 500 == 0:
                model.save_pretrained(f"{args.save}/step{step}")
                tok.save_pretrained(f"{args.save}/step{step}")
    if args.save:
        model.save_pretrained(args.save)
        tok.save_pretrained(args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
