"""Loading what ``forethought train`` wrote: one base model + one named LoRA adapter per primitive.

This is the API later commands (validate, package, the kernel's local backend)
use; they should not re-derive paths themselves. It reads the trainer's run folder, so it belongs to
training; loading the base, tokenizer and adapters themselves is :mod:`forethought.bundle.models`,
which the kernel's hf backend uses too::

    from forethought.training.artifacts import load_adapters, stop_token_ids

    model, tok = load_adapters("runs/train")          # every trained primitive
    model.set_adapter("match_func")                   # switch primitive
    ids = tok.apply_chat_template(prompt, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=256, eos_token_id=stop_token_ids(tok))

Layout: ``<output_dir>/base.json`` names the base (``<output_dir>/base`` for the
tiny profile, the local Gemma 3 folder otherwise); ``<output_dir>/<primitive>/adapter``
holds each adapter; ``<output_dir>/<primitive>/metrics.json`` says whether the
run completed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.bounded import read_json_object
from forethought.bundle.models import (
    adapter_kind,
    check_saved_adapter,
    load_full_adapters,
    load_model,
    load_tokenizer,
    text_model_prefix,
)
from forethought.errors import UserError
from forethought.kernel.backends.hf import stop_ids
from forethought.kernel.specs import SPECS
from forethought.training.config import PRIMITIVE_NAMES

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def read_base_ref(output_dir: str | Path) -> dict[str, Any]:
    path = Path(output_dir) / "base.json"
    if not path.is_file():
        raise UserError(
            "no base.json: not a `forethought train` output folder (or training has not started)", str(output_dir)
        )
    return read_json_object(path)


def base_path(output_dir: str | Path) -> Path:
    return Path(read_base_ref(output_dir)["path"])


def adapter_dir(output_dir: str | Path, primitive: str) -> Path:
    return Path(output_dir) / primitive / "adapter"


def run_metrics(output_dir: str | Path, primitive: str) -> dict[str, Any] | None:
    path = Path(output_dir) / primitive / "metrics.json"
    return read_json_object(path) if path.is_file() else None


def recorded_spec_hashes(output_dir: str | Path, primitive: str) -> dict[Path, str | None]:
    """The spec hash an adapter's training prompts were rendered with, per run-folder file that records it.

    ``run_state.json`` (written when the run starts) and ``metrics.json`` (when it completes) both carry
    ``spec_hash``; it is None when the dataset's stats.json had no ``spec_hashes``.
    """
    run = Path(output_dir) / primitive
    out: dict[Path, str | None] = {}
    for name in ("run_state.json", "metrics.json"):
        path = run / name
        if path.is_file():
            out[path] = read_json_object(path).get("spec_hash")
    return out


def check_spec_hashes(output_dir: str | Path, primitives: list[str]) -> dict[str, str | None]:
    """Refuse adapters trained on prompts rendered by a spec other than the code's current one.

    Returns primitive -> recorded hash (None: not recorded, so provenance is unknown; a warning is printed).
    """
    out: dict[str, str | None] = {}
    for primitive in primitives:
        current = SPECS[primitive].spec_hash
        out[primitive] = None
        for where, spec_hash in recorded_spec_hashes(output_dir, primitive).items():
            if spec_hash is not None and spec_hash != current:
                raise UserError(
                    f"adapter {primitive!r} was trained on prompts rendered by spec hash {spec_hash}, but the code's current spec hash of "
                    f"{primitive!r} is {current}: its prompt, schema or contract changed since training; regenerate the data "
                    "and retrain (`forethought generate`, then `forethought train`)",
                    str(where),
                )
            out[primitive] = out[primitive] or spec_hash
    unknown = [primitive for primitive, spec_hash in out.items() if spec_hash is None]
    if unknown:
        print(
            f"warning: no spec hash recorded for {unknown} in {output_dir} (their dataset's stats.json has no spec_hashes): "
            "cannot check that they were trained under the current specs",
            file=sys.stderr,
        )
    return out


def check_trained_on(output_dir: str | Path, primitives: list[str], dataset_dir: str | Path) -> None:
    """Refuse to measure an adapter on data other than the one it was trained on: with another train split (data
    regenerated since, another seed or split, other demonstrations), validation rows may be rows it trained on, and
    the prompts may not be the ones it learned. Each run's ``run_state.json`` records its train split's digest."""
    from forethought.training.data import file_sha256, split_path

    for primitive in primitives:
        path = Path(output_dir) / primitive / "run_state.json"
        if not path.is_file():
            continue  # a run from before run_state.json: its provenance is unknown (check_spec_hashes warns)
        dataset = read_json_object(path).get("dataset")
        trained = dataset.get("train_sha256") if isinstance(dataset, dict) else None
        current = file_sha256(split_path(dataset_dir, primitive, "train"))
        if trained is not None and current is None:
            raise UserError(
                f"adapter {primitive!r} was trained on a train split that {dataset_dir} does not have: point "
                "dataset_dir at the data it was trained on",
                str(split_path(dataset_dir, primitive, "train")),
            )
        if trained is not None and trained != current:
            raise UserError(
                f"adapter {primitive!r} was trained on another train split than {split_path(dataset_dir, primitive, 'train')} "
                "(the data was regenerated since, or dataset_dir is another run's): its validation rows may be rows "
                "it trained on; point dataset_dir at the data it was trained on, or retrain",
                str(path),
            )


def trained_primitives(output_dir: str | Path) -> list[str]:
    """Primitives whose run completed and whose adapter is on disk, in the canonical order."""
    out = []
    for primitive in PRIMITIVE_NAMES:
        metrics = run_metrics(output_dir, primitive)
        if metrics and metrics.get("completed") and adapter_kind(adapter_dir(output_dir, primitive)) is not None:
            out.append(primitive)
    return out


def _default_dtype(profile: str, device: str) -> torch.dtype:
    import torch

    if profile == "gemma3_12b" or device != "cpu":
        return torch.bfloat16
    return torch.float32


def load_base(
    output_dir: str | Path,
    *,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
    attn_implementation: str = "sdpa",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The base model (eval mode) and its tokenizer, exactly as the adapters were trained on."""
    ref = read_base_ref(output_dir)
    path = Path(ref["path"])
    model = load_model(
        path,
        dtype=dtype or _default_dtype(ref["profile"], device),
        attn_implementation=attn_implementation,
        device=device,
    )
    model.eval()
    return model, load_tokenizer(path)


def load_adapters(
    output_dir: str | Path,
    primitives: list[str] | None = None,
    *,
    model: PreTrainedModel | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
) -> tuple[Any, PreTrainedTokenizerBase]:
    """A ``PeftModel`` holding one adapter per primitive, named after it; ``set_adapter(name)`` switches.

    ``primitives`` defaults to every completed run. Each adapter's keys are
    checked to lie inside the language model before it is loaded. Full weights (``train.finetuning=full``)
    load as a :class:`~forethought.bundle.models.PerPrimitiveModels`, which answers the same calls.
    """
    from peft import PeftModel  # lazily: peft pulls in torch and transformers

    names = primitives or trained_primitives(output_dir)
    if not names:
        raise UserError("no trained adapters found", str(output_dir))
    kinds = {primitive: adapter_kind(adapter_dir(output_dir, primitive)) for primitive in names}
    for primitive, kind in kinds.items():
        if kind is None:
            raise UserError(f"no adapter for primitive {primitive!r}", str(adapter_dir(output_dir, primitive)))
    if len(set(kinds.values())) > 1:
        raise UserError(
            f"the adapters mix LoRA and full weights ({kinds}); one bundle holds one kind: retrain with one "
            "train.finetuning",
            str(output_dir),
        )
    if model is None:
        model, tok = load_base(output_dir, device=device, dtype=dtype)
        tokenizer = tokenizer or tok
    elif tokenizer is None:
        tokenizer = load_tokenizer(base_path(output_dir))
    if set(kinds.values()) == {"full"}:
        return load_full_adapters(
            model,
            base_path(output_dir),
            {primitive: adapter_dir(output_dir, primitive) for primitive in names},
            dtype=model.dtype,
            attn_implementation=model.config._attn_implementation or "sdpa",
            device=str(model.device),
        ), tokenizer
    prefix = text_model_prefix(model)
    for primitive in names:
        check_saved_adapter(adapter_dir(output_dir, primitive), prefix)
    peft_model = PeftModel.from_pretrained(
        model, str(adapter_dir(output_dir, names[0])), adapter_name=names[0], is_trainable=False
    )
    for primitive in names[1:]:
        peft_model.load_adapter(str(adapter_dir(output_dir, primitive)), adapter_name=primitive, is_trainable=False)
    peft_model.set_adapter(names[0])
    peft_model.eval()
    return peft_model, tokenizer


def stop_token_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Generation must stop on the chat template's end-of-turn token as well as eos (Gemma ends turns with
    ``<end_of_turn>``). The same derivation the kernel's hf backend decodes with."""
    return stop_ids(tokenizer)
