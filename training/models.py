"""Model profiles and LoRA targeting (loading a saved base, tokenizer or adapter: :mod:`forethought.bundle.models`).

Profiles:

``tiny`` / ``small``
    A random ``Gemma3ForCausalLM`` + offline BPE tokenizer, built once per output
    folder (:mod:`forethought.training.tiny`) and loaded from ``<output_dir>/base``.
``causal_lm``
    Any causal LM checkpoint that ``AutoModelForCausalLM`` maps (Gemma 3 text or multimodal,
    Qwen3, Llama, ...), from a local folder (``model.path``). LoRA targets are discovered on
    the architecture's decoder layers (:func:`discover_lora_targets`).
``gemma3_12b``
    Gemma-3-12B from a local folder (``model.path``). Its checkpoint is multimodal
    (``model_type: gemma3``), so it is loaded with ``AutoModelForCausalLM`` (which
    maps it to ``Gemma3ForConditionalGeneration``). ``Gemma3ForCausalLM.from_pretrained``
    on that checkpoint raises no error but initialises every weight at random; a
    load that leaves any weight missing is refused (:func:`forethought.bundle.models.load_model`).

LoRA targets are a regex anchored on the language model's module path
(``model.layers.N...`` for a text model, ``model.language_model.layers.N...`` for
the multimodal one), so suffix matching can never wrap the vision tower. After
wrapping (and after saving) every adapter key is checked to lie inside the
language model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.bounded import read_json_object
from forethought.bundle.models import AdapterTargetError, check_module_names, text_model_prefix
from forethought.errors import UserError

if TYPE_CHECKING:
    import torch
    from peft import LoraConfig

    from forethought.training.config import LoraSettings, ModelConfig


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise UserError("train.device=cuda but no CUDA device is available", "train.device")
    return requested


def check_attention_available(attn_implementation: str, device: str) -> None:
    """Refuse up front an attention kernel that cannot run here.

    Otherwise the failure is an ImportError (flash-attn missing) or a NotImplementedError
    (flex attention's backward on CPU) after the base is built and training has begun.
    """
    if attn_implementation in ("eager", "sdpa"):
        return
    if device != "cuda":
        raise UserError(
            f"{attn_implementation} needs a CUDA GPU and this run is on {device}; use sdpa (or eager)",
            "model.attn_implementation",
        )
    from transformers.utils import is_flash_attn_2_available, is_flash_attn_3_available, is_torch_flex_attn_available

    available, remedy = {
        "flash_attention_2": (is_flash_attn_2_available, "pip install flash-attn"),
        "flash_attention_3": (is_flash_attn_3_available, "install flash-attn 3 (hopper build)"),
        "flex_attention": (is_torch_flex_attn_available, "needs a torch with flex attention (>= 2.5)"),
    }[attn_implementation]
    if not available():
        raise UserError(
            f"{attn_implementation} is not available in this environment ({remedy}), or use sdpa",
            "model.attn_implementation",
        )


def check_quantization_available(device: str) -> None:
    """``model.quantization=4bit`` up front: a CUDA device and bitsandbytes (imported only here, only when asked)."""
    import importlib.util

    from forethought.training.config import QUANTIZATION_CPU

    if device != "cuda":
        raise UserError(QUANTIZATION_CPU + f" (this run is on {device}: no CUDA device)", "model.quantization")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise UserError("model.quantization=4bit needs bitsandbytes (pip install bitsandbytes)", "model.quantization")


def prepare_quantized(model: Any, train: Any, device: str) -> Any:
    """peft's ``prepare_model_for_kbit_training`` on a 4-bit base: frozen base, layer norms in fp32, input gradients
    for gradient checkpointing (the trainer then enables checkpointing itself, non-reentrant)."""
    from peft import prepare_model_for_kbit_training

    gc = train.gradient_checkpointing if train.gradient_checkpointing is not None else device == "cuda"
    return prepare_model_for_kbit_training(
        model,
        use_gradient_checkpointing=gc,
        gradient_checkpointing_kwargs={"use_reentrant": False} if gc else None,
    )


def resolve_dtype(model_cfg: ModelConfig, device: str) -> torch.dtype:
    import torch

    if model_cfg.dtype == "float32":
        return torch.float32
    if model_cfg.dtype == "bfloat16":
        return torch.bfloat16
    # auto
    if model_cfg.profile == "gemma3_12b" or model_cfg.quantization is not None:
        return torch.bfloat16
    return torch.bfloat16 if device == "cuda" else torch.float32


def checkpoint_model_type(path: str | Path) -> str:
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        raise UserError("no config.json: not a transformers checkpoint folder", str(path))
    try:
        return str(read_json_object(cfg).get("model_type"))
    except json.JSONDecodeError as exc:
        raise UserError(f"config.json is not valid JSON: {exc.msg}", str(cfg)) from None


def causal_lm_model_types() -> set[str]:
    """The ``model_type`` values ``AutoModelForCausalLM`` maps to a class (this transformers' registry)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def require_local_path(model_cfg: ModelConfig) -> Path:
    """The checkpoint folder of a pretrained profile (gemma3_12b, causal_lm): given, local, of a type it loads."""
    if not model_cfg.path:
        example = "/path/to/gemma-3-12b-it" if model_cfg.profile == "gemma3_12b" else "/path/to/Qwen3-8B"
        raise UserError(
            f"the {model_cfg.profile} profile needs a local checkpoint folder: pass model.path={example} "
            "(nothing is downloaded from a hub)",
            "model.path",
        )
    path = Path(model_cfg.path).expanduser()
    if not path.is_dir():
        raise UserError(
            "no such folder (model.path must be a local checkpoint folder; nothing is downloaded)",
            f"model.path={model_cfg.path}",
        )
    mt = checkpoint_model_type(path)
    if model_cfg.profile == "gemma3_12b" and mt not in ("gemma3", "gemma3_text"):
        raise UserError(
            f"model_type is {mt!r}, expected a Gemma 3 checkpoint ('gemma3' or 'gemma3_text'); "
            "model=causal_lm takes any causal LM",
            str(path / "config.json"),
        )
    if model_cfg.profile != "gemma3_12b" and mt not in causal_lm_model_types():
        raise UserError(
            f"model_type {mt!r} is not a causal LM this transformers can load (AutoModelForCausalLM has no class for it)",
            str(path / "config.json"),
        )
    return path


def _decoder_layers(model: Any) -> Any:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder().layers


def discover_lora_targets(model: Any, targets: list[str]) -> list[str]:
    """The linear modules LoRA wraps, as paths inside one decoder layer of the language model, found on this
    architecture: ``self_attn.q_proj`` for Gemma 3, Qwen3 and Llama, whatever the parent is called elsewhere.

    ``targets`` names modules by their last component (``q_proj``, ...), or is ``["all-linear"]``: every linear
    module of the decoder layers (never the embeddings, the LM head or a vision tower: they are not in these layers).
    A named target the layers do not have is an error that lists what they have.
    """
    from torch import nn

    layers = list(_decoder_layers(model))
    if not layers:
        raise AdapterTargetError(f"the language model of {type(model).__name__} has no decoder layers")
    # on a wrapped model too: a LoRA layer keeps the original as ``base_layer``; its lora_A / lora_B are not targets
    per_layer = [
        {
            n.removesuffix(".base_layer")
            for n, m in layer.named_modules()
            if n and isinstance(m, nn.Linear) and ".lora_" not in n and not n.startswith("lora_")
        }
        for layer in layers
    ]
    common = sorted(set.intersection(*per_layer))
    if "all-linear" in targets:
        found = common
    else:
        found = [n for n in common if n.rsplit(".", 1)[-1] in targets]
        missing = [t for t in targets if not any(n.rsplit(".", 1)[-1] == t for n in common)]
        if missing:
            raise AdapterTargetError(
                f"lora.target_modules: {missing} are not linear modules of {type(model).__name__}'s decoder layers; "
                f"they have {common} (or use lora.target_modules=[all-linear])"
            )
    if not found:
        raise AdapterTargetError(f"no linear module in the decoder layers of {type(model).__name__}")
    return found


def lora_target_regex(prefix: str, module_paths: list[str], layers: list[int] | None = None) -> str:
    """A regex PEFT full-matches against module names: only these modules of the language model's decoder layers
    (of the given layer indices; None: every layer)."""
    layer = r"\d+" if layers is None else "(?:" + "|".join(str(index) for index in layers) + ")"
    return (
        "^" + re.escape(prefix) + r"\.layers\." + layer + r"\.(?:" + "|".join(re.escape(m) for m in module_paths) + ")$"
    )


def lora_layers(model: Any, lora: LoraSettings) -> list[int] | None:
    """The decoder layer indices LoRA wraps: the last ``lora.last_layers`` of them, or None for all."""
    if lora.last_layers is None:
        return None
    count = len(_decoder_layers(model))
    if lora.last_layers > count:
        raise UserError(
            f"lora.last_layers is {lora.last_layers} but {type(model).__name__} has {count} decoder layers "
            f"(at most {count}, or null for all)",
            "lora.last_layers",
        )
    return list(range(count - lora.last_layers, count))


def lora_config(model: Any, lora: LoraSettings) -> LoraConfig:
    from peft import LoraConfig, TaskType

    prefix = text_model_prefix(model)
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora_target_regex(
            prefix, discover_lora_targets(model, list(lora.target_modules)), lora_layers(model, lora)
        ),
        bias="none",
        task_type=TaskType.CAUSAL_LM,
    )


def check_adapter_targets(peft_model: Any, lora: LoraSettings | None = None) -> dict[str, Any]:
    """Fail loudly unless every LoRA parameter lies in the language model's decoder layers.

    Checks both the wrapped modules and the keys the adapter will be saved under.
    Returns a small summary (prefix, module count, parameter count).
    """
    from peft import get_peft_model_state_dict

    prefix = text_model_prefix(peft_model)
    n_layers = len(_decoder_layers(peft_model))
    if lora is not None and lora.last_layers is not None:
        n_layers = min(n_layers, lora.last_layers)
    expected = (
        n_layers * len(discover_lora_targets(peft_model, list(lora.target_modules))) if lora is not None else None
    )
    lora_params = [n for n, _ in peft_model.named_parameters() if ".lora_" in n]
    check_module_names(lora_params, prefix, expected, "LoRA parameters")
    saved = list(get_peft_model_state_dict(peft_model).keys())
    check_module_names(saved, prefix, expected, "adapter keys")
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    stray = [n for n in trainable if ".lora_" not in n]
    if stray:
        raise AdapterTargetError(f"{len(stray)} non-LoRA parameters are trainable (e.g. {stray[:3]})")
    return {
        "text_model_prefix": prefix,
        "lora_modules": len({n.split(".lora_")[0] for n in lora_params}),
        "lora_parameters": int(sum(p.numel() for n, p in peft_model.named_parameters() if ".lora_" in n)),
    }
