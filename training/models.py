"""Model profiles and LoRA targeting (loading a saved base, tokenizer or adapter: :mod:`forethought.bundle.models`).

Two profiles:

``tiny``
    A random ``Gemma3ForCausalLM`` + offline BPE tokenizer, built once per output
    folder (:mod:`forethought.training.tiny`) and loaded from ``<output_dir>/base``.
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

_ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP = ("gate_proj", "up_proj", "down_proj")


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


def resolve_dtype(model_cfg: ModelConfig, device: str) -> torch.dtype:
    import torch

    if model_cfg.dtype == "float32":
        return torch.float32
    if model_cfg.dtype == "bfloat16":
        return torch.bfloat16
    # auto
    if model_cfg.profile == "gemma3_12b":
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


def require_local_path(model_cfg: ModelConfig) -> Path:
    """The gemma3_12b profile's checkpoint folder: must be given and must exist locally."""
    if not model_cfg.path:
        raise UserError(
            "the gemma3_12b profile needs a local checkpoint folder: pass model.path=/path/to/gemma-3-12b-it "
            "(nothing is downloaded from a hub)",
            "model.path",
        )
    p = Path(model_cfg.path).expanduser()
    if not p.is_dir():
        raise UserError(
            "no such folder (model.path must be a local checkpoint folder; nothing is downloaded)",
            f"model.path={model_cfg.path}",
        )
    mt = checkpoint_model_type(p)
    if mt not in ("gemma3", "gemma3_text"):
        raise UserError(
            f"model_type is {mt!r}, expected a Gemma 3 checkpoint ('gemma3' or 'gemma3_text')", str(p / "config.json")
        )
    return p


def lora_target_regex(prefix: str, targets: list[str]) -> str:
    """A regex PEFT full-matches against module names: only the language model's projections."""
    attn = [t for t in targets if t in _ATTN]
    mlp = [t for t in targets if t in _MLP]
    alts = []
    if attn:
        alts.append(r"self_attn\.(?:" + "|".join(attn) + ")")
    if mlp:
        alts.append(r"mlp\.(?:" + "|".join(mlp) + ")")
    return "^" + re.escape(prefix) + r"\.layers\.\d+\.(?:" + "|".join(alts) + ")$"


def lora_config(model: Any, lora: LoraSettings) -> LoraConfig:
    from peft import LoraConfig, TaskType

    prefix = text_model_prefix(model)
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora_target_regex(prefix, list(lora.target_modules)),
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
    base = peft_model.get_base_model()
    n_layers = len(base.get_decoder().layers)
    expected = n_layers * len(lora.target_modules) if lora is not None else None
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
