"""``forethought package``: build the bundle the kernel loads (see ``forethought/bundle/manifest.py``).

Refuses any adapter whose validation gate failed, unless
``allow_failed_gates=true``, which writes the bundle marked ``smoke``.
Before anything is written, an adapter-applies check confirms that each
adapter changes the model's output on a probe input (an adapter whose keys
do not match the served model is otherwise silently ignored).
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forethought.bounded import read_json_object
from forethought.bundle.manifest import (
    FORMAT_VERSION,
    GATE_KEYS,
    MANIFEST,
    PLAIN_FORMAT_VERSION,
    BundleError,
    check_swap_room,
    config_sha256,
    hash_files,
    recover_swap,
    sha256_file,
    swap_in,
)
from forethought.bundle.models import PICKLE_PATTERNS
from forethought.config import LAYOUT
from forethought.errors import UserError
from forethought.kernel.specs import PRIMITIVE_NAMES, SPECS
from forethought.primitives.io import atomic_write_json, atomic_write_text

from .config import BUILT_HERE
from .validate import under_base

PROBE = [
    {"role": "system", "content": "Answer with JSON."},
    {"role": "user", "content": "Task: list the files in the current folder\nTools:\n- ls(a?: boolean): List files."},
]


class PackageConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    train_dir: str = LAYOUT["train"]
    validate_dir: str = LAYOUT["validate"]
    dataset_dir: str = LAYOUT["data"]
    output_dir: str = LAYOUT["bundle"]
    allow_failed_gates: bool = False
    copy_base: Literal["auto", "always", "never"] = "auto"  # auto: copy bases under 2 GB
    min_probe_delta: float = Field(1e-6, ge=0)


def _trained_attn_implementation(train_dir: str | Path) -> str:
    """The attention implementation the adapters were trained with (one for all), else sdpa."""
    from forethought.training.run_support import read_run_config

    impls = set()
    for primitive in PRIMITIVE_NAMES:
        config_path = Path(train_dir) / primitive / "config.yaml"
        if config_path.is_file():
            impl = (read_run_config(config_path).get("model") or {}).get("attn_implementation")
            if impl:
                impls.add(impl)
    return impls.pop() if len(impls) == 1 else "sdpa"


def _version() -> str:
    try:
        from importlib.metadata import version

        version_text = version("forethought")
    except Exception:
        version_text = "0+unknown"
    try:
        import subprocess

        here = Path(__file__).parent
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, cwd=here
        ).stdout.strip()
        if sha:
            version_text += f"+g{sha}"
            # Uncommitted changes to the code mean the commit alone does not say what built the bundle.
            code = ["primitives", "kernel", "training", "data_gen", "forethought"]
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no", "--", *code],
                capture_output=True,
                text=True,
                timeout=5,
                cwd=here.parent,
            ).stdout.strip()
            if dirty:
                version_text += ".dirty"
    except Exception:
        pass
    return version_text


def adapter_applies(model: Any, tokenizer: Any, names: list[str], min_delta: float) -> dict[str, float]:
    """Max |logit difference| between each adapter and the bare base on a probe prompt."""
    import torch

    text = tokenizer.apply_chat_template(PROBE, add_generation_prompt=True, tokenize=False)
    enc = tokenizer(text, return_tensors="pt", add_special_tokens=False).to(next(model.parameters()).device)
    out = {}
    with torch.inference_mode():
        with model.disable_adapter():
            base = model(**enc).logits.float()
        for n in names:
            model.set_adapter(n)
            out[n] = float((model(**enc).logits.float() - base).abs().max())
    bad = [n for n, d in out.items() if not d > min_delta]
    if bad:
        raise BundleError(
            f"adapters {bad} do not change the model's output on the probe input (max |Δlogit| ≤ {min_delta}): their keys "
            "probably do not match the model's module names, so a server would silently serve the base model",
            "adapter-applies check",
        )
    return out


def model_card(
    prim: str, entry: dict[str, Any], base: dict[str, Any], stats: dict[str, Any] | None, smoke: bool
) -> str:
    gate = entry["gate"]
    ds = (stats or {}).get("primitives", {}).get(prim, {})
    warn = (
        "\n> **SMOKE BUNDLE — NOT FOR USE.** This adapter did not pass its validation gate; it was packaged with "
        "`allow_failed_gates=true` for smoke tests only.\n"
        if smoke and not gate.get("passed")
        else ""
    )
    n_train, n_val = ds.get("train", {}).get("examples", "?"), ds.get("validation", {}).get("examples", "?")
    base_em = "—" if gate.get("base_exact_match") is None else f"{100 * gate['base_exact_match']:.1f}%"
    if under_base(gate):
        base_em += ", **over this adapter's**: the base alone answers these rows better"
    verdict = "passed" if gate.get("passed") else "FAILED"
    full = entry.get("kind") == "full"
    what = "Full weights of the base model fine-tuned for" if full else "LoRA adapter implementing"
    return f"""---
base_model: {base.get("name", "base")}
library_name: {"transformers" if full else "peft"}
tags: [forethought, {"full-fine-tune" if full else "lora"}, {prim}]
---
# forethought `{prim}` adapter
{warn}
{what} the `{prim}` SLM primitive of the forethought tool-calling kernel
(spec hash `{entry["spec_hash"]}`; prompt, schema, contract and exact-match rule in `kernel/specs/`).

- Base model: `{base.get("name")}` (config sha256 `{base["config_sha256"][:16]}…`)
- Training data: {n_train} train / {n_val} validation examples from `forethought generate`
- Validation gate: exact match {100 * gate.get("exact_match", 0):.1f}% (base {base_em}),
  contract-valid {100 * gate.get("contract_valid_rate", 0):.1f}%, threshold {100 * gate.get("threshold", 0):.1f}% → **{verdict}**
- Adapter-applies check: max |Δlogit| vs. base on a probe input = {entry.get("probe_delta", float("nan")):.4g}

Load it through the bundle (`backend=hf backend.bundle=<bundle dir>`), which checks every hash before use.
"""


# Never shipped: pickles (training_args.bin is a pickled TrainingArguments; loading a pickle runs code).
NOT_SHIPPED = PICKLE_PATTERNS


def package(cfg: PackageConfig) -> Path:
    from forethought.bundle.models import adapter_kind
    from forethought.errors import check_output_dir
    from forethought.training.artifacts import adapter_dir, check_spec_hashes, load_adapters, read_base_ref, run_metrics
    from forethought.training.provenance import check_measured, read_gates

    out = Path(cfg.output_dir)
    recover_swap(out)  # a package killed between its two renames left the old bundle aside: put it back first
    check_swap_room(out)  # the swap's aside name taken by something of yours: refused now, not after the whole build
    # Refusals change nothing (docs/guarantees.md): the output is checked, not created, before the gates are read.
    check_output_dir(out.parent, "output_dir")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).is_file())):
        raise UserError(
            f"{out} exists and is not a bundle (no {MANIFEST}): refusing to replace it; choose another output_dir",
            "output_dir",
        )
    gates_path = Path(cfg.validate_dir) / "gates.json"
    gates_doc = read_gates(gates_path)
    gates = gates_doc["primitives"]
    from forethought.kernel.specs import set_stores, set_tool_rendering
    from forethought.training.data import dataset_stores

    # The prompts the gates were measured with are the bundle's: its spec hashes are under that rendering, and
    # retrieve from the data's demonstrations stores, the ones the gates' prompts retrieved from.
    set_tool_rendering(gates_doc.get("tool_rendering", "full"))
    stores = dataset_stores(cfg.dataset_dir)
    if {s.primitive: s.digest() for s in stores} != (gates_doc.get("demonstrations") or {}):
        raise UserError(
            f"the demonstrations stores of {cfg.dataset_dir} are not the ones the gates were measured with; "
            "re-run forethought validate on this data",
            str(gates_path),
        )
    set_stores(stores)
    missing = [primitive for primitive in PRIMITIVE_NAMES if primitive not in gates]
    if missing:
        raise UserError(f"gates.json has no result for {missing}", str(gates_path))
    stale = [
        primitive for primitive in PRIMITIVE_NAMES if gates[primitive].get("spec_hash") != SPECS[primitive].spec_hash
    ]
    if stale:
        raise UserError(
            f"gates for {stale} were measured with another version of their spec; re-run forethought validate",
            str(gates_path),
        )
    failed = [primitive for primitive in PRIMITIVE_NAMES if not gates[primitive]["passed"]]
    if failed and not cfg.allow_failed_gates:
        raise UserError(
            f"refusing to package: the gates of {failed} failed "
            + ", ".join(
                f"{primitive} {100 * gates[primitive]['exact_match']:.1f}% < {100 * gates[primitive]['threshold']:.1f}%"
                for primitive in failed
            )
            + "; retrain, or pass allow_failed_gates=true to write a bundle marked smoke",
            str(gates_path),
        )
    for primitive in PRIMITIVE_NAMES:
        metrics = run_metrics(cfg.train_dir, primitive)
        if not metrics or not metrics.get("completed"):
            raise UserError(f"the training run of {primitive!r} did not complete", str(Path(cfg.train_dir) / primitive))
    trained_hashes = check_spec_hashes(cfg.train_dir, list(PRIMITIVE_NAMES))
    check_measured(gates_doc, cfg.train_dir, list(PRIMITIVE_NAMES), str(gates_path))  # no stale numbers on new files
    ref = read_base_ref(cfg.train_dir)
    base_src = Path(ref["path"])
    model, tok = load_adapters(cfg.train_dir, list(PRIMITIVE_NAMES))
    deltas = adapter_applies(model, tok, list(PRIMITIVE_NAMES), cfg.min_probe_delta)
    size = sum(f.stat().st_size for f in base_src.rglob("*") if f.is_file())
    copy = cfg.copy_base == "always" or (cfg.copy_base == "auto" and size < 2 * 1024**3)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        if copy:
            shutil.copytree(base_src, tmp / "base")
            base_path, base_files = "base", hash_files(tmp / "base")
        else:
            # An external base is pinned by the digest of every file, checked at each load.
            base_path, base_files = str(base_src.resolve()), hash_files(base_src)
        shutil.copy(gates_path, tmp / "gates.json")  # the loader derives gates and smoke from this file
        shipped_stores = {}
        for store in stores:  # the kernel retrieves from them as generate did (kernel/specs/demonstrations.py)
            rel = f"demonstrations/{store.primitive}.jsonl"
            atomic_write_text(tmp / rel, store.to_text())
            shipped_stores[store.primitive] = {"path": rel, "sha256": sha256_file(tmp / rel)}
        tok_dir = tmp / "tokenizer"
        tok.save_pretrained(tok_dir)
        smoke = bool(failed)
        base_info = {
            "name": ref.get("name") or ref.get("profile") or base_src.name,
            "profile": ref.get("profile"),
            "path": base_path,
            "copied": copy,
            "config_sha256": config_sha256(base_src),
            "model_type": read_json_object(base_src / "config.json")["model_type"],
            "dtype": ref.get("dtype", "float32" if ref.get("profile") in BUILT_HERE else "bfloat16"),
            "attn_implementation": _trained_attn_implementation(cfg.train_dir),  # what the bundle loader uses
            "files": base_files,
        }
        stats_path = Path(cfg.dataset_dir) / "stats.json"
        stats = read_json_object(stats_path) if stats_path.is_file() else None
        prims: dict[str, Any] = {}
        for primitive in PRIMITIVE_NAMES:
            dst = tmp / "adapters" / primitive
            shutil.copytree(adapter_dir(cfg.train_dir, primitive), dst, ignore=shutil.ignore_patterns(*NOT_SHIPPED))
            gate = gates[primitive]
            entry = {
                "adapter_path": f"adapters/{primitive}",
                "kind": adapter_kind(dst),  # lora, or full weights of the base's architecture
                "spec_hash": SPECS[primitive].spec_hash,
                "trained_spec_hash": trained_hashes[primitive],
                "gate": {k: gate.get(k) for k in GATE_KEYS},
                "probe_delta": deltas[primitive],
            }
            atomic_write_text(dst / "README.md", model_card(primitive, entry, base_info, stats, smoke))
            entry["files"] = hash_files(dst)  # every file, the model card included
            prims[primitive] = entry
        manifest = {
            "format_version": FORMAT_VERSION if shipped_stores else PLAIN_FORMAT_VERSION,  # 5 says "it retrieves"
            "smoke": smoke,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "code_version": _version(),
            "base": base_info,
            "tokenizer": {"path": "tokenizer", "files": hash_files(tok_dir)},
            "gates": {"path": "gates.json", "sha256": sha256_file(tmp / "gates.json")},
            # Per primitive, the decoding its gate was measured with; the kernel's hf backend decodes the same way by default.
            "decoding": {primitive: gates[primitive]["decoding"] for primitive in PRIMITIVE_NAMES},
            # How the prompts show tool lists (kernel/specs/): the kernel renders as the adapters were trained.
            "tool_rendering": gates_doc.get("tool_rendering", "full"),
            "primitives": prims,
        }
        if shipped_stores:  # absent otherwise: a bundle without demonstrations is what earlier versions wrote
            manifest["demonstrations"] = shipped_stores
        atomic_write_json(tmp / MANIFEST, manifest)
        swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def cli(args: list[str]) -> int:
    from forethought.arguments import load, split_args

    cfg = load("package", split_args(args), PackageConfig)
    if cfg is None:
        return 0
    out = package(cfg)
    manifest = read_json_object(out / MANIFEST)
    print(f"wrote bundle {out} ({'SMOKE: failed gates allowed' if manifest['smoke'] else 'all gates passed'})")
    for primitive, entry in manifest["primitives"].items():
        print(
            f"  {primitive:<20} EM {100 * (entry['gate']['exact_match'] or 0):5.1f}%  gate {'pass' if entry['gate']['passed'] else 'FAIL'}  Δlogit {entry['probe_delta']:.3g}"
        )
    return 0
