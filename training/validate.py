"""``forethought validate``: exact-match and contract gates per adapter (paper Section 5.3, Table 5).

For each primitive, the validation split is decoded greedily in batches with
the tuned adapter and with the base model alone; every output is parsed,
checked against the primitive's contract and compared with the target by the
primitive's canonical exact-match rule (all from its single spec in
``kernel/specs/``). Writes ``gates.json``, ``gates.md`` and ``gates.png``;
exits non-zero if any gate fails.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from forethought.config import LAYOUT
from forethought.data_gen.row import DatasetRow, read_rows
from forethought.errors import UserError
from forethought.kernel.backends.factory import Device
from forethought.kernel.specs import (
    PRIMITIVE_NAMES,
    SPECS,
    PrimitiveName,
    PrimitiveSpec,
    active_tool_rendering,
    default_thresholds,
    per_primitive,
)
from forethought.primitives.io import atomic_write_figure, atomic_write_json, atomic_write_text
from forethought.training.provenance import measured


def _all_or_names(value: object) -> object:
    """``primitives``: ``all`` means every primitive; a single name is a one-element list."""
    if value == "all":
        return list(PRIMITIVE_NAMES)
    if isinstance(value, str):
        if value not in PRIMITIVE_NAMES:
            raise ValueError(f"expected 'all', one of {', '.join(PRIMITIVE_NAMES)}, or a list of them")
        return [value]
    return value


Decoding = Literal["constrained", "free"]


def _per_primitive_decoding(value: object) -> object:
    """``decoding``: one value for every primitive, or a table (a primitive it does not name decodes constrained)."""
    if isinstance(value, str):
        return dict.fromkeys(PRIMITIVE_NAMES, value)
    if isinstance(value, dict):
        return {**dict.fromkeys(PRIMITIVE_NAMES, "constrained"), **value}
    return value


class ValidateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    train_dir: str = LAYOUT["train"]
    dataset_dir: str = LAYOUT["data"]
    output_dir: str = LAYOUT["validate"]
    # "all", one primitive name, or a list of them (stored as the list of names)
    primitives: Annotated[list[PrimitiveName], BeforeValidator(_all_or_names), Field(min_length=1)] = Field(
        default_factory=lambda: list(PRIMITIVE_NAMES)
    )
    max_examples: int | None = Field(None, ge=1)  # per primitive; None = the whole validation split
    batch_size: int = Field(16, ge=1)
    max_new_tokens: int = Field(384, ge=1)
    device: Device = "auto"
    base_comparison: bool = True
    # The gates' decoding, per primitive (a single value applies to all): constrained = contract-compiled
    # (kernel/decoding.py), or free. The bundle records it per primitive and the kernel decodes the same way.
    # compare_decoding also measures each adapter the other way, so format errors and decisions can be told apart.
    decoding: Annotated[dict[PrimitiveName, Decoding], BeforeValidator(_per_primitive_decoding)] = Field(
        default_factory=lambda: dict.fromkeys(PRIMITIVE_NAMES, "constrained")
    )
    compare_decoding: bool = True
    # exact-match rates in [0, 1]; a primitive not named keeps its spec's gate_threshold (kernel/specs/)
    thresholds: dict[PrimitiveName, Annotated[float, Field(ge=0.0, le=1.0)]] = Field(default_factory=default_thresholds)
    examples_per_failure: int = Field(3, ge=0)

    @field_validator("thresholds")
    @classmethod
    def _thr(cls, value: dict[str, float]) -> dict[str, float]:
        return per_primitive(value, lambda spec: spec.gate_threshold)

    def selected(self) -> list[str]:
        return [n for n in PRIMITIVE_NAMES if n in self.primitives]  # canonical order, no duplicates


def score(spec: PrimitiveSpec, rows: list[DatasetRow], texts: list[str], keep_examples: int = 3) -> dict[str, Any]:
    """Parse, contract-check and exact-match each output against its row's target."""
    n = len(rows)
    parsed_ok = contract_ok = em = 0
    kinds: Counter = Counter()
    examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row, text in zip(rows, texts, strict=False):
        kind = None
        try:
            pred = spec.parse(text)
            parsed_ok += 1
        except Exception:
            pred, kind = None, "unparseable"
        if kind is None:
            try:
                res = spec.check_output(row.input_value, pred)
            except Exception as exc:  # fail closed
                res, kind = None, f"contract:unevaluable ({type(exc).__name__})"
            if res is not None:
                if res.ok:
                    contract_ok += 1
                else:
                    violation = res.violations[0]
                    kind = f"contract:{violation.constraint}" if violation.level != "type" else "schema"
            if spec.exact_match(pred, row.target):
                em += 1
            elif kind is None:
                kind = "mismatch"
        if kind is not None:
            kinds[kind] += 1
            if len(examples[kind]) < keep_examples:
                examples[kind].append(
                    {"id": row.id, "output": text[:400], "target": spec.target_text(row.target)[:400]}
                )
    return {
        "n": n,
        "exact_match": em / n if n else 0.0,
        "contract_valid_rate": contract_ok / n if n else 0.0,
        "parse_rate": parsed_ok / n if n else 0.0,
        "failures": [{"kind": k, "count": c, "examples": examples[k]} for k, c in kinds.most_common()],
    }


def _read_rows(dataset_dir: str, prim: str, limit: int | None) -> list[DatasetRow]:
    path = Path(dataset_dir) / prim / "validation.jsonl"
    if not path.is_file():
        raise UserError(f"no validation split for {prim!r} (run forethought generate)", str(path))
    rows = read_rows(dataset_dir, prim, "validation", limit=limit)  # each row valid for its primitive (DatasetRow)
    if not rows:
        raise UserError("empty validation split", str(path))
    return rows


def run_validation(
    cfg: ValidateConfig, *, model: Any = None, tokenizer: Any = None, progress: Any = None
) -> dict[str, Any]:
    from forethought.kernel.backends.hf import BASE, generate, pick_device
    from forethought.training.artifacts import check_spec_hashes, check_trained_on, load_adapters
    from forethought.training.data import dataset_stores, use_dataset_rendering

    use_dataset_rendering(cfg.dataset_dir)
    stores = dataset_stores(cfg.dataset_dir)
    prims = cfg.selected()
    # Before any decoding: an adapter trained on other rows than these (first: data regenerated since also changes
    # the spec hash, and the remedy is the data, not the code), then one trained under another spec.
    check_trained_on(cfg.train_dir, prims, cfg.dataset_dir)
    trained_hashes = check_spec_hashes(cfg.train_dir, prims)
    rows_by = {primitive: _read_rows(cfg.dataset_dir, primitive, cfg.max_examples) for primitive in prims}
    if model is None:
        model, tokenizer = load_adapters(cfg.train_dir, prims, device=pick_device(cfg.device))
    results: dict[str, Any] = {}
    t0 = time.perf_counter()
    for primitive in prims:
        spec, rows = SPECS[primitive], rows_by[primitive]
        msgs = [row.prompt_messages() for row in rows]
        schemas = [spec.decoding_schema(spec.input_type.model_validate(row.input_value)) for row in rows]

        def decode(
            adapter: str,
            constrained: bool,
            kind: str,
            primitive: str = primitive,
            msgs: list = msgs,
            schemas: list = schemas,
        ) -> list[str]:
            return generate(
                model,
                tokenizer,
                msgs,
                adapter=adapter,
                batch_size=cfg.batch_size,
                max_new_tokens=cfg.max_new_tokens,
                schemas=schemas if constrained else None,
                on_batch=(lambda k: progress(primitive, kind, k)) if progress else None,
            )

        constrained = cfg.decoding[primitive] == "constrained"
        t1 = time.perf_counter()
        tuned = decode(primitive, constrained, "tuned")
        gen_s = time.perf_counter() - t1
        result = score(spec, rows, tuned, cfg.examples_per_failure)
        result["generation_s"] = round(gen_s, 2)
        result["examples_per_s"] = round(len(rows) / gen_s, 2) if gen_s > 0 else None
        result["decoding"] = cfg.decoding[primitive]
        result[f"exact_match_{result['decoding']}"] = result["exact_match"]
        # Rows with no near-duplicate in train (prompt with slot values and digits masked): the honest figure.
        fresh = [i for i, row in enumerate(rows) if not row.near_duplicate_across_split]
        result["n_no_near_duplicate"] = len(fresh)
        result["exact_match_no_near_duplicate"] = (
            score(spec, [rows[i] for i in fresh], [tuned[i] for i in fresh], 0)["exact_match"] if fresh else None
        )
        if cfg.compare_decoding:
            other = "free" if constrained else "constrained"
            result[f"exact_match_{other}"] = score(spec, rows, decode(primitive, not constrained, "tuned other"), 0)[
                "exact_match"
            ]
        if cfg.base_comparison:
            base_result = score(spec, rows, decode(BASE, constrained, "base"), 0)
            result["base_exact_match"] = base_result["exact_match"]
            result["base_contract_valid_rate"] = base_result["contract_valid_rate"]
            result["base_parse_rate"] = base_result["parse_rate"]
            if cfg.compare_decoding:  # base vs tuned under the other decoding too: like for like in both columns
                other = "free" if constrained else "constrained"
                result[f"base_exact_match_{other}"] = score(spec, rows, decode(BASE, not constrained, "base other"), 0)[
                    "exact_match"
                ]
        else:
            result["base_exact_match"] = None
        result["under_base"] = under_base(result)
        result["threshold"] = cfg.thresholds[primitive]
        result["passed"] = result["exact_match"] >= result["threshold"]
        result["spec_hash"] = spec.spec_hash
        result["trained_spec_hash"] = trained_hashes[primitive]
        results[primitive] = result
    summary = {
        "train_dir": cfg.train_dir,
        "dataset_dir": cfg.dataset_dir,
        "primitives": results,
        "passed": all(result["passed"] for result in results.values()),
        "decoding": {
            primitive: cfg.decoding[primitive] for primitive in prims
        },  # what each gate measured; package records it
        "tool_rendering": active_tool_rendering(),
        # the demonstrations stores the prompts retrieved from (digests): package ships these, and only these
        "demonstrations": {store.primitive: store.digest() for store in stores},
        "weighted_exact_match": _weighted(results, "exact_match"),
        "weighted_base_exact_match": _weighted(results, "base_exact_match") if cfg.base_comparison else None,
        "elapsed_s": round(time.perf_counter() - t0, 2),
        "measured": measured(
            cfg.train_dir, prims, cfg.dataset_dir
        ),  # the adapter files these gates hold for (issue 13)
    }
    out = Path(cfg.output_dir)
    atomic_write_json(out / "gates.json", summary)
    atomic_write_text(out / "gates.md", gates_markdown(summary))
    plot_gates(summary, out / "gates.png")
    return summary


def under_base(gate: dict[str, Any]) -> bool:
    """Whether the adapter scores under the base alone on the same rows with the same decoding: it answers worse
    than no adapter, which a user must see before deploying it, whatever the gate says (match_fill did so in runs
    #8-#11). Read from a gate record (gates.json, or a bundle manifest's gate entry)."""
    return gate.get("base_exact_match") is not None and gate.get("exact_match", 0) < gate["base_exact_match"]


def _weighted(results: dict[str, Any], key: str) -> float | None:
    tot = sum(r["n"] for r in results.values())
    if not tot or any(r.get(key) is None for r in results.values()):
        return None
    return sum(r[key] * r["n"] for r in results.values()) / tot


def _pct(fraction: float | None) -> str:
    return "—" if fraction is None else f"{100 * fraction:.1f}"


def _other(decoding: str) -> str:
    return "free" if decoding == "constrained" else "constrained"


def gates_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "Each gate is measured with its primitive's decoding (*decoding*: constrained = contract-compiled, kernel/decoding.py). "
        "*No near-dup*: the validation rows whose prompt (slot values and digits masked) does not occur in train. *Other "
        "decoding*: the same base and adapter decoded the other way.",
        "",
        "| Primitive | n | Decoding | Base EM | Tuned EM | Tuned EM, no near-dup (n) | Tuned EM, other decoding | Base EM, other decoding | "
        "Contract-valid | Parsed | Threshold | Gate |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for primitive, result in summary["primitives"].items():
        other = _other(result.get("decoding", "free"))
        lines.append(
            f"| {primitive} | {result['n']} | {result.get('decoding', 'free')} | {_pct(result.get('base_exact_match'))} | {_pct(result['exact_match'])} | "
            f"{_pct(result.get('exact_match_no_near_duplicate'))} ({result.get('n_no_near_duplicate', '—')}) | {_pct(result.get(f'exact_match_{other}'))} | "
            f"{_pct(result.get(f'base_exact_match_{other}'))} | "
            f"{_pct(result['contract_valid_rate'])} | {_pct(result['parse_rate'])} | {_pct(result['threshold'])} | {'pass' if result['passed'] else 'FAIL'} |"
        )
    lines.append(
        f"| **Weighted avg.** | {sum(result['n'] for result in summary['primitives'].values())} | | {_pct(summary.get('weighted_base_exact_match'))} | "
        f"{_pct(summary['weighted_exact_match'])} | | | | | | | {'pass' if summary['passed'] else 'FAIL'} |"
    )
    lines += ["", "Most frequent failure kinds (tuned adapter):", ""]
    for primitive, result in summary["primitives"].items():
        kinds = ", ".join(f"{f['kind']} ({f['count']})" for f in result["failures"][:4]) or "none"
        lines.append(f"- **{primitive}**: {kinds}")
    under = [(primitive, result) for primitive, result in summary["primitives"].items() if result.get("under_base")]
    if under:
        lines += [
            "",
            "**Under the base** (the same rows and decoding: the base alone answers better than the adapter):",
            "",
        ]
        lines += [
            f"- **{primitive}**: tuned {_pct(result['exact_match'])} % against the base's {_pct(result['base_exact_match'])} %"
            for primitive, result in under
        ]
    return "\n".join(lines) + "\n"


def plot_gates(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary["primitives"])
    tuned = [100 * summary["primitives"][n]["exact_match"] for n in names]
    base = [100 * (summary["primitives"][n].get("base_exact_match") or 0) for n in names]
    thr = [100 * summary["primitives"][n]["threshold"] for n in names]
    positions = range(len(names))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    ax.bar([i - 0.2 for i in positions], base, width=0.4, label="base", color="#9aa5b1")
    ax.bar([i + 0.2 for i in positions], tuned, width=0.4, label="tuned adapter", color="#1a73e8")
    ax.scatter(list(positions), thr, marker="_", s=900, color="#d93025", label="threshold", zorder=3)
    ax.set_xticks(list(positions), names, rotation=15)
    ax.set_ylabel("exact match (%)")
    ax.set_ylim(0, 105)
    # Outside the axes: thresholds sit near the top, where an inside legend would hide them.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title("Per-primitive exact match on the validation split")
    fig.tight_layout()
    atomic_write_figure(path, fig)


def validate_with_progress(cfg: ValidateConfig, console: Any) -> dict[str, Any]:
    """run_validation with a progress bar per primitive and model (base / tuned)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prims = cfg.selected()
    sizes = {primitive: len(_read_rows(cfg.dataset_dir, primitive, cfg.max_examples)) for primitive in prims}
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as prog:
        tasks = {}
        kinds = [
            "tuned",
            *(["tuned other"] if cfg.compare_decoding else []),
            *(["base"] if cfg.base_comparison else []),
            *(["base other"] if cfg.base_comparison and cfg.compare_decoding else []),
        ]
        for primitive in prims:
            for kind in kinds:
                label = (
                    kind.replace("other", _other(cfg.decoding[primitive]))
                    if "other" in kind
                    else f"{kind} {cfg.decoding[primitive]}"
                )
                tasks[(primitive, kind)] = prog.add_task(f"{primitive} ({label})", total=sizes[primitive])
        return run_validation(cfg, progress=lambda p, kind, k: prog.advance(tasks[(p, kind)], k))


def cli(args: list[str]) -> int:
    from rich.console import Console

    from forethought.arguments import load, split_args

    cfg = load("validate", split_args(args), ValidateConfig)
    if cfg is None:
        return 0
    from forethought.errors import check_output_dir

    check_output_dir(cfg.output_dir, "output_dir")  # before decoding, not after it; created when the gates are written
    console = Console(stderr=True)
    summary = validate_with_progress(cfg, console)
    console.print(gates_markdown(summary))
    console.print(f"wrote {cfg.output_dir}/gates.json, gates.md, gates.png")
    return 0 if summary["passed"] else 1
