"""Fabricated SFT datasets in the real on-disk format, for tests and benchmarks.

The real datasets come from ``forethought generate``; this module writes files of
the same shape (``<dir>/<primitive>/{train,validation}.jsonl``, one
:class:`~forethought.data_gen.row.DatasetRow` per line) so that training can be exercised and timed without them. The
content is plausible but random: it is not training data for a useful model.

``scale="small"`` gives short prompts (tests); ``scale="realistic"`` gives
prompts of roughly 150-1500 tokens and completions of 10-300 tokens, like the
paper's Appendix E examples.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Literal

from forethought.data_gen.row import DatasetRow
from forethought.primitives.io import atomic_write_jsonl

PRIMITIVES = ("decompose", "get_order", "check_prerequisites", "match_func", "match_fill")

_TOOLS = [
    ("enable_roaming", "Enable international roaming on a mobile line.", ["line_id"]),
    ("refuel_data", "Add mobile data (in GB) to a line.", ["line_id", "gb_amount"]),
    ("get_customer_by_phone", "Look up a customer by phone number.", ["phone_number"]),
    ("run_speed_test", "Run a network speed test on the device.", []),
    ("toggle_airplane_mode", "Turn airplane mode on or off.", ["on"]),
    ("set_navigation", "Set the navigation destination of the car.", ["destination"]),
    ("spotify.play", "Play an artist for a number of minutes.", ["artist", "duration"]),
    ("cd", "Change the current working directory.", ["folder"]),
    ("mv", "Move or rename a file.", ["source", "destination"]),
    ("cat", "Print the contents of a file.", ["file_name"]),
    ("exchange_delivered_order_items", "Exchange items of a delivered order.", ["order_id", "item_ids", "new_item_ids", "payment_method_id"]),
    ("get_order_details", "Get the status and items of an order.", ["order_id"]),
    ("send_message", "Send a message to a user.", ["receiver_id", "message"]),
    ("get_stock_info", "Get the price and volume of a stock.", ["symbol"]),
    ("place_order", "Place a buy or sell order.", ["symbol", "amount", "price", "order_type"]),
    ("book_flight", "Book a flight between two airports.", ["travel_from", "travel_to", "travel_date", "travel_class"]),
    ("lock_doors", "Lock or unlock the car doors.", ["unlock", "door"]),
    ("start_engine", "Start the car engine.", ["ignition_mode"]),
]

_WORDS = (
    "please then after that finishes also make sure the my current order line account file folder report "
    "data plan roaming trip car music artist minutes destination price stock message friend receipt budget "
    "weekly summary new old backup document release notes flight airport seat window before once done"
).split()

_SYSTEM = {
    "decompose": "You break a user request into atomic unit tasks. Each task calls exactly one tool of the registry. "
    "Identify dependencies between tasks (a task that needs another's result lists it in depends_on). Ground every "
    "parameter in the user request, the environment configuration or the prior conversation; never invent values. "
    'Answer with one JSON object {"tasks": [...], "config_keys": {...}} and nothing else.',
    "get_order": "You are given a batch of mutually independent ready tasks. Output a total ordering of exactly the "
    "given task ids that best fits the user's workflow. Invent no ids and no dependencies. Answer with one JSON "
    'object {"ordered_task_ids": [...]} and nothing else.',
    "check_prerequisites": "A prerequisite key of a tool is absent (missing from the scratchpad) or not_met (present "
    "but its predicate is false). Propose at most one unit task that would advance the check toward met, or null "
    'when no task can. Answer with one JSON object {"task": ...} and nothing else.',
    "match_func": "Given one unit task and a tool registry, choose at most one tool whose name matches the registry "
    'exactly. Return null if none applies. Answer with one JSON object {"tool_name": ...} and nothing else.',
    "match_fill": "Propose values only for the missing required parameters, grounded in the task text, the turn "
    "context or the scratchpad. If a value must come from state, read it from the scratchpad rather than inventing "
    'it. Answer with one JSON object {"values": {...}} and nothing else.',
}


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _registry(rng: random.Random, k: int, detail: bool) -> list[dict[str, Any]]:
    tools = rng.sample(_TOOLS, k=min(k, len(_TOOLS)))
    out = []
    for name, desc, params in tools:
        entry: dict[str, Any] = {"name": name, "description": desc, "required": params}
        if detail:
            entry["parameters"] = {p: {"type": rng.choice(["string", "integer", "array", "boolean"]), "description": _sentence(rng, rng.randint(4, 12))} for p in params}
        out.append(entry)
    return out


def _value(rng: random.Random, param: str) -> Any:
    if param in ("duration", "gb_amount", "amount"):
        return rng.randint(1, 50)
    if param in ("on", "unlock"):
        return rng.random() < 0.5
    if param.endswith("_ids"):
        return [f"I-{rng.randint(100, 999)}" for _ in range(rng.randint(1, 3))]
    return rng.choice(["L-555", "New York", "Marvin Gaye", "document", "release_notes.txt", "NVDA", "O-1042", "JFK", "driver", "START"])


def _example(primitive: str, rng: random.Random, detail: bool) -> tuple[str, dict[str, Any]]:
    reg = _registry(rng, rng.randint(3, 8) if not detail else rng.randint(6, 18), detail)
    request = _sentence(rng, rng.randint(8, 30) if detail else rng.randint(5, 12))
    if primitive == "decompose":
        n = rng.randint(1, 4 if detail else 2)
        tasks = []
        for i in range(n):
            tool = rng.choice(reg)
            tasks.append({
                "id": f"t{i + 1}",
                "tool_name": tool["name"],
                "depends_on": [f"t{i}"] if i and rng.random() < 0.5 else [],
                "parameters": {p: _value(rng, p) for p in tool["required"]},
            })
        target = {"tasks": tasks, "config_keys": {}}
        user = {"request": request, "registry": reg, "environment": {"user_id": f"U{rng.randint(1, 99)}"}}
        if detail:
            user["history"] = [_sentence(rng, rng.randint(10, 40)) for _ in range(rng.randint(0, 4))]
    elif primitive == "get_order":
        ids = [f"s{rng.randint(1, 9)}{i}" for i in range(rng.randint(2, 5))]
        target = {"ordered_task_ids": rng.sample(ids, len(ids))}
        user = {"request": request, "ready_tasks": [{"id": i, "description": _sentence(rng, rng.randint(3, 8))} for i in ids]}
    elif primitive == "check_prerequisites":
        tool = rng.choice(reg)
        target = {"task": None if rng.random() < 0.2 else {"tool_name": tool["name"], "parameters": {p: _value(rng, p) for p in tool["required"]}}}
        user = {"key": rng.choice(["destination_set", "engine_on", "logged_in", "roaming_enabled"]), "outcome": rng.choice(["absent", "not_met"]), "main_task": request, "registry": reg}
    elif primitive == "match_func":
        tool = rng.choice(reg)
        target = {"tool_name": None if rng.random() < 0.1 else tool["name"]}
        user = {"task": request, "registry": reg}
    else:  # match_fill
        tool = rng.choice([t for t in reg if t["required"]] or reg)
        missing = tool["required"][: rng.randint(1, max(1, len(tool["required"])))]
        target = {"values": {p: _value(rng, p) for p in missing}}
        user = {"task": request, "tool": tool, "missing": missing, "turn_context": {"note": _sentence(rng, 6)}, "scratchpad": {p: _value(rng, p) for p in missing}}
    return json.dumps(user, ensure_ascii=False), target


def make_rows(primitive: str, n: int, *, seed: int = 0, scale: Literal["small", "realistic"] = "small", split: str = "train") -> list[dict[str, Any]]:
    rng = random.Random(f"{seed}:{primitive}:{split}")
    detail = scale == "realistic"
    rows = []
    for i in range(n):
        user, target = _example(primitive, rng, detail)
        rows.append(DatasetRow(
            id=f"{primitive}-{split}-{i:05d}",
            # validation rows come from other (held-out) solutions, as in a generated dataset
            solution_id=f"{'val-' if split == 'validation' else ''}sol-{rng.randint(0, 299):03d}",
            primitive=primitive,
            prompt=[{"role": "system", "content": _SYSTEM[primitive]}, {"role": "user", "content": user}],
            completion=[{"role": "assistant", "content": json.dumps(target, ensure_ascii=False)}],
            target=target,
            input=user,  # the user message is the structured input's JSON, as it is rendered
            near_duplicate_across_split=False,
        ).model_dump(mode="json"))
    return rows


def write_dataset(
    root: str | Path,
    *,
    n_train: int = 24,
    n_val: int = 8,
    seed: int = 0,
    scale: Literal["small", "realistic"] = "small",
    primitives: tuple[str, ...] = PRIMITIVES,
) -> Path:
    """Write ``<root>/<primitive>/{train,validation}.jsonl`` for each primitive and return ``root``."""
    root = Path(root)
    for p in primitives:
        atomic_write_jsonl(root / p / "train.jsonl", make_rows(p, n_train, seed=seed, scale=scale, split="train"))
        atomic_write_jsonl(root / p / "validation.jsonl", make_rows(p, n_val, seed=seed, scale=scale, split="validation"))
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
    a = ap.parse_args()
    print(write_dataset(a.out, n_train=a.n_train, n_val=a.n_val, seed=a.seed, scale=a.scale))
