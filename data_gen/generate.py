"""``forethought generate``: expand verified worked solutions into the five per-primitive SFT datasets.

Every example is a decision point of a verified solution: the input a
primitive sees at that point in a replay through the kernel, and the answer
the oracle (the annotations) gives. Solutions are varied first (entities,
paraphrases, task ids, task order, registry subsets with near-miss and
cross-domain tools, look-alike context keys), then replayed and verified
again, so every target is re-derived and consistent by construction; each
target is finally checked against its primitive's contract.

Splits are by solution: validation examples come only from solutions that
contribute nothing to train.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import random
import re
import shutil
import statistics
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator

from forethought.errors import UserError
from forethought.kernel.domains import load_domain
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.scenario import Solution
from forethought.kernel.solution_file import load_solution, solution_files, warn_format_notes
from forethought.kernel.specs import (
    PRIMITIVE_NAMES,
    SPECS,
    DemonstrationStore,
    PrimitiveName,
    active_tool_rendering,
    default_sizes,
    derived_specs,
    per_primitive,
    set_stores,
    set_tool_rendering,
    using_stores,
)
from forethought.primitives import SLMReply, SLMRequest
from forethought.primitives.io import atomic_write_json, atomic_write_text

from . import unit
from .augment import Variant, make_variant
from .coverage import coverage_lines, registry_coverage
from .formats import card_front_matter, field_list
from .row import DatasetRow, dev_solutions
from .verify import Divergence, verify_solution

CODE_VERSION = "generate-v1"


# ------------------------------------------------------------------ config
class VariationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entity: bool = True
    paraphrase: bool = True
    rename_ids: bool = True
    permute: bool = True
    registry: bool = True
    cross_domain: bool = True
    context_conflicts: bool = True
    max_distractors: int = Field(4, ge=0)
    # share of a varied solution's decision points also written with the target's tool taken off the list (train
    # only; a primitive whose spec has generation.without_target: match_func, answered null)
    without_target: float = Field(0.0, ge=0, le=1)
    # share of a varied solution's decision points also written with the task replaced by one listed tool's own
    # description, answered with that tool (train only; a primitive whose spec has generation.tool_description)
    tool_description: float = Field(0.0, ge=0, le=1)


class DemonstrationsConfig(BaseModel):
    """Retrieved demonstrations (kernel/specs/demonstrations.py) for the primitives whose spec retrieves them."""

    model_config = ConfigDict(extra="forbid")
    k: int = Field(3, ge=1, le=16)  # decisions shown per input, one per distinct tool
    # The dev split training will carve (train.dev_fraction and train's seed): its solutions stay out of the store,
    # so selection on dev rows measures what validation measures. train refuses data cut for another split.
    dev_fraction: float = Field(0.2, ge=0, lt=1)
    dev_seed: int = 0
    # Share of train rows also written with their demonstrations withheld (the prompt shows "(none)"), answered the
    # same, for training only: every prompt over a user's own tools shows "(none)" (no stored decision names them),
    # and an adapter that never trained on it falls from 73.8 to 41.2 % there (docs/training.md, "Recorded run #9").
    withheld: float = Field(0.0, ge=0, le=1)


class DataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    solutions: list[str]
    output_dir: str
    seed: int = 0
    # examples per primitive; a registered primitive not named gets its spec's default_size (kernel/specs/)
    sizes: dict[PrimitiveName, NonNegativeInt] = Field(default_factory=default_sizes)
    validation_fraction: float = Field(0.1, gt=0, lt=1)
    # A file naming the validation solutions (data_gen/held_out.json's form, or an earlier dataset's stats.json):
    # exactly those are held out and every other solution trains, so solutions added later never move a held-out
    # one into training and gates stay measured on the same solutions. null: generate chooses the split.
    held_out: str | None = None
    variations: VariationConfig = Field(default_factory=VariationConfig)
    allow_skip_unverifiable: bool = False
    allow_undersized: bool = False  # true: a primitive short of its requested size is reported, not an error
    # Varied copies that do not verify are dropped (and listed on the console and in stats.json); above this share
    # of all the copies replayed, generate fails naming the file that lost the most: such drops come from mistakes
    # in the solutions (an asserted number derived from a slot, a literal in a slot's value pool; see
    # data_gen/solutions/README.md), and they silently thin the data of exactly those scenarios.
    max_dropped_fraction: float = Field(0.02, ge=0, le=1)
    max_rounds: int = Field(400, ge=1)
    workers: int = Field(2, ge=1)
    # How prompts show tool lists (kernel/specs/ TOOL_RENDERINGS): full, or compact for small models. Recorded in
    # stats.json; training, validation, the bundle and the kernel then render the same way.
    tool_rendering: Literal["full", "compact", "focused", "valued"] = "full"
    # null: no demonstrations; else a store per retrieving primitive, written with the data and shown in its prompts
    demonstrations: DemonstrationsConfig | None = None

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, value: dict[str, int]) -> dict[str, int]:
        return per_primitive(value, lambda spec: spec.default_size)


class GenerateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    data: DataConfig


# ----------------------------------------------------------------- records
@dataclass
class Example:
    primitive: str
    solution_id: str
    prompt: list[dict[str, str]]
    completion: list[dict[str, str]]
    target: Any
    key: str  # rendered prompt text (dedupe / cross-split check)
    ops: tuple[str, ...] = ()
    input: Any = None  # the primitive's structured input (contract checks at validation)
    masked: str = ""  # the user prompt with this replay's slot values, digits and case masked (near-duplicate check;
    # the system prompt is the same for every example of a primitive)

    @property
    def id(self) -> str:
        digest = hashlib.sha1((self.key + "\x00" + self.completion[0]["content"]).encode()).hexdigest()[:16]
        return f"{self.primitive}-{digest}"

    def row(self, near_duplicate_across_split: bool) -> DatasetRow:
        return DatasetRow(
            id=self.id,
            solution_id=self.solution_id,
            primitive=self.primitive,
            prompt=self.prompt,
            completion=self.completion,
            target=self.target,
            input=json.dumps(self.input, ensure_ascii=False),  # key order matters: it is rendering order
            near_duplicate_across_split=near_duplicate_across_split,
            train_only=bool(TRAIN_ONLY_OPS.intersection(self.ops)),
        )


class _Recorder:
    """Wraps the oracle: keeps every (primitive, input, reply) it answers, and the decision points of the
    primitives derived from it (a spec's ``derived_from``: its input made from this one, answered by the oracle)."""

    name = "oracle"

    def __init__(self, inner: Any, sink: list[tuple[str, Any, str]]):
        self.inner = inner
        self.sink = sink

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        replies = self.inner.complete(requests)
        for request, rep in zip(requests, replies, strict=False):
            self.sink.append((request.primitive, request.input, rep.text))
            for derived in derived_specs(request.primitive):
                assert derived.derived_from is not None
                inp = derived.derived_from.make_input(request.input)
                self.sink.append(
                    (derived.name, inp, json.dumps(self.inner.answer(derived.name, inp), ensure_ascii=False))
                )
        return replies


def _scalars(value: Any) -> list[str]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (str, int, float)):
        return [str(value)]
    if isinstance(value, dict):
        return [s for x in value.values() for s in _scalars(x)]
    if isinstance(value, (list, tuple)):
        return [s for x in value for s in _scalars(x)]
    return []


_DIGITS = re.compile(r"\d+")


def masker(values: Any) -> Any:
    """``mask(text)``: lower-cased, the given slot values (3+ characters) replaced by ``<slot>``, digits by ``#``.

    Plain substring replacement (longest value first): fast, and it errs on the side of masking more.
    """
    strs = sorted({s.lower() for s in _scalars(list(values)) if len(s) >= 3}, key=lambda s: (-len(s), s))

    def mask(text: str) -> str:
        masked = text.lower()
        for slot_value in strs:
            masked = masked.replace(slot_value, "<slot>")
        return _DIGITS.sub("#", masked)

    return mask


def examples_from(
    sol_id: str,
    records: list[tuple[str, Any, str]],
    variant: Variant | None,
    wanted: frozenset[str] | None = None,
    *,
    rng: random.Random | None = None,
    slot_values: Any = (),
) -> tuple[list[Example], Counter]:
    """Render the recorded decision points as examples, by each primitive's spec and its generation rules
    (kernel/specs/). ``rng`` presents inputs in a shuffled order where the spec asks for it (get_order's
    batches; always, when given); ``slot_values`` are this replay's entity values, masked for the near-duplicate check."""
    out, dropped = [], Counter()
    mask = masker(slot_values)
    for prim, inp, text in records:
        if wanted is not None and prim not in wanted:
            continue  # that primitive's quota is already full: don't render it
        spec = SPECS[prim]
        rules = spec.generation
        if variant is not None and any(getattr(variant, change) for change in rules.drop_variants):
            # The same input would get another, equally right target (decompose: another task order / other ids).
            dropped[(prim, f"{prim}_of_{'_or_'.join(sorted(rules.drop_variants))}_variant")] += 1
            continue
        try:
            raw = json.loads(text)
        except json.JSONDecodeError:
            dropped[(prim, "unparseable_target")] += 1
            continue
        if rules.shuffle_input is not None and rng is not None:
            inp = rules.shuffle_input(inp, raw, rng)
        res = spec.check_output(inp, raw)
        if not res.ok:
            dropped[(prim, "target_violates_contract")] += 1
            continue
        ex = _example(spec, sol_id, inp, res.output, tuple(variant.ops) if variant else (), mask)
        out.append(ex)
        out += _train_only_examples(spec, sol_id, inp, raw, ex.key, variant, mask)
    return out, dropped


# Rows made for training only: validation rows stay the decisions the solutions hold.
TRAIN_ONLY_OPS = frozenset({"without_target", "tool_description", "without_demonstrations"})


def _train_only_examples(
    spec: Any, sol_id: str, inp: Any, raw: Any, key: str, variant: Any, mask: Any
) -> list[Example]:
    """What a varied decision also gives for training only (``data.variations``: without_target, tool_description),
    each drawn at its share from the prompt alone (not from ``rng``): the other rows are those of a dataset without it."""
    if _CFG is None or variant is None:
        return []
    rules, shares, made = spec.generation, _CFG.variations, []
    if rules.without_target and _draw(_CFG.seed, key) < shares.without_target:
        made.append(("without_target", rules.without_target(inp, raw, _target_and_alternatives(sol_id, raw))))
    if rules.tool_description and _draw(_CFG.seed, "described\x00" + key) < shares.tool_description:
        made.append(("tool_description", rules.tool_description(inp, _draw(_CFG.seed, "which tool\x00" + key))))
    examples = []
    for op, pair in made:
        if pair is not None and (checked := spec.check_output(*pair)).ok:
            examples.append(_example(spec, sol_id, pair[0], checked.output, (*variant.ops, op), mask))
    return examples


def _example(spec: Any, sol_id: str, inp: Any, output: Any, ops: tuple[str, ...], mask: Any) -> Example:
    prompt = spec.messages(inp)
    completion = [{"role": "assistant", "content": spec.target_text(output)}]
    key = prompt[0]["content"] + "\n\x00" + prompt[1]["content"]
    return Example(
        spec.name,
        sol_id,
        prompt,
        completion,
        output.model_dump(mode="json"),
        key,
        ops,
        inp.model_dump(mode="json"),
        mask(prompt[1]["content"]),
    )


def _draw(seed: int, key: str) -> float:
    return int.from_bytes(hashlib.sha256(f"{seed}\x00{key}".encode()).digest()[:8], "big") / 2**64


def _target_and_alternatives(sol_id: str, raw: Any) -> frozenset[str]:
    """The target's tool and the tools its registry entry names as alternatives (which would then do the task)."""
    name = raw.get("tool_name") if isinstance(raw, dict) else None
    sol = _SOLUTIONS.get(sol_id)
    alts: set[str] = set()
    for domain in sol.domains if sol is not None else []:
        tool = load_domain(domain).tools.get(name)
        if tool is not None:
            alts.update(tool.spec.alternatives)
    return frozenset({name, *alts} - {None})


# ------------------------------------------------------------- replay work
_KERNEL: Kernel | None = None
_SOLUTIONS: dict[str, Solution] = {}
_CFG: DataConfig | None = None


def _init(solutions: dict[str, Solution], cfg: DataConfig) -> None:
    global _KERNEL, _SOLUTIONS, _CFG
    set_tool_rendering(cfg.tool_rendering)  # the workers render the prompts too
    # Rows are rendered without demonstrations (ids, dedupe and near-duplicate checks read the prompt without them;
    # attach_demonstrations adds them after): a store this process was given earlier must not leak into them.
    set_stores([])
    _KERNEL = Kernel(KernelConfig())
    _SOLUTIONS = solutions
    _CFG = cfg


def _variant_rng(seed: int, sol_id: str, k: int) -> random.Random:
    return random.Random(f"{seed}:{sol_id}:{k}")


class VariantBug(RuntimeError):
    """An unexpected exception while varying or replaying a solution: a bug, never a dropped variant."""


def run_variant(job: tuple[str, int, frozenset[str] | None]) -> tuple[str, int, list[Example], Counter, str | None]:
    """Vary (k > 0) and replay one solution; return its examples (for the ``wanted`` primitives) or why it was dropped.

    Only expected failures drop a variant: a divergence from the annotations,
    a contract violation, a halt, or a solution the kernel rejects as invalid
    (all reported by verify as a Divergence). Anything else is a bug and is
    raised, naming the solution and the variant.
    """
    sol_id, k, wanted = job
    assert _KERNEL is not None and _CFG is not None
    sol = _SOLUTIONS[sol_id]
    sink: list[tuple[str, Any, str]] = []
    try:
        variant = None
        if k > 0:
            variant = make_variant(sol, _variant_rng(_CFG.seed, sol_id, k), _CFG.variations)
            target_sol, values = variant.solution, variant.slot_values
        else:
            target_sol, values = sol, None
        try:
            # Round 0 verifies the solution as written, paraphrases included (tags are verify's business).
            verify_solution(
                target_sol,
                _KERNEL,
                slot_values=values,
                wrap_backend=lambda b: _Recorder(b, sink),
                trace="violations",
                paraphrases=k == 0,
                check_tags=False,
            )
        except Divergence as divergence:
            return sol_id, k, [], Counter(), divergence.describe()
        all_values = {name: slot.value for name, slot in sol.slots.items()} | dict(values or {})
        exs, dropped = examples_from(
            sol_id,
            sink,
            variant,
            wanted,
            rng=random.Random(f"order:{_CFG.seed}:{sol_id}:{k}"),
            slot_values=all_values.values(),
        )
    except Exception as exc:
        raise VariantBug(
            f"{sol.source_file or sol_id}: variant {k} (seed {_CFG.seed}) raised {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        ) from exc
    return sol_id, k, exs, dropped, None


def _warn_unvaried_domains(sols: dict[str, Solution]) -> None:
    """A domain whose solutions name entities (slots) but has no slot values file gets no variation: every generated
    row would repeat the same titles, dates and ids. Said once per domain, on stderr."""
    import sys

    from .augment import slot_values, slot_values_path

    with_slots = Counter(s.domains[0] for s in sols.values() if s.slots)
    for domain, n in sorted(with_slots.items()):
        if not slot_values(domain):
            print(f"warning: domain {domain}: {n} solution(s) declare slots but {slot_values_path(domain)} "
                  "holds no values for them: their entities are not varied (every generated row repeats them)",
                  file=sys.stderr)  # fmt: skip


# ------------------------------------------------------------------ splits
def split_solutions(sols: dict[str, Solution], yields: dict[str, Counter], fraction: float, seed: int) -> set[str]:
    """Choose validation solutions: about ``fraction`` of each domain, covering every primitive."""
    rng = random.Random(f"split:{seed}")
    by_domain: dict[str, list[str]] = defaultdict(list)
    for sid, solution in sorted(sols.items()):
        by_domain[solution.domains[0]].append(sid)
    val: set[str] = set()
    for _dom, ids in sorted(by_domain.items()):
        ids = sorted(ids)
        rng.shuffle(ids)
        n = max(1, round(len(ids) * fraction)) if len(ids) >= 5 else 0
        val.update(ids[:n])
    for prim in PRIMITIVE_NAMES:
        sources = sorted(s for s in sols if yields[s][prim])
        # Train needs a source of every primitive; validation gets one too when there are two or more.
        if sources and all(s in val for s in sources):
            val.discard(sorted(sources, key=lambda s: (-yields[s][prim], s))[0])
        if len(sources) >= 2 and not any(s in val for s in sources):
            cands = sorted((s for s in sources if s not in val), key=lambda s: (-yields[s][prim], s))
            pick = cands[len(cands) // 2]
            if any(yields[o][prim] for o in sources if o != pick and o not in val):
                val.add(pick)
    return val


HELD_OUT_FORMAT = 1


def read_held_out(path: str) -> set[str]:
    """The solution ids a held-out file names: ``{"format_version": 1, "solutions": [...]}`` (data_gen/held_out.json),
    or a dataset's stats.json (its ``validation_solutions``), to hold out again what an earlier dataset held out."""
    file = Path(path)
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        raise UserError("data.held_out: no such file", path) from None
    except (OSError, ValueError) as error:
        raise UserError(f"data.held_out: not a readable JSON file ({error})", path) from None
    if isinstance(data, dict) and isinstance(data.get("validation_solutions"), list):  # a stats.json
        ids = data["validation_solutions"]
    elif isinstance(data, dict) and "solutions" in data:
        version = data.get("format_version")
        if version != HELD_OUT_FORMAT:
            raise UserError(
                f"data.held_out: format_version {version!r} is not one this version reads ({HELD_OUT_FORMAT})", path
            )
        ids = data["solutions"]
    else:
        raise UserError(
            'data.held_out: expected {"format_version": 1, "solutions": [ids]} or a dataset\'s stats.json', path
        )
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
        raise UserError("data.held_out: the solutions must be a non-empty list of solution ids", path)
    return set(ids)


def held_out_split(sols: dict[str, Solution], yields: dict[str, Counter], held_out: set[str], path: str) -> set[str]:
    """The validation solutions a held-out file names; refused unless the corpus holds each of them and train keeps
    a source of every primitive."""
    missing = sorted(held_out - set(sols))
    if missing:
        raise UserError(
            f"data.held_out names {len(missing)} solution(s) the corpus does not hold (or that did not verify): "
            + ", ".join(missing[:8])
            + (" ..." if len(missing) > 8 else "")
            + "; remove them from the file, or set data.held_out=null to let generate choose the split",
            path,
        )
    for prim in PRIMITIVE_NAMES:
        sources = [s for s in sols if yields[s][prim]]
        if sources and all(s in held_out for s in sources):
            raise UserError(
                f"data.held_out holds out every solution that yields {prim}: train would have none of its rows", path
            )
    return set(held_out)


# --------------------------------------------------------------- generation
@dataclass
class Pools:
    quota: dict[tuple[str, str], int]
    rows: dict[tuple[str, str], list[Example]] = field(default_factory=lambda: defaultdict(list))
    keys: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))  # prim -> prompt key -> split
    targets: dict[str, dict[str, str]] = field(
        default_factory=lambda: defaultdict(dict)
    )  # prim -> prompt key -> target text
    dropped: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def full(self, prim: str, split: str) -> bool:
        return len(self.rows[(prim, split)]) >= self.quota[(prim, split)]

    def add(self, ex: Example, split: str) -> None:
        prim = ex.primitive
        seen = self.keys[prim].get(ex.key)
        tgt = ex.completion[0]["content"]
        if seen is not None:
            if seen != split:
                self.dropped[prim]["prompt_in_other_split"] += 1
            elif self.targets[prim][ex.key] != tgt:
                self.dropped[prim]["conflicting_target"] += 1
            else:
                self.dropped[prim]["duplicate"] += 1
            return
        if self.full(prim, split):
            return
        self.keys[prim][ex.key] = split
        self.targets[prim][ex.key] = tgt
        self.rows[(prim, split)].append(ex)


def load_solutions(paths: list[str], allow_skip: bool) -> tuple[dict[str, Solution], list[str]]:
    sols: dict[str, Solution] = {}
    skipped: list[str] = []
    files = solution_files(paths)
    if not files:
        raise UserError("no solution files found", ", ".join(paths))
    for path in files:
        try:
            solution = load_solution(path)
        except UserError as exc:
            if not allow_skip:
                raise
            skipped.append(f"{path}: {exc.message}")
            continue
        if solution.id in sols:
            raise UserError(
                f"duplicate solution id {solution.id!r} (also in {sols[solution.id].source_file})", str(path)
            )
        warn_format_notes(solution)
        sols[solution.id] = solution
    return sols, skipped


def generate(cfg: DataConfig, *, progress: Any = None) -> dict[str, Any]:
    """Generate the dataset as one unit: staged next to ``output_dir``, sealed, then swapped in (data_gen/unit.py).

    Every check that can refuse the finished dataset (too many dropped copies, a primitive short of its size) runs
    on the staged one, before the swap: a refusal removes the staging folder and leaves ``output_dir`` as it was
    (the previous dataset byte-identical, or no folder at all)."""
    held_out = read_held_out(cfg.held_out) if cfg.held_out else None  # a bad file is refused before any write
    tmp = unit.staging_dir(cfg.output_dir)  # before the work: an unwritable or wrong output_dir fails now
    try:
        stats = _generate(cfg, tmp, progress, held_out)
        _refuse_unfit(cfg, stats)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    unit.commit(tmp, cfg.output_dir)
    return stats


def _left_as_it_was(cfg: DataConfig) -> str:
    out = Path(cfg.output_dir)
    if out.exists():
        return "nothing is written (the previous dataset in data.output_dir is left as it was)"
    return "nothing is written"


def _refuse_unfit(cfg: DataConfig, stats: dict[str, Any]) -> None:
    """Refuse a generated dataset that drops too many varied copies or falls short of its sizes (before it is put in place)."""
    n_dropped, n_copies = dropped_count(stats)
    if n_dropped and n_dropped > cfg.max_dropped_fraction * n_copies:
        lines = dropped_lines(stats, limit=10)
        raise UserError(
            f"{n_dropped} of {n_copies} varied copies did not verify and were dropped ({100 * n_dropped / n_copies:.1f} %, above "
            f"data.max_dropped_fraction={cfg.max_dropped_fraction}); {_left_as_it_was(cfg)}. Fix the solutions "
            "(`forethought verify` warns about the usual causes) or raise data.max_dropped_fraction:\n"
            + "\n".join(lines),
            dropped_worst_file(stats),
        )
    short = undersized(stats)
    if short and not cfg.allow_undersized:
        raise UserError(
            f"requested sizes not reached within max_rounds={cfg.max_rounds}: {', '.join(short)}; {_left_as_it_was(cfg)}. "
            "Raise data.max_rounds, add solutions, lower data.sizes, or set data.allow_undersized=true to accept them",
            cfg.output_dir,
        )


def _generate(cfg: DataConfig, tmp: Path, progress: Any, held_out: set[str] | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    sols, skipped = load_solutions(cfg.solutions, cfg.allow_skip_unverifiable)
    _init(sols, cfg)
    ctx = mp.get_context("fork") if cfg.workers > 1 else None
    pool = ctx.Pool(cfg.workers, initializer=_init, initargs=(sols, cfg)) if ctx else None

    def run_jobs(jobs: list[tuple[str, int, frozenset[str] | None]]) -> list[Any]:
        if pool is None:
            return [run_variant(j) for j in jobs]
        return pool.map(run_variant, jobs, chunksize=max(1, len(jobs) // (cfg.workers * 8)))

    _warn_unvaried_domains(sols)
    try:
        # Round 0: every solution as written must verify.
        base = run_jobs([(sid, 0, None) for sid in sorted(sols)])
        yields: dict[str, Counter] = {}
        first: dict[str, list[Example]] = {}
        for sid, _, exs, _, err in base:
            if err is not None:
                where = sols[sid].source_file or sid
                if not cfg.allow_skip_unverifiable:
                    raise UserError(f"solution does not verify: {err}", where)
                skipped.append(f"{where}: {err}")
                continue
            yields[sid] = Counter(e.primitive for e in exs)
            first[sid] = exs
        for sid in [s for s in sols if s not in yields]:
            del sols[sid]
        if held_out is None:
            val_ids = split_solutions(sols, yields, cfg.validation_fraction, cfg.seed)
        else:
            val_ids = held_out_split(sols, yields, held_out, str(cfg.held_out))
        if not val_ids:  # train would find no held-out solution to measure on, after the whole generation
            counts = Counter(s.domains[0] for s in sols.values())
            why = (
                "the corpus is too small to hold out a validation split: "
                + ", ".join(f"domain {d} has {n} solution{'s' if n != 1 else ''}" for d, n in sorted(counts.items()))
                + " (a domain needs 5 for some to be held out, or two solutions that yield the same primitive)"
            )
            if not cfg.allow_undersized:
                raise UserError(
                    why + "; add worked solutions (or allow_undersized=true for train rows only)", "solutions"
                )
            import sys

            print(f"warning: {why}: no validation rows (allow_undersized)", file=sys.stderr)
        quota = {}
        for prim in PRIMITIVE_NAMES:
            n_val = round(cfg.sizes[prim] * cfg.validation_fraction)
            quota[(prim, "validation")] = n_val
            quota[(prim, "train")] = cfg.sizes[prim] - n_val
        pools = Pools(quota)
        split_of = {sid: ("validation" if sid in val_ids else "train") for sid in sols}
        for sid in sorted(first):
            for ex in first[sid]:
                pools.add(ex, split_of[sid])
        failed: dict[str, Counter] = defaultdict(Counter)  # solution file -> full reason -> variants
        variants_ok = 0
        ops_count: Counter = Counter()
        rounds = 0
        for round_number in range(1, cfg.max_rounds + 1):
            open_ = {(p, s) for (p, s) in quota if not pools.full(p, s)}
            if not open_:
                break
            jobs = []
            for sid in sorted(sols):
                wanted = frozenset(p for p, sp in open_ if sp == split_of[sid] and yields[sid][p])
                if wanted:
                    jobs.append((sid, round_number, wanted))
            if not jobs:
                break
            rounds = round_number
            for sid, _k, exs, dropped, err in run_jobs(jobs):
                if err is not None:
                    failed[sols[sid].source_file or sid][err] += 1
                    continue
                variants_ok += 1
                for ex in exs:
                    if TRAIN_ONLY_OPS.intersection(ex.ops) and split_of[sid] != "train":
                        continue  # validation rows stay the decisions the solutions hold
                    ops_count.update(ex.ops)
                    pools.add(ex, split_of[sid])
                for (prim, reason), n in dropped.items():
                    pools.dropped[prim][reason] += n
            if progress is not None:
                progress(
                    round_number,
                    {p: sum(len(pools.rows[(p, s)]) for s in ("train", "validation")) for p in PRIMITIVE_NAMES},
                )
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    elapsed = time.perf_counter() - t0
    stores = attach_demonstrations(cfg, pools)
    ops_count.update(
        op for rows in pools.rows.values() for ex in rows for op in ex.ops if op == "without_demonstrations"
    )
    with using_stores(stores):  # the spec hashes recorded are those of prompts with demonstrations
        for store in stores:
            atomic_write_text(tmp / store.primitive / DEMONSTRATIONS_FILE, store.to_text())
        stats = write_outputs(
            cfg, sols, split_of, pools, skipped, failed, variants_ok, rounds, ops_count, elapsed, out=tmp, stores=stores
        )
    unit.seal(
        tmp, validation_solutions=stats["validation_solutions"]
    )  # last: the manifest vouches for every file above
    return stats


# ------------------------------------------------------------------ demonstrations
DEMONSTRATIONS_FILE = "demonstrations.jsonl"  # <dataset_dir>/<primitive>/, beside its splits


def attach_demonstrations(cfg: DataConfig, pools: Pools) -> list[DemonstrationStore]:
    """With data.demonstrations: for each primitive whose spec retrieves, the store of its train decisions (the
    rows of train solutions outside the dev split, not the train-only variations), and every row of both splits
    re-rendered with the decisions nearest to it, never its own solution's. Rows stay the same rows (ids, dedupe
    and near-duplicate checks are of the prompt without them)."""
    if cfg.demonstrations is None:
        return []
    stores = []
    for prim in PRIMITIVE_NAMES:
        spec = SPECS[prim]
        if spec.retrieval is None:
            continue
        train = sorted(pools.rows[(prim, "train")], key=lambda e: e.id)  # the file's order: the store's tie-break
        dev = dev_solutions(
            (e.solution_id for e in train), cfg.demonstrations.dev_fraction, cfg.demonstrations.dev_seed
        )
        decisions = []
        for ex in train:
            if ex.solution_id in dev or TRAIN_ONLY_OPS.intersection(ex.ops):
                continue
            stored = spec.retrieval.stored(
                spec.input_type.model_validate(ex.input), spec.output_type.model_validate(ex.target)
            )
            if stored is not None:
                decisions.append((ex.solution_id, *stored))
        store = DemonstrationStore(prim, cfg.demonstrations.k, decisions)
        withheld = []
        for split in ("train", "validation"):
            for ex in pools.rows[(prim, split)]:
                inp = spec.demonstrated(spec.input_type.model_validate(ex.input), store, exclude=ex.solution_id)
                ex.input, ex.prompt = inp.model_dump(mode="json"), spec.messages(inp)
                if split == "train" and _draw(cfg.seed, "withheld\x00" + ex.key) < cfg.demonstrations.withheld:
                    none = inp.model_copy(update={spec.retrieval.field: []})  # what a prompt no decision fits shows
                    withheld.append(
                        replace(
                            ex,
                            prompt=spec.messages(none),
                            input=none.model_dump(mode="json"),
                            key=ex.key + "\x00without demonstrations",  # its own row id
                            ops=(*ex.ops, "without_demonstrations"),
                        )
                    )
        pools.rows[(prim, "train")].extend(withheld)  # on top of data.sizes
        stores.append(store)
    return stores


# ------------------------------------------------------------------ output
def _dist(xs: list[int]) -> dict[str, float]:
    if not xs:
        return {"min": 0, "median": 0, "p95": 0, "max": 0, "mean": 0}
    ordered = sorted(xs)
    return {
        "min": ordered[0],
        "median": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "max": ordered[-1],
        "mean": round(sum(ordered) / len(ordered), 1),
    }


_TOK = re.compile(r"\w+|[^\w\s]")


def approx_tokens(text: str) -> int:
    """Pre-tokenizer word/punctuation count (the model's own tokenizer is trained later)."""
    return len(_TOK.findall(text))


def _near_dup_rate(rows: list[Example]) -> float:
    """Share of prompts identical to another one after masking (see :func:`masker`)."""
    if not rows:
        return 0.0
    return round(1 - len({e.masked for e in rows}) / len(rows), 4)


def _cross_split_near_dup_rate(train: list[Example], val: list[Example]) -> float:
    """Share of validation prompts whose masked form equals a train prompt's."""
    if not val:
        return 0.0
    seen = {e.masked for e in train}
    return round(sum(e.masked in seen for e in val) / len(val), 4)


def _input_order_is_target_rate(rows: list[Example]) -> float:
    """get_order: share of examples whose target order is the order the batch is presented in."""
    if not rows:
        return 0.0
    same = sum([t["id"] for t in e.input["tasks"]] == e.target["ordered_task_ids"] for e in rows)
    return round(same / len(rows), 4)


def _refusal(job: tuple[str, str, Any, str]) -> tuple[str, str | None]:
    """Why the primitive's decoding grammar refuses this written target (None: it admits it)."""
    from forethought.kernel.decoding import admits

    row_id, prim, inp, completion = job
    spec = SPECS[prim]
    return row_id, admits(spec.decoding_schema(spec.input_type.model_validate(inp)), completion)


def decoding_coverage(stats: dict[str, Any]) -> float:
    """The share of all written targets that their decoding grammar admits."""
    rows = [
        (i[sp]["examples"], i[sp].get("decoding_coverage", 1.0))
        for i in stats["primitives"].values()
        for sp in ("train", "validation")
    ]
    total = sum(n for n, _ in rows)
    return sum(n * c for n, c in rows) / total if total else 1.0


def grammar_refusals(cfg: DataConfig, rows: list[Example]) -> dict[str, str]:
    """Row id -> why its decoding grammar (kernel/decoding.py) refuses its target, for the rows it refuses. Every
    target passed its contract, so each refusal is a gap in the grammar, never in the data."""
    jobs = [(e.id, e.primitive, e.input, e.completion[0]["content"]) for e in rows]
    if cfg.workers > 1 and len(jobs) > 64:
        with mp.get_context("fork").Pool(
            cfg.workers, initializer=set_tool_rendering, initargs=(cfg.tool_rendering,)
        ) as pool:
            results = pool.map(_refusal, jobs, chunksize=max(1, len(jobs) // (cfg.workers * 8)))
    else:
        results = [_refusal(j) for j in jobs]
    return {i: why for i, why in results if why is not None}


def write_outputs(
    cfg, sols, split_of, pools, skipped, failed, variants_ok, rounds, ops_count, elapsed, *, out: Path, stores=()
) -> dict[str, Any]:
    per: dict[str, Any] = {}
    checked = valid = 0
    refused = grammar_refusals(cfg, [e for rows in pools.rows.values() for e in rows])
    for prim in PRIMITIVE_NAMES:
        info: dict[str, Any] = {"requested": cfg.sizes[prim]}
        spec = SPECS[prim]
        by_split = {}
        # Every row says whether its masked prompt also occurs in the other split, so validate can report
        # exact match on the validation rows that have no near-duplicate in train.
        masked = {sp: {e.masked for e in pools.rows[(prim, sp)]} for sp in ("train", "validation")}
        for split in ("train", "validation"):
            rows = sorted(pools.rows[(prim, split)], key=lambda e: e.id)
            by_split[split] = rows
            other = masked["validation" if split == "train" else "train"]
            text = "".join(e.row(e.masked in other).line() + "\n" for e in rows)
            atomic_write_text(out / prim / f"{split}.jsonl", text)
            ok = sum(spec.check_output(e.input, e.target).ok for e in rows)  # every written target, checked again
            checked, valid = checked + len(rows), valid + ok
            srcs = Counter(e.solution_id for e in rows)
            info[split] = {
                "examples": len(rows),
                "source_solutions": len(srcs),
                "domains": dict(sorted(Counter(d for e in rows for d in sols[e.solution_id].domains).items())),
                "pattern_tags": dict(sorted(Counter(t for e in rows for t in sols[e.solution_id].tags).items())),
                "prompt_tokens": _dist([approx_tokens(e.prompt[0]["content"] + e.prompt[1]["content"]) for e in rows]),
                "target_tokens": _dist([approx_tokens(e.completion[0]["content"]) for e in rows]),
                "near_duplicate_rate": _near_dup_rate(rows),
                "contract_valid_rate": round(ok / len(rows), 4) if rows else 1.0,
                # the share of targets the primitive's decoding grammar admits (kernel/decoding.py): 1.0, or a gap to fix
                "decoding_coverage": round(1 - sum(e.id in refused for e in rows) / len(rows), 4) if rows else 1.0,
                "decoding_refusals": [
                    {"id": e.id, "solution": e.solution_id, "why": refused[e.id]} for e in rows if e.id in refused
                ][:20],
            }
            if prim == "get_order":
                info[split]["input_order_is_target_rate"] = _input_order_is_target_rate(rows)
        atomic_write_text(
            out / prim / "README.md", card_front_matter() + f"# forethought `{prim}` SFT data\n\nSee ../README.md.\n"
        )
        info["cross_split_near_duplicate_rate"] = _cross_split_near_dup_rate(by_split["train"], by_split["validation"])
        info["dropped"] = dict(sorted(pools.dropped[prim].items()))
        info["solution_overlap"] = len(
            {e.solution_id for e in pools.rows[(prim, "train")]}
            & {e.solution_id for e in pools.rows[(prim, "validation")]}
        )
        info["shared_prompts"] = len(
            {e.key for e in pools.rows[(prim, "train")]} & {e.key for e in pools.rows[(prim, "validation")]}
        )
        info["reached_requested_size"] = info["train"]["examples"] + info["validation"]["examples"] >= cfg.sizes[prim]
        per[prim] = info
    total = sum(per[p]["train"]["examples"] + per[p]["validation"]["examples"] for p in PRIMITIVE_NAMES)
    stats = {
        "code_version": CODE_VERSION,
        "seed": cfg.seed,
        "tool_rendering": active_tool_rendering(),
        # per retrieving primitive: its store file, the dev split it leaves out (train must carve the same), size
        "demonstrations": {
            s.primitive: {
                "file": f"{s.primitive}/{DEMONSTRATIONS_FILE}",
                "sha256": s.digest(),
                "k": s.k,
                "decisions": len(s.decisions),
                "dev_fraction": cfg.demonstrations.dev_fraction,
                "dev_seed": cfg.demonstrations.dev_seed,
            }
            for s in stores
        }
        if cfg.demonstrations is not None
        else None,
        "spec_hashes": {p: SPECS[p].spec_hash for p in PRIMITIVE_NAMES},
        "solutions": len(sols),
        "validation_solutions": sorted(s for s, sp in split_of.items() if sp == "validation"),
        # how the split was made: the held-out file's name (data.held_out), or null when generate chose it
        "held_out": Path(cfg.held_out).name if cfg.held_out else None,
        "skipped_solutions": skipped,
        "variants_replayed": variants_ok,
        # solution file -> full reason -> number of variants of it that did not verify (and were discarded)
        "variants_dropped": {f: dict(sorted(c.items())) for f, c in sorted(failed.items())},
        "variation_ops": dict(sorted(ops_count.items())),
        "rounds": rounds,
        "examples": total,
        "primitives": per,
        # every written target re-checked against its primitive's contract (invalid ones were dropped before)
        "contract_valid_rate": round(valid / checked, 4) if checked else 1.0,
        "solution_mix": {
            "domains": dict(sorted(Counter(d for s in sols.values() for d in s.domains).items())),
            "pattern_tags": dict(sorted(Counter(t for s in sols.values() for t in s.tags).items())),
        },
        # what the registry allows that no train row holds: the next worked solutions to write
        "registry_coverage": registry_coverage(
            {d for s in sols.values() for d in s.domains}, {p: pools.rows[(p, "train")] for p in PRIMITIVE_NAMES}
        ),
    }
    atomic_write_json(out / "stats.json", stats)
    atomic_write_text(out / "README.md", dataset_card(cfg, stats))
    stats["elapsed_s"] = round(elapsed, 2)
    return stats


def dropped_count(stats: dict[str, Any]) -> tuple[int, int]:
    """(varied copies dropped, varied copies replayed in all)."""
    n = sum(sum(c.values()) for c in stats["variants_dropped"].values())
    return n, n + stats["variants_replayed"]


def dropped_lines(stats: dict[str, Any], limit: int | None = None) -> list[str]:
    """``<file>: <reason> × n`` for every dropped reason, the most frequent first."""
    rows = sorted(
        ((f, r, n) for f, c in stats["variants_dropped"].items() for r, n in c.items()),
        key=lambda x: (-x[2], x[0], x[1]),
    )
    out = [f"{f}: {r} × {n}" for f, r, n in rows[:limit]]
    if limit is not None and len(rows) > limit:
        out.append(f"... and {len(rows) - limit} more (stats.json, variants_dropped)")
    return out


def dropped_worst_file(stats: dict[str, Any]) -> str:
    return max(stats["variants_dropped"].items(), key=lambda fc: (sum(fc[1].values()), fc[0]))[0]


def undersized(stats: dict[str, Any]) -> list[str]:
    """'<primitive> <produced> < <requested>' for every primitive short of its requested size."""
    out = []
    for primitive in PRIMITIVE_NAMES:
        info = stats["primitives"][primitive]
        if not info["reached_requested_size"]:
            out.append(
                f"{primitive} {info['train']['examples'] + info['validation']['examples']} < {info['requested']}"
            )
    return out


def dataset_card(cfg: DataConfig, stats: dict[str, Any]) -> str:
    lines = [
        "# forethought per-primitive SFT datasets",
        "",
        "Generated by `forethought generate` from the verified worked solutions in "
        + ", ".join(f"`{p}`" for p in cfg.solutions)
        + f" (seed {cfg.seed}, {stats['solutions']} solutions, {len(stats['validation_solutions'])} held out for validation).",
        "",
        "Each line is one row (`forethought.data_gen.row.DatasetRow`): trl's conversational prompt-completion "
        "format plus metadata. Load a "
        'primitive with `datasets.load_dataset("<this folder>/<primitive>")`, or with '
        '`datasets.load_dataset("json", data_files={...}, features=forethought.data_gen.formats.features())` '
        "(the target's free-form mappings need the `Json` feature across splits).",
        "",
        field_list(),
        "",
        "Every example is a decision point of a worked solution replayed through the kernel with the oracle "
        "backend after variation (entities, paraphrases, task ids, task order, registry subsets with near-miss "
        "and cross-domain tools, look-alike context keys). "
        f"{100 * stats['contract_valid_rate']:.1f} % of the written targets pass their primitive's contract (checked again when written), "
        f"and {100 * decoding_coverage(stats):.2f} % are admitted by their primitive's decoding grammar (kernel/decoding.py). "
        "Validation examples come only from held-out solutions; no rendered prompt appears in both splits. "
        "get_order's batches are always presented in a shuffled order that differs from the target order.",
        "",
        "| primitive | train | validation | requested | train solutions | val solutions | near-dup rate (train) | near-dup val↔train | prompt tokens "
        "median / p95 | target tokens median / p95 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for primitive in PRIMITIVE_NAMES:
        info = stats["primitives"][primitive]
        tr, va = info["train"], info["validation"]
        lines.append(
            f"| {primitive} | {tr['examples']} | {va['examples']} | {info['requested']} | {tr['source_solutions']} | {va['source_solutions']} | "
            f"{tr['near_duplicate_rate']:.3f} | {info['cross_split_near_duplicate_rate']:.3f} | {tr['prompt_tokens']['median']} / {tr['prompt_tokens']['p95']} | "
            f"{tr['target_tokens']['median']} / {tr['target_tokens']['p95']} |"
        )
    mix = stats["solution_mix"]
    lines += [
        "",
        "Token counts are pre-tokenizer word/punctuation counts. Near-duplicates are compared after lower-casing and "
        "masking the replay's slot values and every digit: *near-dup rate* is the share of train prompts identical to "
        "another train prompt; *near-dup val↔train* the share of validation prompts identical to a train prompt.",
        "",
        "Source solutions by domain: " + ", ".join(f"{d} {n}" for d, n in mix["domains"].items()) + ".",
        "",
        "Source solutions by pattern tag: " + ", ".join(f"{t} {n}" for t, n in mix["pattern_tags"].items()) + ".",
        "",
    ]
    for primitive, store in sorted((stats.get("demonstrations") or {}).items()):
        lines += [
            f"{primitive}'s prompts show up to {store['k']} similar tasks of other train solutions, each with its tool, "
            f"retrieved from `{store['file']}` ({store['decisions']} decisions of the train solutions outside the dev "
            f"split dev_fraction={store['dev_fraction']} seed={store['dev_seed']}; kernel/specs/demonstrations.py). "
            "A row is never shown its own solution's tasks; the bundle carries the store and the kernel retrieves "
            "from it the same way.",
            "",
        ]
    lines += coverage_lines(stats["registry_coverage"])
    if stats["skipped_solutions"]:
        lines += [f"{len(stats['skipped_solutions'])} solution(s) were skipped (`allow_skip_unverifiable`):", ""]
        lines += [f"- {s}" for s in stats["skipped_solutions"]] + [""]
    else:
        lines += ["No solution was skipped.", ""]
    dropped_ex = [(p, r, n) for p in PRIMITIVE_NAMES for r, n in stats["primitives"][p]["dropped"].items()]
    if dropped_ex:
        lines += ["Examples not written, per primitive and reason:", ""]
        lines += [f"- {p}: {r} × {n}" for p, r, n in dropped_ex] + [""]
    n_var = sum(sum(c.values()) for c in stats["variants_dropped"].values())
    if n_var:
        lines += [f"{n_var} varied solution(s) did not verify and were discarded:", ""]
        lines += [f"- `{f}`: {r} × {n}" for f, c in stats["variants_dropped"].items() for r, n in c.items()] + [""]
    else:
        lines += [f"All {stats['variants_replayed']} varied solutions verified (none discarded).", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------- CLI
def cli(args: list[str]) -> int:
    from rich.console import Console
    from rich.markup import escape

    from forethought.arguments import load, split_args

    cfg = load("generate", split_args(args), GenerateConfig)
    if cfg is None:
        return 0
    console = Console(stderr=True)
    with console.status("generating...") as status:
        stats = generate(
            cfg.data,
            progress=lambda r, counts: status.update(f"round {r}: " + ", ".join(f"{k} {v}" for k, v in counts.items())),
        )
    for primitive in PRIMITIVE_NAMES:
        info = stats["primitives"][primitive]
        console.print(
            f"{primitive:<20} train {info['train']['examples']:>6}  validation {info['validation']['examples']:>5}  (requested {info['requested']})"
        )
    console.print(
        f"{stats['examples']} examples from {stats['solutions']} solutions in {stats['elapsed_s']} s -> {cfg.data.output_dir}"
    )
    n_dropped, n_copies = dropped_count(stats)
    if n_dropped:  # below data.max_dropped_fraction (above it, generate raised with the list)
        console.print(f"[yellow]{n_dropped} of {n_copies} varied copies did not verify and were dropped:[/yellow]")
        for line in dropped_lines(stats):
            console.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
    cover = decoding_coverage(stats)
    if (
        cover < 1
    ):  # every target passed its contract: a refusal is a gap in the grammar (kernel/decoding.py), never in the data
        console.print(
            f"[yellow]the decoding grammar refuses {100 * (1 - cover):.2f} % of the written targets; constrained decoding "
            "could not produce them (stats.json: decoding_refusals lists them):[/yellow]"
        )
        for primitive in PRIMITIVE_NAMES:
            for sp in ("train", "validation"):
                for refusal in stats["primitives"][primitive][sp]["decoding_refusals"][:3]:
                    console.print(
                        f"  {primitive} {sp} {refusal['id']} ({refusal['solution']}): {escape(refusal['why'])}",
                        soft_wrap=True,
                        highlight=False,
                    )
    prerequisites = stats["registry_coverage"]["prerequisite_decisions"]
    if prerequisites["not_held"]:
        console.print(
            f"train holds {prerequisites['held']} of the registry's {prerequisites['declared']} prerequisite decisions; "
            f"no train solution holds {len(prerequisites['not_held'])} (README.md: registry coverage)",
            highlight=False,
        )
    short = undersized(stats)
    if short:  # only reached with data.allow_undersized=true
        console.print(
            f"[yellow]requested sizes not reached within max_rounds={cfg.data.max_rounds}: {', '.join(short)} "
            "(allowed by data.allow_undersized)[/yellow]"
        )
    return 0
