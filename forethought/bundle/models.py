"""Loading a saved base model and tokenizer, and checking where an adapter's weights lie.

Used by the kernel's hf backend (through :mod:`forethought.bundle.manifest`) and by training
(``train``, ``validate``, ``package``), so a model is loaded one way whether it is trained or served.

A base is loaded with ``AutoModelForCausalLM``: a Gemma-3-12B checkpoint is multimodal
(``model_type: gemma3``) and maps to ``Gemma3ForConditionalGeneration``; ``Gemma3ForCausalLM.from_pretrained``
on it raises no error but initialises every weight at random, so a load that leaves any weight
missing is refused. Adapter keys must lie in the language model's decoder layers
(``model.layers.N...`` for a text model, ``model.language_model.layers.N...`` for the multimodal one),
never in the vision tower.

torch, transformers, peft, safetensors and trl are imported inside the functions that need them:
the kernel's backends import this module, and every CLI command imports those, so start-up stays fast.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.bounded import read_json_object
from forethought.errors import UserError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# Sub-modules of a multimodal checkpoint that must never carry an adapter.
NON_TEXT_PARTS = ("vision_tower", "multi_modal_projector", "vision_model", "audio_tower")


class AdapterTargetError(RuntimeError):
    """LoRA ended up outside the language model (or missed part of it): refuse to train or ship it."""


def gemma3_chat_template() -> str:
    """trl's shipped Gemma 3 chat template (the one Gemma 3 checkpoints carry)."""
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "gemma3.jinja").read_text(encoding="utf-8")


# Files that are pickles by their name: loading one runs code. forethought reads weights from safetensors only (a bundle
# never ships one; package leaves the trainer's training_args.bin behind).
PICKLE_PATTERNS = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle")


def check_safetensors(path: Path) -> None:
    """A .safetensors file starts with an 8-byte header length and a JSON header: a pickle does not."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        ok = 2 <= n <= min(size - 8, 100 * 1024 * 1024)
        if ok:
            try:
                ok = isinstance(json.loads(handle.read(n)), dict)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                ok = False
    if not ok:
        raise UserError("not a safetensors file (no valid header; a pickle renamed?)", str(path))


def check_model_files(folder: str | Path) -> None:
    """Refuse, before transformers opens anything in it, a model folder that holds a pickle or a .safetensors file that
    is not one: a base outside a bundle is loaded from wherever it lies, and torch would unpickle a .bin."""
    import fnmatch

    files = sorted(f for f in Path(folder).rglob("*") if f.is_file())
    for path in files:
        if any(fnmatch.fnmatch(path.name, p) for p in PICKLE_PATTERNS):
            raise UserError(
                "a pickle among the model's files (loading one runs code): forethought loads weights from "
                "safetensors only; convert the model (save_pretrained(..., safe_serialization=True)) and remove it",
                str(path),
            )
    for path in files:
        if path.suffix == ".safetensors":
            check_safetensors(path)


def quantization_config(quantization: str) -> Any:
    """QLoRA's 4-bit base: bitsandbytes NF4 with double quantisation, computing in bf16. Imported only when asked."""
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        raise UserError(
            "model.quantization=4bit needs bitsandbytes, which is not installed (pip install bitsandbytes, on a CUDA "
            "machine)",
            "model.quantization",
        )
    import torch
    from transformers import BitsAndBytesConfig

    if quantization != "4bit":
        raise UserError(f"unknown quantization {quantization!r} (4bit or null)", "model.quantization")
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
        bnb_4bit_quant_storage=torch.bfloat16,
    )


def load_model(
    path: str | Path,
    *,
    dtype: torch.dtype,
    attn_implementation: str,
    device: str = "cpu",
    quantization: str | None = None,
) -> PreTrainedModel:
    """Load a causal LM with the auto class, refusing any load that leaves weights uninitialised, and any pickle.

    ``quantization="4bit"`` loads the base in bitsandbytes NF4 (QLoRA; CUDA only, checked by the caller's config)."""
    from transformers import AutoModelForCausalLM

    check_model_files(path)

    kwargs: dict[str, Any] = {}
    if quantization is not None:
        if device == "cpu":
            raise UserError(
                "model.quantization=4bit needs a CUDA GPU (bitsandbytes' NF4 kernels); this run is on cpu",
                "model.quantization",
            )
        kwargs["quantization_config"] = quantization_config(quantization)
    fsdp = fsdp_enabled()
    if device == "cuda" and not fsdp:
        # Load straight onto this process's GPU.
        kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            str(path),
            dtype=dtype,
            attn_implementation=attn_implementation,
            output_loading_info=True,
            local_files_only=True,
            **kwargs,
        )
    except (OSError, ImportError) as exc:
        # Missing/unreadable weight files, or an attention kernel that is not installed: the user's
        # checkpoint or environment, reported against the setting that chose it.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = "model.attn_implementation" if isinstance(exc, ImportError) else f"model.path={path}"
        raise UserError(f"cannot load the base model: {first}", where) from None
    missing = list(info.get("missing_keys") or [])
    mismatched = list(info.get("mismatched_keys") or [])
    if missing or mismatched:
        raise UserError(
            f"checkpoint loaded with {len(missing)} missing and {len(mismatched)} mismatched weights "
            f"(e.g. {(missing or mismatched)[:3]}): refusing to train on randomly initialised weights",
            str(path),
        )
    if device != "cpu" and "device_map" not in kwargs and not fsdp and quantization is None:
        model.to(device)
    # Under FSDP the model stays where from_pretrained left it (CPU; with fsdp_cpu_ram_efficient_loading,
    # meta tensors on ranks > 0): accelerate shards it and places each shard on its rank's GPU. Moving it
    # here would put the whole base on every rank's (or cuda:0's) memory, and fails on meta tensors.
    return model


def fsdp_enabled() -> bool:
    """True inside ``accelerate launch`` with an FSDP config (accelerate sets ``ACCELERATE_USE_FSDP``)."""
    return os.environ.get("ACCELERATE_USE_FSDP", "false").strip().lower() in (
        "y",
        "yes",
        "t",
        "true",
        "on",
        "1",
    )  # accelerate's str_to_bool


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    own_template = bool(getattr(tok, "chat_template", None))
    if not own_template:
        # A tokenizer without a template gets Gemma 3's (the built-here ones), which needs Gemma's turn tokens.
        if "<end_of_turn>" not in tok.get_vocab():
            raise UserError(
                "tokenizer has no chat template and no <end_of_turn> token for Gemma 3's: give the checkpoint its "
                "chat template (chat_template.jinja or tokenizer_config.json chat_template)",
                str(path),
            )
        tok.chat_template = gemma3_chat_template()
    if tok.pad_token is None:
        tok.pad_token = "<pad>" if "<pad>" in tok.get_vocab() else tok.eos_token
    if tok.pad_token is None:
        raise UserError("tokenizer has neither a pad token nor an eos token to pad with", str(path))
    return tok


def text_model_prefix(model: Any) -> str:
    """Qualified module name of the language model (the decoder stack with ``layers``).

    ``model`` for ``Gemma3ForCausalLM``, ``model.language_model`` for
    ``Gemma3ForConditionalGeneration``. Works on a PEFT-wrapped model too
    (returns the name under ``base_model.model``).
    """
    base = model
    if hasattr(model, "get_base_model"):
        base = model.get_base_model()
    decoder = base.get_decoder() if hasattr(base, "get_decoder") else None
    if decoder is None or not hasattr(decoder, "layers"):
        raise AdapterTargetError(f"cannot find the language model of {type(base).__name__}")
    for name, module in base.named_modules():
        if module is decoder:
            if any(part in name for part in NON_TEXT_PARTS):
                raise AdapterTargetError(f"the decoder found ({name}) lies in a non-text part")
            return name
    raise AdapterTargetError(f"the language model of {type(base).__name__} is not among its modules")


def check_module_names(names: list[str], prefix: str, expected_modules: int | None, what: str) -> None:
    want = f"{prefix}.layers."
    bad = [
        n
        for n in names
        if any(part in n for part in NON_TEXT_PARTS) or not n.removeprefix("base_model.model.").startswith(want)
    ]
    if bad:
        raise AdapterTargetError(
            f"{len(bad)} {what} outside the language model '{prefix}' (e.g. {bad[:3]}); the vision tower or other parts "
            "must never be adapted"
        )
    if not names:
        raise AdapterTargetError(f"no {what} at all: LoRA matched nothing in '{prefix}'")
    if expected_modules is not None:
        found = {n.split(".lora_")[0] for n in names}
        if len(found) != expected_modules:
            raise AdapterTargetError(f"LoRA wraps {len(found)} modules, expected {expected_modules} ({what})")


def check_saved_adapter(adapter_dir: str | Path, prefix: str, expected_modules: int | None = None) -> list[str]:
    """Re-read a saved adapter's safetensors keys and check they all lie in the language model."""
    from safetensors import safe_open

    weights_path = Path(adapter_dir) / "adapter_model.safetensors"
    if not weights_path.is_file():
        raise AdapterTargetError(f"no adapter_model.safetensors in {adapter_dir}")
    with safe_open(str(weights_path), framework="pt") as st:
        keys = list(st.keys())
    check_module_names(keys, prefix, expected_modules, "saved adapter keys")
    return keys


# What a primitive's adapter folder holds: a LoRA adapter (peft), or full weights of the whole model fine-tuned
# for that primitive (the built-here CPU profiles: a model this small learns its task only when its embeddings
# train too, and LoRA adapters with trained embeddings are not servable by vLLM; docs/training.md).
LORA_WEIGHTS = "adapter_model.safetensors"
FULL_WEIGHTS = "model.safetensors"
WEIGHT_FILES = {"lora": (LORA_WEIGHTS, "adapter_config.json"), "full": (FULL_WEIGHTS, "config.json")}


def adapter_kind(adapter_dir: str | Path) -> str | None:
    """``lora`` or ``full`` by the files the folder holds; None when it holds neither."""
    folder = Path(adapter_dir)
    if (folder / LORA_WEIGHTS).is_file():
        return "lora"
    if (folder / FULL_WEIGHTS).is_file() and (folder / "config.json").is_file():
        return "full"
    return None


def check_full_adapter(adapter_dir: str | Path, base_dir: str | Path) -> None:
    """Full weights must be the base's architecture (the same config, dtype aside): the tokenizer, the chat template
    and the stop tokens of the base apply to them."""

    def arch(folder: Path) -> dict[str, Any]:
        cfg = read_json_object(folder / "config.json")
        return {
            k: v
            for k, v in cfg.items()
            if k not in ("dtype", "torch_dtype", "transformers_version", "use_cache", "_name_or_path")
        }

    if arch(Path(adapter_dir)) != arch(Path(base_dir)):
        raise AdapterTargetError(
            f"the full weights in {adapter_dir} are not of the base's architecture ({base_dir}/config.json differs)"
        )


class PerPrimitiveModels:
    """The base and one fully fine-tuned model per primitive, behind the calls the backends make of a ``PeftModel``
    holding named adapters: ``set_adapter(name)``, ``disable_adapter()`` (the base), calling, ``generate``."""

    def __init__(self, base: Any, models: dict[str, Any]):
        self.base = base
        self.models = dict(models)
        self.active_adapter = next(iter(self.models))
        self._disabled = False

    @property
    def peft_config(self) -> dict[str, str]:  # the adapter names, as a PeftModel lists them
        return dict.fromkeys(self.models, "full")

    @property
    def active(self) -> Any:
        return self.base if self._disabled else self.models[self.active_adapter]

    def set_adapter(self, name: str) -> None:
        if name not in self.models:
            raise KeyError(f"no adapter named {name!r} (loaded: {sorted(self.models)})")
        self.active_adapter = name

    @contextlib.contextmanager
    def disable_adapter(self) -> Iterator[None]:
        self._disabled = True
        try:
            yield
        finally:
            self._disabled = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.active(*args, **kwargs)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        return self.active.generate(*args, **kwargs)

    def parameters(self) -> Any:
        return self.active.parameters()

    def eval(self) -> PerPrimitiveModels:
        for model in [self.base, *self.models.values()]:
            model.eval()
        return self

    @property
    def generation_config(self) -> Any:
        return self.active.generation_config


def load_full_adapters(
    base: Any, base_dir: str | Path, dirs: dict[str, Path], *, dtype: Any, attn_implementation: str, device: str
) -> PerPrimitiveModels:
    """Each primitive's full weights (checked to be the base's architecture), with the base, as one model object."""
    models = {}
    for name, folder in dirs.items():
        check_full_adapter(folder, base_dir)
        models[name] = load_model(folder, dtype=dtype, attn_implementation=attn_implementation, device=device).eval()
    return PerPrimitiveModels(base, models).eval()
