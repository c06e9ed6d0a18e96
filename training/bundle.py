"""The bundle the kernel loads: one base model, five named adapters, a manifest that pins them.

Layout::

    bundle/
      manifest.json            base identity + config hash, tokenizer, per primitive:
                               adapter path, sha256 of every file, spec hash, gate metrics
      base/                    the base model (copied for small models; Gemma-3-12B is
                               referenced by its local path and pinned by its config hash)
      tokenizer/
      adapters/<primitive>/    adapter_model.safetensors, adapter_config.json, README.md (model card),
                               tokenizer copy; never a pickle (training_args.bin is not shipped)

Every file under ``adapters/``, ``tokenizer/`` and a copied ``base/`` is listed
with its sha256 in the manifest, the model cards included. Loading refuses a
bundle when any file's hash does not match, a file is missing or not listed,
a primitive's spec hash differs from the code's (prompts or contracts changed
since training), or a primitive is missing; a bundle written from failed gates
(``smoke``) is refused unless explicitly allowed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forethought.errors import UserError

FORMAT_VERSION = 2  # 2: model cards hashed, unlisted files refused, no pickles
MANIFEST = "manifest.json"


class BundleError(UserError):
    pass


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def hash_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def check_files(root: Path, listed: dict[str, str], what: str) -> None:
    """Every listed file exists with its sha256, and no file is there that the manifest does not list."""
    for fname, digest in listed.items():
        f = root / fname
        if not f.is_file():
            raise BundleError(f"{what} file {fname} is missing", str(f))
        if sha256_file(f) != digest:
            raise BundleError(f"sha256 does not match the manifest: the {what} file was modified", str(f))
    if root.is_dir():
        extra = [str(f.relative_to(root)) for f in sorted(root.rglob("*")) if f.is_file() and str(f.relative_to(root)) not in listed]
        if extra:
            raise BundleError(f"{what} file {extra[0]} is not listed in the manifest (not written by forethought package)", str(root / extra[0]))


def config_sha256(model_dir: str | Path) -> str:
    """Hash of the model's config.json with keys sorted (its identity, independent of formatting)."""
    cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()


@dataclass
class Bundle:
    path: Path
    manifest: dict[str, Any]

    @property
    def smoke(self) -> bool:
        return bool(self.manifest.get("smoke"))

    @property
    def primitives(self) -> dict[str, Any]:
        return self.manifest["primitives"]

    @property
    def base_dir(self) -> Path:
        p = Path(self.manifest["base"]["path"])
        return p if p.is_absolute() else self.path / p

    @property
    def base_id(self) -> str:
        b = self.manifest["base"]
        return f"{b.get('name', 'base')}@{b['config_sha256'][:12]}"

    def adapter_path(self, name: str) -> Path:
        return self.path / self.primitives[name]["adapter_path"]

    def adapter_digest(self, name: str) -> str | None:
        p = self.primitives.get(name)
        return None if p is None else p["files"].get("adapter_model.safetensors")

    def load_model(self, device: str = "cpu") -> tuple[Any, Any]:
        """Base + every adapter (named after its primitive) and the tokenizer."""
        import torch
        from peft import PeftModel

        from training.models import load_model, load_tokenizer

        dtype = torch.bfloat16 if (device != "cpu" or self.manifest["base"].get("dtype") == "bfloat16") else torch.float32
        model = load_model(self.base_dir, dtype=dtype, attn_implementation=self.manifest["base"].get("attn_implementation", "sdpa"), device=device)
        model.eval()
        tok = load_tokenizer(self.path / self.manifest["tokenizer"]["path"])
        names = list(self.primitives)
        peft = PeftModel.from_pretrained(model, str(self.adapter_path(names[0])), adapter_name=names[0], is_trainable=False)
        for n in names[1:]:
            peft.load_adapter(str(self.adapter_path(n)), adapter_name=n, is_trainable=False)
        peft.eval()
        return peft, tok


def load_bundle(path: str | Path, *, allow_smoke: bool = False, require: tuple[str, ...] | None = None) -> Bundle:
    """Open and check a bundle; every refusal names the file and what is wrong."""
    from kernel.specs import PRIMITIVE_NAMES, SPECS

    root = Path(path)
    mpath = root / MANIFEST
    if not mpath.is_file():
        raise BundleError("not a bundle: manifest.json is missing", str(root))
    try:
        m = json.loads(mpath.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BundleError(f"manifest is not valid JSON: {exc.msg} at line {exc.lineno}", str(mpath)) from None
    for key in ("format_version", "base", "tokenizer", "primitives"):
        if key not in m:
            raise BundleError(f"manifest field {key!r} is missing", str(mpath))
    if m["format_version"] != FORMAT_VERSION:
        raise BundleError(f"format_version {m['format_version']} is not supported (expected {FORMAT_VERSION})", str(mpath))
    b = Bundle(root, m)
    if b.smoke and not allow_smoke:
        failed = [n for n, p in m["primitives"].items() if not p.get("gate", {}).get("passed")]
        raise BundleError(
            f"bundle is marked smoke: the gates of {failed} failed; pass allow_smoke=true (backend.allow_smoke=true) "
            "to load it anyway for smoke tests",
            str(mpath),
        )
    wanted = require or PRIMITIVE_NAMES
    missing = [n for n in wanted if n not in m["primitives"]]
    if missing:
        raise BundleError(f"primitives {missing} are missing from the bundle", str(mpath))
    for name, p in m["primitives"].items():
        where = f"{mpath}: primitives.{name}"
        if name in SPECS and p.get("spec_hash") != SPECS[name].spec_hash:
            raise BundleError(
                f"spec hash {p.get('spec_hash')} differs from the code's {SPECS[name].spec_hash}: the primitive's prompt, "
                "schema or contract changed since this adapter was trained; retrain and repackage",
                where,
            )
        for required in ("adapter_model.safetensors", "README.md"):
            if required not in p.get("files", {}):
                raise BundleError(f"no {required} listed", where)
        check_files(root / p["adapter_path"], p["files"], "adapter")
    check_files(root / m["tokenizer"]["path"], m["tokenizer"].get("files", {}), "tokenizer")
    base = b.base_dir
    if not (base / "config.json").is_file():
        raise BundleError("base model not found (config.json missing)", str(base))
    if config_sha256(base) != m["base"]["config_sha256"]:
        raise BundleError("base model config hash does not match the manifest: a different base model", str(base / "config.json"))
    if m["base"].get("copied"):
        check_files(base, m["base"].get("files", {}), "base model")
    return b
