"""Fabricated SFT datasets in the real on-disk format, rendered through the primitives' specs, for tests and benchmarks.

The real datasets come from ``forethought generate``; this module writes files of
the same shape (``<dir>/<primitive>/{train,validation}.jsonl``, trl's
conversational prompt-completion format, one
:class:`~forethought.data_gen.row.DatasetRow` per line) so that training can be exercised and timed without them.
Every row is one of the spec's golden cases (kernel/spec_golden.json) with
random distractor tools added to its tool list and random words added to its
request, rendered by the spec (``messages`` and ``target_text``): the prompts
are the ones the model sees and each target is a valid output of its
primitive that passes its contract. It is not training data for a useful model
(a few cases, varied only in what does not change the answer). Every registered
primitive is covered, a sixth one included, with no edit here.

``scale="small"`` gives short prompts (tests); ``scale="realistic"`` adds many
distractor tools with long descriptions and long requests, for prompts of a few
hundred to about 1,500 tokens, like generated data.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Literal

from forethought.data_gen.row import DatasetRow
from forethought.kernel.specs import PRIMITIVE_NAMES, SPECS, PrimitiveSpec, ToolBrief
from forethought.primitives.io import atomic_write_jsonl

_WORDS = (
    "please then after that finishes also make sure the my current order line account file folder report "
    "data plan roaming trip car music artist minutes destination price stock message friend receipt budget "
    "weekly summary new old backup document release notes flight airport seat window before once done"
).split()
_TYPES = ("string", "number", "boolean", "list[string]", "enum[low|high]")


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _distractor(rng: random.Random, taken: set[str], detail: bool) -> ToolBrief:
    """A tool no target names (its name is fresh), so adding it changes no answer and breaks no contract."""
    while True:
        name = "_".join(rng.sample(_WORDS, 2)) + f"_{rng.randint(10, 99)}"
        if name not in taken:
            taken.add(name)
            break
    params = {f"{rng.choice(_WORDS)}_{i}": rng.choice(_TYPES) for i in range(rng.randint(0, 5 if detail else 2))}
    return ToolBrief(
        name=name,
        description=_sentence(rng, rng.randint(8, 16) if detail else rng.randint(3, 6)).capitalize() + ".",
        params=params,
        required=[p for p in params if rng.random() < 0.5],
    )


def _vary(spec: PrimitiveSpec, rng: random.Random, detail: bool) -> tuple[Any, Any]:
    """One golden case of the spec, with distractor tools and a longer request; returns (input, target)."""
    inp, target = rng.choice(spec.golden())
    update: dict[str, Any] = {}
    tools = getattr(inp, "tools", None)
    if isinstance(tools, list) and all(isinstance(t, ToolBrief) for t in tools):
        taken = {t.name for t in tools}
        extra = [_distractor(rng, taken, detail) for _ in range(rng.randint(6, 18) if detail else rng.randint(1, 4))]
        mixed = [*tools, *extra]
        rng.shuffle(mixed)
        update["tools"] = mixed
    context = getattr(inp, "context", None)
    if isinstance(context, dict):
        # Extra context entries under fresh keys: a value grounded in the context stays grounded.
        notes = {
            f"note_{k}": _sentence(rng, rng.randint(3, 12) if detail else rng.randint(1, 4))
            for k in range(rng.randint(1, 4))
        }
        update["context"] = {**context, **{k: v for k, v in notes.items() if k not in context}}
    user = getattr(inp, "user", None)
    if isinstance(user, str):
        # Words appended to the request: every value the target grounds in it is still there.
        update["user"] = user + " " + _sentence(rng, rng.randint(20, 120) if detail else rng.randint(2, 8))
    return inp.model_copy(update=update), target


def make_rows(
    primitive: str, n: int, *, seed: int = 0, scale: Literal["small", "realistic"] = "small", split: str = "train"
) -> list[dict[str, Any]]:
    spec = SPECS[primitive]
    rng = random.Random(f"{seed}:{primitive}:{split}")
    detail = scale == "realistic"
    rows = []
    for i in range(n):
        inp, target = _vary(spec, rng, detail)
        rows.append(
            DatasetRow(
                id=f"{primitive}-{split}-{i:05d}",
                # validation rows come from other (held-out) solutions, as in a generated dataset
                solution_id=f"{'val-' if split == 'validation' else ''}sol-{rng.randint(0, 299):03d}",
                primitive=primitive,
                prompt=spec.messages(inp),
                completion=[{"role": "assistant", "content": spec.target_text(target)}],
                target=target.model_dump(mode="json"),
                input=json.dumps(inp.model_dump(mode="json"), ensure_ascii=False),
                near_duplicate_across_split=False,
            ).model_dump(mode="json")
        )
    return rows


def write_dataset(
    root: str | Path,
    *,
    n_train: int = 24,
    n_val: int = 8,
    seed: int = 0,
    scale: Literal["small", "realistic"] = "small",
    primitives: tuple[str, ...] | None = None,
) -> Path:
    """Write ``<root>/<primitive>/{train,validation}.jsonl`` for each primitive (default: every registered one) and return ``root``."""
    root = Path(root)
    for primitive in primitives if primitives is not None else tuple(PRIMITIVE_NAMES):
        atomic_write_jsonl(
            root / primitive / "train.jsonl", make_rows(primitive, n_train, seed=seed, scale=scale, split="train")
        )
        atomic_write_jsonl(
            root / primitive / "validation.jsonl",
            make_rows(primitive, n_val, seed=seed, scale=scale, split="validation"),
        )
    from forethought.data_gen.unit import seal

    seal(root)  # one unit, as forethought generate writes it: train and validate check the manifest
    return root


if __name__ == "__main__":  # pragma: no cover
    import argparse

    ap = argparse.ArgumentParser(description="write a fabricated SFT dataset in the real format")
    ap.add_argument("out")
    ap.add_argument("--n-train", type=int, default=24)
    ap.add_argument("--n-val", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", choices=["small", "realistic"], default="small")
    options = ap.parse_args()
    print(
        write_dataset(options.out, n_train=options.n_train, n_val=options.n_val, seed=options.seed, scale=options.scale)
    )
