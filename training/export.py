"""``forethought export``: a bundle's models out, the Hugging Face way (hub-layout folder with model cards).

``forethought export bundle=runs/pipeline/bundle output_dir=runs/pipeline/export``
    A folder laid out as a hub model repository: ``README.md`` (the card of the whole set) and one subfolder per
    primitive holding its adapter (``adapter_config.json``, ``adapter_model.safetensors``), the tokenizer with its
    chat template, and a model card (``README.md``, YAML front matter: ``base_model``, ``library_name``, tags).
    Upload it with ``hf upload <repo> <output_dir>``; a user loads one primitive with
    ``PeftModel.from_pretrained(base, "<repo>", subfolder="<primitive>")``. Nothing here touches the network.
``forethought export --merge`` (or ``merge=true``)
    Each adapter merged into a copy of the base (peft ``merge_and_unload``) and saved whole per primitive
    (``config.json``, ``model.safetensors``, tokenizer, card): for servers without multi-LoRA, one model each.

The bundle is opened with every check the kernel's loader makes (hashes, spec hashes, smoke), so what is exported
is what was validated. The output is written into a temporary folder beside ``output_dir`` and renamed into place;
an existing ``output_dir`` is replaced only when it is an earlier export (``export.json``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from forethought.bounded import read_json_object
from forethought.errors import UserError
from forethought.primitives.io import atomic_write_json

MARKER = "export.json"
STORE_FILE = "demonstrations.jsonl"  # a primitive's demonstrations store, beside its weights
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


class ExportConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    bundle: str = "runs/pipeline/bundle"
    output_dir: str = "runs/pipeline/export"
    merge: bool = False  # true: one merged model per primitive (base + adapter), for servers without multi-LoRA
    allow_smoke: bool = False  # export a bundle whose gates failed (its cards say so)
    repo_id: str | None = None  # the hub repository the cards name in their loading example (informational)


def _front_matter(card: str) -> tuple[dict[str, str], str]:
    """The bundle card's YAML front matter (flat ``key: value`` lines) and its body."""
    if not card.startswith("---\n"):
        return {}, card
    head, _, body = card[4:].partition("\n---\n")
    meta = {}
    for line in head.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip()
    return meta, body


def card(primitive: str, bundle_card: str, *, merged: bool, base_name: str, repo_id: str) -> str:
    meta, body = _front_matter(bundle_card)
    tags = meta.get("tags", f"[forethought, lora, {primitive}]")
    if merged:
        tags = tags.replace("lora", "merged-lora")
        load = (
            "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
            f'model = AutoModelForCausalLM.from_pretrained("{repo_id}", subfolder="{primitive}")\n'
            f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}", subfolder="{primitive}")\n```\n'
        )
        head = (
            f"---\nbase_model: {base_name}\nbase_model_relation: merge\nlibrary_name: transformers\n"
            f"pipeline_tag: text-generation\ntags: {tags}\n---\n"
        )
        what = "The adapter below merged into its base (peft `merge_and_unload`): a whole model, no adapter needed."
    else:
        load = (
            "```python\nfrom peft import PeftModel\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
            f'base = AutoModelForCausalLM.from_pretrained("{base_name}")\n'
            f'model = PeftModel.from_pretrained(base, "{repo_id}", subfolder="{primitive}")\n'
            f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}", subfolder="{primitive}")\n```\n'
        )
        head = (
            f"---\nbase_model: {base_name}\nbase_model_relation: adapter\n"
            f"library_name: {meta.get('library_name', 'peft')}\npipeline_tag: text-generation\ntags: {tags}\n---\n"
        )
        what = "Exported from a forethought bundle by `forethought export`."
    return f"{head}{body.rstrip()}\n\n## Loading\n\n{what}\n\n{load}"


def _check_output(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise UserError(
            f"{out} exists and is not an earlier export (no {MARKER}): refusing to replace it; choose another output_dir",
            "output_dir",
        )


def export(cfg: ExportConfig) -> Path:
    from forethought.bundle.manifest import bundle_store_files, bundle_tool_rendering, load_bundle, sha256_file
    from forethought.kernel.specs import bundle_stores, set_stores, set_tool_rendering, spec_hashes

    out = Path(cfg.output_dir)
    _check_output(out)
    rendering = bundle_tool_rendering(cfg.bundle)
    set_tool_rendering(rendering)  # spec hashes as the adapters were trained
    set_stores(bundle_stores(cfg.bundle))
    store_files = bundle_store_files(cfg.bundle)
    bundle = load_bundle(cfg.bundle, spec_hashes(), allow_smoke=cfg.allow_smoke)
    manifest = bundle.manifest
    base = manifest["base"]
    base_name = str(base.get("name") or "base")
    repo_id = cfg.repo_id or f"<you>/{out.name}"
    kinds = {p["kind"] for p in bundle.primitives.values()}
    if cfg.merge and kinds != {"lora"}:
        raise UserError(
            "merge=true merges LoRA adapters into the base; this bundle ships full weights per primitive already "
            "(export it without merge)",
            f"{Path(cfg.bundle) / 'manifest.json'}: primitives",
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tok_dir = bundle.path / manifest["tokenizer"]["path"]
        for name in bundle.primitives:
            dest = tmp / name
            src = bundle.adapter_path(name)
            if cfg.merge:
                _merge_one(bundle, name, dest)
            else:
                dest.mkdir()
                for source_file in sorted(src.iterdir()):
                    if (
                        source_file.is_file()
                        and source_file.name != "README.md"
                        and not source_file.name.startswith("tokenizer")
                    ):
                        shutil.copy2(source_file, dest / source_file.name)
            for tokenizer_file in sorted(tok_dir.iterdir()):
                if tokenizer_file.is_file():
                    shutil.copy2(tokenizer_file, dest / tokenizer_file.name)
            if name in store_files:  # the prompts it was trained on show these; a server must be given them too
                shutil.copy2(store_files[name], dest / STORE_FILE)
            bundle_card = (src / "README.md").read_text(encoding="utf-8")
            (dest / "README.md").write_text(
                card(name, bundle_card, merged=cfg.merge, base_name=base_name, repo_id=repo_id)
                + _serving_note(name, rendering, name in store_files),
                encoding="utf-8",
            )
        (tmp / "README.md").write_text(_collection_card(bundle, cfg, base_name, repo_id), encoding="utf-8")
        atomic_write_json(
            tmp / MARKER,
            {
                "bundle": str(Path(cfg.bundle).resolve()),
                "merged": cfg.merge,
                "smoke": bool(manifest.get("smoke")),
                "base": {k: base.get(k) for k in ("name", "model_type", "config_sha256")},
                "primitives": {n: {"spec_hash": p.get("spec_hash")} for n, p in bundle.primitives.items()},
                "tool_rendering": rendering,
                "demonstrations": {
                    n: {"path": f"{n}/{STORE_FILE}", "sha256": sha256_file(f)} for n, f in store_files.items()
                },
            },
        )
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _serving_note(name: str, rendering: str, demonstrations: bool) -> str:
    """How the kernel must render this primitive's prompts for it (the openai backend's settings)."""
    note = f"\n## Serving it to the forethought kernel\n\nIts prompts were rendered with `backend.tool_rendering={rendering}`"
    if demonstrations:
        note += (
            f" and retrieved demonstrations from `{STORE_FILE}` (in this folder): "
            f"`backend.demonstrations={{{name}: <this folder>/{STORE_FILE}}}`"
        )
    return note + ".\n"


def _merge_one(bundle: Any, name: str, dest: Path) -> None:
    """A fresh copy of the base with this primitive's adapter merged in, saved whole (safetensors)."""
    import torch
    from peft import PeftModel

    from forethought.bundle.models import load_model

    base_info = bundle.manifest["base"]
    dtype = torch.bfloat16 if base_info.get("dtype") == "bfloat16" else torch.float32
    base = load_model(bundle.base_dir, dtype=dtype, attn_implementation=base_info.get("attn_implementation", "sdpa"))
    merged = PeftModel.from_pretrained(base, str(bundle.adapter_path(name)), is_trainable=False).merge_and_unload()
    merged.save_pretrained(dest)


def _collection_card(bundle: Any, cfg: ExportConfig, base_name: str, repo_id: str) -> str:
    manifest = bundle.manifest
    rows = "\n".join(
        f"| [`{n}`]({n}/) | {100 * (p.get('gate', {}).get('exact_match') or 0):.1f}% | "
        f"{'pass' if p.get('gate', {}).get('passed') else 'FAIL'} | `{p.get('spec_hash')}` |"
        for n, p in bundle.primitives.items()
    )
    kind = "merged models (base + adapter, one per primitive)" if cfg.merge else "LoRA adapters, one per primitive"
    smoke = (
        "\n> **SMOKE EXPORT — NOT FOR USE.** Some validation gates failed (exported with `allow_smoke=true`).\n"
        if manifest.get("smoke")
        else ""
    )
    return (
        f"---\nbase_model: {base_name}\nlibrary_name: {'transformers' if cfg.merge else 'peft'}\n"
        "pipeline_tag: text-generation\ntags: [forethought, tool-calling]\n---\n"
        f"# forethought primitives on `{base_name}`\n{smoke}\n"
        f"The SLM primitives of a forethought bundle as {kind}. Each subfolder is one model with its own card; "
        f'load one with `subfolder="<primitive>"` from `{repo_id}`. The kernel itself loads the bundle '
        "(`backend=hf backend.bundle=<dir>`), which checks every file's hash.\n\n"
        "| primitive | exact match (gate) | gate | spec hash |\n|---|---:|:---:|---|\n"
        f"{rows}\n"
    )


def cli(args: list[str]) -> int:
    from forethought.arguments import load, split_args

    parsed = split_args(args)
    if "--merge" in parsed.flags:
        parsed.flags.discard("--merge")
        parsed.overrides.append("merge=true")
    cfg = load("export", parsed, ExportConfig)
    if cfg is None:
        return 0
    out = export(cfg)
    meta = read_json_object(out / MARKER)
    what = "merged models" if meta["merged"] else "adapters"
    print(f"wrote {out}: {what} of {', '.join(meta['primitives'])} in hub layout, with model cards")
    print(f"  upload (not done here; nothing touches the network): hf upload <you>/<repo> {out}")
    print(json.dumps({"smoke": meta["smoke"]}))
    return 0
