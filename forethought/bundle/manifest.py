"""The bundle the kernel loads: one base model, five named adapters, a manifest that pins them.

Layout::

    bundle/
      manifest.json            base identity + config hash, tokenizer, per primitive:
                               adapter path, sha256 of every file, spec hash, gate metrics
      base/                    the base model (copied for small models; Gemma-3-12B is
                               referenced by its local path and pinned by its config hash)
      tokenizer/
      adapters/<primitive>/    adapter_model.safetensors, adapter_config.json, README.md (model card),
                               tokenizer copy; never a pickle (training_args.bin is not shipped). Built-here
                               profiles may ship full weights instead (kind "full": model.safetensors +
                               config.json of the base's architecture)

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
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forethought.bounded import loads_json, read_json_object
from forethought.errors import UserError

from . import models
from .models import WEIGHT_FILES, load_full_adapters, load_model, load_tokenizer

# 2: model cards hashed, unlisted files refused, no pickles; 3: gates.json bundled, base always hashed;
# 4: decoding per primitive (contract-compiled or free), tool_rendering; 5: demonstrations stores (written only by a
# bundle that carries one, so a reader that cannot retrieve says "upgrade" instead of misreading it; one without is 4)
FORMAT_VERSION = 5
PLAIN_FORMAT_VERSION = 4  # what a bundle without demonstrations stores is written as, so every reader since 4 reads it
READ_VERSIONS = (PLAIN_FORMAT_VERSION, FORMAT_VERSION)
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
GATE_KEYS = (
    "n",
    "exact_match",
    "base_exact_match",
    "exact_match_no_near_duplicate",
    "contract_valid_rate",
    "parse_rate",
    "threshold",
    "passed",
    "decoding",
)


class BundleError(UserError):
    pass


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def hash_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def check_files(root: Path, listed: dict[str, str], what: str) -> None:
    """Every listed file exists with its sha256, and no file is there that the manifest does not list."""
    for fname, digest in listed.items():
        path = root / fname
        if not path.is_file():
            raise BundleError(f"{what} file {fname} is missing", str(path))
        if sha256_file(path) != digest:
            raise BundleError(f"sha256 does not match the manifest: the {what} file was modified", str(path))
    if root.is_dir():
        extra = [
            str(f.relative_to(root))
            for f in sorted(root.rglob("*"))
            if f.is_file() and str(f.relative_to(root)) not in listed
        ]
        if extra:
            raise BundleError(
                f"{what} file {extra[0]} is not listed in the manifest (not written by forethought package)",
                str(root / extra[0]),
            )


def config_sha256(model_dir: str | Path) -> str:
    """Hash of the model's config.json with keys sorted (its identity, independent of formatting)."""
    cfg = read_json_object(Path(model_dir) / "config.json")
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


Digests = dict[str, Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]]


class GateEntry(_M):
    n: int
    exact_match: float
    base_exact_match: float | None
    exact_match_no_near_duplicate: float | None
    contract_valid_rate: float
    parse_rate: float
    threshold: float
    passed: bool
    decoding: Literal["free", "constrained"]


class PrimitiveEntry(_M):
    adapter_path: str
    kind: Literal["lora", "full"]  # a LoRA adapter, or full weights of the base's architecture (built-here profiles)
    spec_hash: str
    trained_spec_hash: str | None
    gate: GateEntry
    probe_delta: float
    files: Digests


class BaseEntry(_M):
    name: str
    profile: str | None
    path: str
    copied: bool
    config_sha256: str
    model_type: str
    dtype: str
    attn_implementation: str
    files: Digests


class StoreEntry(_M):
    """A demonstrations store (kernel/specs/demonstrations.py) the prompts retrieve from."""

    path: str
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class TokenizerEntry(_M):
    path: str
    files: Digests


class GatesEntry(_M):
    path: str
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Manifest(_M):
    """manifest.json, one schema: a missing, extra or mistyped field is a located error."""

    format_version: int
    smoke: bool
    created: str
    code_version: str
    base: BaseEntry
    tokenizer: TokenizerEntry
    gates: GatesEntry
    decoding: dict[
        str, Literal["free", "constrained"]
    ]  # per primitive, as its gate was measured (checked against gates.json)
    tool_rendering: Literal[
        "full", "compact", "focused", "valued"
    ]  # how the prompts show tool lists (kernel/specs/ TOOL_RENDERINGS)
    primitives: dict[str, PrimitiveEntry]
    # per retrieving primitive, the store its prompts were trained and gated with (absent: no demonstrations)
    demonstrations: dict[str, StoreEntry] = Field(default_factory=dict)


def _parse_manifest(mpath: Path) -> dict[str, Any]:
    if mpath.stat().st_size > MAX_MANIFEST_BYTES:
        raise BundleError(f"manifest is larger than {MAX_MANIFEST_BYTES >> 20} MiB", str(mpath))
    try:
        manifest = loads_json(mpath.read_bytes(), str(mpath), max_bytes=MAX_MANIFEST_BYTES)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"manifest is not valid JSON: {exc}", str(mpath)) from None
    if not isinstance(manifest, dict):
        raise BundleError("manifest is not a JSON object", str(mpath))
    version = manifest.get("format_version")
    if version not in READ_VERSIONS or isinstance(version, bool):
        newer = isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION
        raise BundleError(
            f"format_version {version!r} is not one this forethought reads ({', '.join(map(str, READ_VERSIONS))}): "
            + (
                "upgrade forethought" if newer else "repackage the adapters with this forethought (forethought package)"
            ),
            str(mpath),
        )
    try:
        Manifest.model_validate(manifest)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(x) for x in error["loc"])
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise BundleError(f"manifest field {field!r}: {error['msg']}{more}", str(mpath)) from None
    return manifest


def _inside(root: Path, rel: str, where: str) -> Path:
    """``root/rel``, refused unless it stays inside the bundle (no absolute path, no .., no link out)."""
    resolved = (root / rel).resolve()
    if Path(rel).is_absolute() or not resolved.is_relative_to(root.resolve()):
        raise BundleError(f"path {rel!r} points outside the bundle", where)
    return resolved


def check_safetensors(path: Path) -> None:
    """A .safetensors file of the bundle that is one (models.check_safetensors), refused as a :class:`BundleError`."""
    try:
        models.check_safetensors(path)
    except UserError as exc:
        raise BundleError(exc.message, exc.where) from None


def _check_gates(root: Path, manifest: dict[str, Any], mpath: Path) -> None:
    """Gates and smoke are derived from the bundled gates.json, whose digest the manifest records."""
    gates_ref = manifest["gates"]
    gpath = _inside(root, gates_ref["path"], f"{mpath}: gates.path")
    if not gpath.is_file():
        raise BundleError("gates file is missing", str(gpath))
    if sha256_file(gpath) != gates_ref["sha256"]:
        raise BundleError("sha256 does not match the manifest: the gates file was modified", str(gpath))
    try:
        doc = loads_json(gpath.read_bytes(), str(gpath), max_bytes=MAX_MANIFEST_BYTES)
        measured = doc["primitives"], doc["measured"]["adapters"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise BundleError(f"not a gates file: {exc!r}", str(gpath)) from None
    results, digests = measured
    failed = []
    for name, entry in manifest["primitives"].items():
        where = f"{mpath}: primitives.{name}.gate"
        result = results.get(name) if isinstance(results, dict) else None
        if not isinstance(result, dict) or {k: result.get(k) for k in GATE_KEYS} != entry["gate"]:
            raise BundleError(
                f"does not match {gates_ref['path']} (the gates that were measured): the manifest was edited", where
            )
        if not result.get("passed"):
            failed.append(name)
        want = digests.get(name) if isinstance(digests, dict) else None
        have = {f: entry["files"].get(f) for f in (want or {})}
        if not want or have != want:
            raise BundleError(f"{gates_ref['path']} was measured on other adapter files than the bundled ones", where)
    for name in manifest["primitives"]:
        if manifest["decoding"].get(name) != results[name].get("decoding"):
            raise BundleError(
                f"decoding does not match {gates_ref['path']} (the decoding the gate was measured with): the manifest was edited",
                f"{mpath}: decoding.{name}",
            )
    if manifest["tool_rendering"] != doc.get("tool_rendering", "full"):
        raise BundleError(
            f"tool_rendering does not match {gates_ref['path']} (the prompts the gates were measured with): the manifest was edited",
            f"{mpath}: tool_rendering",
        )
    stores = {name: entry["sha256"] for name, entry in manifest.get("demonstrations", {}).items()}
    if stores != (doc.get("demonstrations") or {}):
        raise BundleError(
            f"demonstrations do not match {gates_ref['path']} (the stores the gates' prompts retrieved from): the "
            "manifest was edited",
            f"{mpath}: demonstrations",
        )
    if manifest["smoke"] != bool(failed):
        raise BundleError(
            f"smoke is {str(manifest['smoke']).lower()} but {gates_ref['path']} records "
            + (f"failed gates for {failed}" if failed else "no failed gate")
            + ": the manifest was edited",
            f"{mpath}: smoke",
        )


def _check_base(root: Path, manifest: dict[str, Any], mpath: Path) -> Path:
    """The base weights are always checked by digest: inside the bundle, or external and pinned."""
    base_entry = manifest["base"]
    where = f"{mpath}: base"
    external = Path(base_entry["path"]).is_absolute()
    if external == base_entry["copied"]:
        raise BundleError(
            f"copied is {str(base_entry['copied']).lower()} but path {base_entry['path']!r} is "
            + ("outside" if external else "inside")
            + " the bundle: the manifest was edited",
            where,
        )
    base = Path(base_entry["path"]) if external else _inside(root, base_entry["path"], f"{where}.path")
    if not (base / "config.json").is_file():
        raise BundleError("base model not found (config.json missing)", str(base))
    if not base_entry["files"] or "config.json" not in base_entry["files"]:
        raise BundleError("lists no base-model files: the base weights would go unchecked", f"{where}.files")
    if config_sha256(base) != base_entry["config_sha256"]:
        raise BundleError(
            "base model config hash does not match the manifest: a different base model", str(base / "config.json")
        )
    check_files(base, base_entry["files"], "base model")
    try:  # an external base lies outside the bundle's own safetensors check (load_bundle): no pickle, wherever it is
        models.check_model_files(base)
    except UserError as exc:
        raise BundleError(exc.message, exc.where) from None
    return base


def _previous(out: Path) -> Path:
    """Where a bundle being replaced waits while its successor is renamed in (the swap's journal)."""
    return out.with_name(f".{out.name}.old")


def check_swap_room(out: str | Path) -> None:
    """Refuse, before any work, to replace the bundle at ``out`` when its swap's aside name (``.<name>.old``) is taken
    by something that is not a bundle set aside (a file, a folder of yours): the first rename would fail only after
    the whole package was built. Run after :func:`recover_swap`."""
    out = Path(out)
    old = _previous(out)
    # An empty folder holds nothing to lose (it is what a crash between the manifest's removal and the folder's leaves,
    # see _remove_bundle): the rename replaces it.
    empty = old.is_dir() and not old.is_symlink() and not any(old.iterdir())
    if (out / MANIFEST).is_file() and (old.exists() or old.is_symlink()) and not empty:
        raise UserError(
            f"{old} is in the way: replacing the bundle at {out} first moves it there, and that path holds something "
            "that is not a bundle set aside by package; move it, or choose another output_dir",
            "output_dir",
        )


def _remove_bundle(path: Path) -> None:
    """Delete a bundle set aside with its manifest last: a crash part-way leaves a folder that :func:`recover_swap`
    still recognises as the swap's and finishes removing, never a manifest-less remnant that blocks the next swap."""
    for child in path.iterdir():
        if child.name == MANIFEST:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    (path / MANIFEST).unlink(missing_ok=True)
    path.rmdir()


def swap_in(staged: Path, out: Path) -> None:
    """Put the complete bundle ``staged`` at ``out``, replacing any bundle there. Replacing a folder by rename takes two
    renames (``out`` aside, ``staged`` in); a crash between them leaves the old bundle aside, where
    :func:`recover_swap` (run when package starts and when a bundle is loaded) puts it back; a crash while the old
    bundle is deleted leaves it aside with its manifest, and recover_swap finishes the deletion."""
    old = _previous(out)
    recover_swap(out)
    check_swap_room(out)
    if out.exists():
        os.replace(out, old)
        os.replace(staged, out)
        _remove_bundle(old)
    else:
        os.replace(staged, out)


def recover_swap(out: str | Path) -> str | None:
    """Finish a swap that a crash interrupted, as a journal is replayed: the old bundle set aside and no bundle at ``out``
    (killed between the two renames) is put back; set aside with the new one in place (killed before its removal), it
    is removed. Returns what was done, or None when there was nothing to do."""
    out = Path(out)
    old = _previous(out)
    # Only a bundle set aside is the journal: a folder of the user's that happens to have the name is left alone.
    if not (old.is_dir() and (old / MANIFEST).is_file()):
        return None
    if out.exists():
        if not (out / MANIFEST).is_file():
            return None  # not the swap's new bundle either: nothing of ours to finish
        _remove_bundle(old)
        return "removed the replaced bundle left behind by an interrupted package"
    os.replace(old, out)
    print(f"note: {out}: restored the bundle that an interrupted `forethought package` had set aside", file=sys.stderr)
    return "restored"


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
        base_path = Path(self.manifest["base"]["path"])
        return base_path if base_path.is_absolute() else self.path / base_path

    @property
    def base_id(self) -> str:
        base_entry = self.manifest["base"]
        return f"{base_entry.get('name', 'base')}@{base_entry['config_sha256'][:12]}"

    def adapter_path(self, name: str) -> Path:
        return self.path / self.primitives[name]["adapter_path"]

    def adapter_digest(self, name: str) -> str | None:
        entry = self.primitives.get(name)
        return None if entry is None else entry["files"].get(WEIGHT_FILES[entry["kind"]][0])

    def load_model(self, device: str = "cpu") -> tuple[Any, Any]:
        """Base + every adapter (named after its primitive) and the tokenizer."""
        # torch and peft load lazily: importing the kernel's backends (every CLI command does) stays fast.
        import torch
        from peft import PeftModel

        dtype = (
            torch.bfloat16 if (device != "cpu" or self.manifest["base"].get("dtype") == "bfloat16") else torch.float32
        )
        model = load_model(
            self.base_dir,
            dtype=dtype,
            attn_implementation=self.manifest["base"].get("attn_implementation", "sdpa"),
            device=device,
        )
        model.eval()
        tok = load_tokenizer(self.path / self.manifest["tokenizer"]["path"])
        names = list(self.primitives)
        if all(p["kind"] == "full" for p in self.primitives.values()):
            return load_full_adapters(
                model,
                self.base_dir,
                {n: self.adapter_path(n) for n in names},
                dtype=dtype,
                attn_implementation=self.manifest["base"].get("attn_implementation", "sdpa"),
                device=device,
            ), tok
        peft = PeftModel.from_pretrained(
            model, str(self.adapter_path(names[0])), adapter_name=names[0], is_trainable=False
        )
        for n in names[1:]:
            peft.load_adapter(str(self.adapter_path(n)), adapter_name=n, is_trainable=False)
        peft.eval()
        return peft, tok


def bundle_tool_rendering(path: str | Path) -> str:
    """The tool rendering a bundle's adapters were trained with (its manifest's ``tool_rendering``), read after the
    manifest's own checks: the caller renders with it before it compares spec hashes (:func:`load_bundle`)."""
    recover_swap(path)
    mpath = Path(path) / MANIFEST
    if not mpath.is_file():
        raise BundleError("not a bundle: manifest.json is missing", str(path))
    return _parse_manifest(mpath)["tool_rendering"]


def bundle_spec_hashes(path: str | Path) -> dict[str, str]:
    """Per primitive, the spec hash its adapter was trained under (the manifest's), for a caller that serves the
    adapters elsewhere (the openai backend) and so never loads them through :func:`load_bundle`."""
    manifest = _parse_manifest(Path(path) / MANIFEST)
    return {
        name: entry["spec_hash"]
        for name, entry in manifest.get("primitives", {}).items()
        if isinstance(entry, dict) and isinstance(entry.get("spec_hash"), str)
    }


def bundle_store_files(path: str | Path) -> dict[str, Path]:
    """Per primitive, the demonstrations store file a bundle carries (none for a bundle without), each checked
    against the manifest's digest; kernel/specs/demonstrations.py ``bundle_stores`` reads them."""
    root = Path(path)
    mpath = root / MANIFEST
    manifest = _parse_manifest(mpath)
    files = {}
    for name, entry in sorted(manifest.get("demonstrations", {}).items()):
        file = _inside(root, entry["path"], f"{mpath}: demonstrations.{name}")
        if not file.is_file():
            raise BundleError("demonstrations store is missing", str(file))
        if sha256_file(file) != entry["sha256"]:
            raise BundleError("sha256 does not match the manifest: the demonstrations store was modified", str(file))
        files[name] = file
    return files


def load_bundle(
    path: str | Path,
    spec_hashes: Mapping[str, str],
    *,
    allow_smoke: bool = False,
    require: tuple[str, ...] | None = None,
) -> Bundle:
    """Open and check a bundle; every refusal names the file and what is wrong.

    ``spec_hashes`` maps each primitive to the code's current spec hash
    (``forethought.kernel.specs.spec_hashes()``): an adapter trained under another one is refused.
    ``require`` (default: every primitive of ``spec_hashes``) names the primitives the bundle must hold.
    """
    root = Path(path)
    recover_swap(root)
    mpath = root / MANIFEST
    if not mpath.is_file():
        raise BundleError("not a bundle: manifest.json is missing", str(root))
    manifest = _parse_manifest(mpath)
    bundle = Bundle(root, manifest)
    if bundle.smoke and not allow_smoke:
        failed = [n for n, p in manifest["primitives"].items() if not p.get("gate", {}).get("passed")]
        raise BundleError(
            f"bundle is marked smoke: the gates of {failed} failed; pass allow_smoke=true (backend.allow_smoke=true) "
            "to load it anyway for smoke tests",
            str(mpath),
        )
    wanted = require or tuple(spec_hashes)
    missing = [n for n in wanted if n not in manifest["primitives"]]
    if missing:
        raise BundleError(f"primitives {missing} are missing from the bundle", str(mpath))
    for name, entry in manifest["primitives"].items():
        where = f"{mpath}: primitives.{name}"
        if name in spec_hashes and entry.get("spec_hash") != spec_hashes[name]:
            if name in manifest.get("demonstrations", {}):  # most likely: hashed without the store it was trained with
                raise BundleError(
                    f"spec hash {entry.get('spec_hash')} differs from the code's {spec_hashes[name]}: this bundle's "
                    f"{name} prompts retrieve demonstrations ({manifest['demonstrations'][name]['path']}); set its "
                    "stores before computing the spec hashes (forethought.kernel.specs.set_stores(bundle_stores(path)), "
                    "as the hf backend and forethought export do)",
                    where,
                )
            raise BundleError(
                f"spec hash {entry.get('spec_hash')} differs from the code's {spec_hashes[name]}: the primitive's prompt, "
                "schema or contract changed since this adapter was trained; regenerate the data, retrain and repackage "
                "(`forethought generate`, `forethought train`, `forethought validate`, `forethought package`)",
                where,
            )
        for required in (*WEIGHT_FILES[entry["kind"]], "README.md"):
            if required not in entry.get("files", {}):
                raise BundleError(f"no {required} listed (a {entry['kind']} adapter)", where)
    if len({p["kind"] for p in manifest["primitives"].values()}) > 1:
        raise BundleError("the primitives mix LoRA and full weights: one bundle holds one kind", f"{mpath}: primitives")
    _check_gates(root, manifest, mpath)
    for name, entry in manifest["primitives"].items():
        adir = _inside(root, entry["adapter_path"], f"{mpath}: primitives.{name}.adapter_path")
        check_files(adir, entry["files"], "adapter")
    tdir = _inside(root, manifest["tokenizer"]["path"], f"{mpath}: tokenizer.path")
    check_files(tdir, manifest["tokenizer"]["files"], "tokenizer")
    _check_base(root, manifest, mpath)
    for weights_file in sorted(root.rglob("*.safetensors")):
        check_safetensors(weights_file)
    return bundle
