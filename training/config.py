"""Typed schema of ``conf/train.yaml`` and its groups (model, lora, train, logging).

Every model is strict (``strict=True``: no string-to-number coercion) and closed
(``extra="forbid"``), so a misspelt key or a value of the wrong type is an error
listed with all the others before anything runs. This module imports no torch.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from forethought.config import LAYOUT
from forethought.kernel.specs import PRIMITIVE_NAMES, RESERVED_NAMES, PrimitiveName, name_validator

# The registered primitives (kernel/specs/), read live: one adapter each.
# Model profiles whose base is built (and pretrained) here, on the dataset's train splits; the
# others load a user's pretrained checkpoint from model.path.
BUILT_HERE = ("tiny", "small")
__all__ = ["PRIMITIVE_NAMES", "PrimitiveName", "TrainConfig"]

# Attention kernels that keep packed / padding-free sequences apart by reading the
# per-sequence boundaries. Eager attention materialises a dense block-diagonal mask and
# score matrix per packed row (correct in transformers 5, but slow and memory-hungry at
# 2048-token rows, which defeats packing); it is refused in favour of sdpa.
PACKING_ATTENTION = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")

_FP16_REFUSED = (
    "float16 is refused for Gemma 3: its activations exceed fp16's range (loss 0 / grad_norm nan, trl #3236); "
    "use bfloat16 on GPU (float32 on CPU)"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @classmethod
    def _cross_errors(cls, data: dict[str, Any]) -> list[str]:
        """Checks that span several fields. They read a plain dict, so they also run on input whose
        other fields are invalid: every error is listed at once (pydantic's own after-validators
        are skipped as soon as one field fails). Values of an unexpected type are left to the
        field errors."""
        return []

    @model_validator(mode="wrap")
    @classmethod
    def _all_errors(cls, data: Any, handler: Any) -> Any:
        try:
            model = handler(data)
        except ValidationError as exc:
            extra = cls._cross_errors(data) if isinstance(data, dict) else []
            if not extra:
                raise
            details = [
                {
                    "type": e["type"],
                    "loc": e["loc"],
                    "input": e.get("input"),
                    **({"ctx": e["ctx"]} if "ctx" in e else {}),
                }
                for e in exc.errors()
            ]
            raise ValidationError.from_exception_data(cls.__name__, details + _value_errors(extra, data)) from None
        extra = cls._cross_errors(model.model_dump())
        if extra:
            raise ValidationError.from_exception_data(cls.__name__, _value_errors(extra, data))
        return model


def _value_errors(messages: list[str], data: Any) -> list[Any]:
    return [{"type": "value_error", "loc": (), "input": data, "ctx": {"error": ValueError(m)}} for m in messages]


def _sub(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


class TinyShape(_Strict):
    """Dimensions of the tiny random Gemma 3 text model (``model=tiny``)."""

    vocab_size: int = Field(4096, ge=300, description="BPE vocabulary size to train (>= 256 bytes + specials)")
    hidden_size: int = Field(128, ge=16, le=4096)
    intermediate_size: int = Field(512, ge=16)
    num_layers: int = Field(2, ge=1, le=64)
    num_heads: int = Field(4, ge=1)
    num_kv_heads: int = Field(2, ge=1)
    head_dim: int = Field(32, ge=32, description="kept >= 32 (vLLM and fused kernels need it)")
    sliding_window: int = Field(512, ge=1)
    max_position_embeddings: int = Field(4096, ge=64)
    pre_tokenizer: Literal["words", "structure", "pieces"] = Field(
        "words",
        description="BPE pre-tokenization: words (GPT-2 style), structure (merges may cross spaces) or pieces (a word "
        "is one token wherever it stands: spaces, underscores, punctuation and case changes split; see training/tiny.py)",
    )
    word_vectors: str | None = Field(
        None,
        description="a .npz of pretrained word vectors (scripts/word_vectors.py) whose directions start the embedding "
        "rows of the tokens that are words in it (training/word_vectors.py); null: every row random",
    )

    @classmethod
    def _cross_errors(cls, data: dict[str, Any]) -> list[str]:
        heads, kv = data.get("num_heads", 4), data.get("num_kv_heads", 2)
        if isinstance(heads, int) and isinstance(kv, int) and kv >= 1 and heads % kv:
            return [f"num_heads ({heads}) must be a multiple of num_kv_heads ({kv})"]
        return []


class LookupSettings(_Strict):
    """``train.per_primitive.<name>.lookup``: before a primitive's own rows, its full weights trained on made-up
    lookups drawn from match_func's train prompts (training/lookup_corpus.py), the in-context step held-out tasks need."""

    steps: int = Field(1500, ge=1, description="optimizer steps (each reads per_device_batch_size fresh sequences)")
    tools: int = Field(6, ge=2, description="tool lines a sequence shows")
    queries: int = Field(6, ge=1, description="at most this many lookups a sequence asks")
    none_share: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="the share of lookups asked instead for words no shown line holds, answered null (0: none)",
    )
    task_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="the share of sequences that ask real train tasks against lines of their own tool list (0: none)",
    )
    task_null_share: float = Field(
        0.2,
        ge=0.0,
        lt=1.0,
        description="in those sequences, the share of asked tools whose line is left out (their tasks answered null)",
    )
    learning_rate: float = Field(1.0e-3, gt=0)
    warmup_steps: int = Field(30, ge=0)
    per_device_batch_size: int = Field(16, ge=1)
    save_steps: int = Field(250, ge=1)


class PretrainSettings(_Strict):
    """The base stage of a built-here profile: full-parameter training of the random model on the
    train splits of all five primitives, mixed (never a validation row), before any adapter."""

    epochs: float = Field(1.0, gt=0)
    max_steps: int = Field(-1, description="> 0 overrides epochs")
    learning_rate: float = Field(2.0e-3, gt=0)
    lr_scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup"] = "cosine"
    warmup_ratio: float = Field(0.03, ge=0.0, lt=1.0)
    weight_decay: float = Field(0.0, ge=0.0)
    per_device_batch_size: int = Field(2, ge=1, description="rows per step; with packing a row holds max_length tokens")
    max_length: int = Field(1536, ge=16)
    packing: bool = True
    loss: Literal["completion", "full", "prompt"] = Field(
        "completion",
        description="completion: the answer tokens only; full: every token; prompt: the requests only, never an answer",
    )
    max_examples_per_primitive: int | None = Field(None, ge=1, description="use at most N train rows of each primitive")
    logging_steps: int = Field(25, ge=1)
    save_steps: int = Field(200, ge=1)
    em_eval_steps: int | None = Field(
        None, ge=1, description="exact match on a fixed validation subset every N steps (monitoring only)"
    )
    em_eval_examples: int = Field(16, ge=1, description="validation rows per primitive for em_eval_steps")
    seed: int | None = Field(
        None,
        description="the base's own seed (its random initialisation and the order it reads rows in); null: the run's "
        "seed. The dev split stays carved with the run's seed, so bases of several seeds share one dev split",
    )

    @classmethod
    def _cross_errors(cls, data: dict[str, Any]) -> list[str]:
        max_steps = data.get("max_steps", -1)
        if isinstance(max_steps, int) and (max_steps == 0 or max_steps < -1):
            return ["max_steps must be -1 (use epochs) or > 0"]
        return []


# Profiles that load a pretrained checkpoint from model.path: the paper's Gemma-3-12B, or any causal LM.
PRETRAINED = ("gemma3_12b", "causal_lm")
QUANTIZATION_CPU = (
    "model.quantization=4bit (QLoRA) needs a CUDA GPU: bitsandbytes' NF4 kernels do not run on CPU; "
    "train in bf16 there (model.quantization=null)"
)


class ModelConfig(_Strict):
    profile: Literal["tiny", "small", "gemma3_12b", "causal_lm"]
    path: str | None = Field(
        None, description="local checkpoint folder (gemma3_12b, causal_lm); never fetched from a hub"
    )
    quantization: Literal["4bit"] | None = Field(
        None,
        description="4bit: QLoRA (bitsandbytes NF4, double quantisation, bf16 compute); GPU and LoRA only",
    )
    dtype: Literal["auto", "bfloat16", "float32"] = Field(
        "auto",
        description="auto: float32 on CPU, bfloat16 on GPU (tiny); gemma3_12b accepts only auto (= bfloat16) or bfloat16",
    )
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"] = "sdpa"
    tiny: TinyShape | None = None
    pretrain: PretrainSettings | None = Field(
        None, description="built-here profiles: the base stage (null: the base stays random, as in the fast tests)"
    )

    @field_validator("dtype", mode="before")
    @classmethod
    def _no_fp16(cls, value: object) -> object:
        if isinstance(value, str) and value.lower() in ("float16", "fp16", "half"):
            raise ValueError(_FP16_REFUSED)
        return value

    @classmethod
    def _cross_errors(cls, data: dict[str, Any]) -> list[str]:
        profile, tiny, dtype = data.get("profile"), data.get("tiny"), data.get("dtype", "auto")
        errors = []
        if profile in BUILT_HERE and tiny is None:
            errors.append(f"model.tiny (the model shape) is required for profile {profile!r}")
        if profile in BUILT_HERE and data.get("path") is not None:
            errors.append(
                f"model.path is only for the gemma3_12b profile: the {profile} profile builds and pretrains its own base "
                "(under <output_dir>/base) and would ignore it; choose model=gemma3_12b or leave model.path unset"
            )
        if profile not in (None, *BUILT_HERE) and tiny is not None:
            errors.append(f"model.tiny is only for the built-here profiles {BUILT_HERE} (profile is {profile!r})")
        if profile not in (None, *BUILT_HERE) and data.get("pretrain") is not None:
            errors.append(
                f"model.pretrain is only for the built-here profiles {BUILT_HERE}: profile {profile!r} loads a pretrained checkpoint"
            )
        if data.get("quantization") is not None and profile in BUILT_HERE:
            errors.append(
                f"model.quantization is for pretrained checkpoints ({', '.join(PRETRAINED)}): the {profile} profile's "
                "built-here base is trained full-parameter in its base stage"
            )
        if data.get("quantization") is not None and dtype == "float32":
            errors.append("model.quantization=4bit computes in bfloat16: model.dtype must be auto or bfloat16")
        if profile == "gemma3_12b" and dtype == "float32":
            errors.append(
                f"model.dtype={dtype} is refused for the gemma3_12b profile: bf16 only ('auto' means bfloat16). "
                "float32 doubles the memory of a 12B base for no gain in LoRA training, and float16 overflows on Gemma 3"
            )
        return errors


class LoraSettings(_Strict):
    r: int = Field(16, ge=1)  # names: math (LoRA's rank, the paper's letter and PEFT's key)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    # Module names inside each decoder layer of the *language model*; they are
    # turned into a regex anchored on the text model's path, so a multimodal
    # checkpoint's vision tower is never wrapped.
    # all-linear: every linear module of the decoder layers, discovered on the architecture (training/models.py).
    target_modules: list[
        Literal["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "all-linear"]
    ] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1,
    )

    # LoRA on the last N decoder layers only (null: every layer), peft's layers_to_transform counted from the top. The
    # layers below carry no adapter, so without gradient checkpointing (the CPU default) autograd runs no backward pass
    # through them: on SmolLM2-135M (30 layers, CPU) a step with the last 6 took 9.2 s against 24.9 s with all 30
    # (docs/benchmarks.md). Checkpointing (the GPU default) makes the inputs need a gradient, which undoes the gain.
    last_layers: int | None = Field(None, ge=1, description="LoRA on the last N decoder layers only; null: all")

    @field_validator("target_modules")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        from forethought.config import reject_duplicates

        return reject_duplicates(value, "LoRA target modules")


Decoding = Literal["constrained", "free"]


class PrimitiveOverrides(_Strict):
    """``train.per_primitive.<name>``: settings of one primitive's adapter that differ from ``train``'s (its budget in
    epochs, its lr). Each primitive's curve flattens after its own number of epochs (docs/training.md)."""

    epochs: float | None = Field(None, gt=0)
    max_steps: int | None = None
    learning_rate: float | None = Field(None, gt=0)
    lr_scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup"] | None = None
    warmup_ratio: float | None = Field(None, ge=0.0, lt=1.0)
    weight_decay: float | None = Field(None, ge=0.0)
    per_device_batch_size: int | None = Field(None, ge=1)
    early_stopping_patience: int | None = Field(None, ge=1)
    dev_em_examples: int | None = Field(None, ge=1)
    decoding: Decoding | None = None
    lookup: LookupSettings | None = Field(
        None, description="first, made-up lookups (training/lookup_corpus.py); full weights only. null: none"
    )
    refit: bool | None = None


class TrainSettings(_Strict):
    preset: str = Field(description="name of the train/ preset this came from (informational)")
    epochs: float = Field(gt=0)
    max_steps: int = Field(-1, description="> 0 overrides epochs")
    learning_rate: float = Field(gt=0)
    lr_scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup"] = "cosine"
    warmup_ratio: float = Field(0.03, ge=0.0, lt=1.0)
    weight_decay: float = Field(0.0, ge=0.0)
    max_grad_norm: float = Field(1.0, gt=0)
    per_device_batch_size: int = Field(8, ge=1)
    eval_batch_size: int = Field(8, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int = Field(2048, ge=16, description="tokens; longer examples are truncated (keep_start)")
    packing: bool = Field(
        False,
        description="BFD packing into rows of max_length tokens (padding-free); per_device_batch_size then counts rows",
    )
    padding_free: bool = Field(
        False, description="implied by packing; alone it is refused (trl cannot enforce max_length then)"
    )
    gradient_checkpointing: bool | None = Field(None, description="null: on for GPU, off for CPU (40 % slower there)")
    liger: bool = Field(False, description="Liger kernels on GPU; skipped with a note when not installed or on CPU")
    optim: Literal["adamw_torch", "adamw_torch_fused", "adafactor", "sgd"] = "adamw_torch"
    logging_steps: int = Field(10, ge=1)
    eval_strategy: Literal["no", "steps", "epoch"] = "epoch"
    eval_steps: int | None = Field(None, ge=1)
    save_steps: int = Field(200, ge=1)
    save_total_limit: int | None = Field(2, ge=1)
    resume: bool = Field(False, description="continue from the last checkpoint in the run folder")
    overwrite: bool = Field(
        False,
        description="delete the run folders of the primitives being trained first (with primitive=all also the tiny base)",
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dataloader_num_workers: int = Field(0, ge=0)
    cpu_threads: int | None = Field(
        None,
        ge=1,
        description="torch threads on CPU (null: torch's default); 1 is much faster on a machine shared with other jobs",
    )
    max_train_examples: int | None = Field(None, ge=1, description="use only the first N train examples")
    max_eval_examples: int | None = Field(None, ge=1, description="use only the first N validation examples")
    em_eval_steps: int | None = Field(
        None, ge=1, description="exact match on a fixed validation subset every N steps (monitoring only)"
    )
    em_eval_examples: int = Field(
        16, ge=1, description="rows for em_eval_steps (dev rows when dev_fraction > 0, else validation rows)"
    )
    # Early stopping and checkpoint selection read a dev split carved from the train *solutions* (never a
    # validation row): data_gen/row.py is_dev_solution.
    dev_fraction: float = Field(0.0, ge=0.0, lt=1.0, description="share of train solutions held out as dev (0: none)")
    selection: Literal["last", "dev_exact_match"] = Field(
        "last",
        description="the adapter kept: the last step's, or the epoch checkpoint of best exact match on the dev rows",
    )
    early_stopping_patience: int | None = Field(
        None, ge=1, description="stop after N epochs without a better dev exact match"
    )
    dev_em_examples: int = Field(
        64, ge=1, description="dev rows decoded for exact match at each epoch's end (a fixed subset)"
    )
    decoding: Decoding = Field(
        "constrained", description="how the dev rows (and em_eval_steps) are decoded: as the gates will"
    )
    # The dev split keeps a fifth of the train solutions out of the adapter: on match_func, training them after
    # selection measured +5.0 and +1.9 points on validation (two adapter seeds of one base; docs/training.md).
    refit: bool = Field(
        False,
        description="after selection, train again from the start on train and dev rows for the epochs kept "
        "(needs selection=dev_exact_match; the dev figures are then the selection pass's)",
    )
    lookup: LookupSettings | None = Field(
        None, description="made-up lookups before the primitive's own rows (set per primitive); full weights only"
    )
    per_primitive: dict[PrimitiveName, PrimitiveOverrides] = Field(default_factory=dict)
    # lora: one LoRA adapter per primitive (lora.*). full: every weight of the base fine-tuned per primitive and shipped
    # whole: the built-here profiles' small models learn a primitive only when their embeddings train too (a frozen
    # embedding table held match_func at 20-34 % dev exact match where full weights reached 81 %; docs/training.md),
    # and vLLM serves no LoRA adapter with trained embeddings. Built-here profiles only.
    finetuning: Literal["lora", "full"] = "lora"

    def for_primitive(self, name: str) -> TrainSettings:
        """These settings with ``per_primitive[name]`` applied."""
        over = self.per_primitive.get(name)
        if over is None:
            return self
        fields = type(over).model_fields  # the values themselves (a dump would turn ``lookup`` into a dict)
        return self.model_copy(update={k: getattr(over, k) for k in fields if getattr(over, k) is not None})

    @classmethod
    def _cross_errors(cls, data: dict[str, Any]) -> list[str]:
        errors = []
        if data.get("selection") == "dev_exact_match" and not data.get("dev_fraction"):
            errors.append("train.selection=dev_exact_match needs a dev split: set train.dev_fraction (e.g. 0.1)")
        patience = [data.get("early_stopping_patience")] + [
            o.get("early_stopping_patience") for o in (data.get("per_primitive") or {}).values() if isinstance(o, dict)
        ]
        if any(p is not None for p in patience) and data.get("selection") != "dev_exact_match":
            errors.append(
                "train.early_stopping_patience needs train.selection=dev_exact_match (it stops on the dev exact match)"
            )
        refits = [data.get("refit")] + [
            o.get("refit") for o in (data.get("per_primitive") or {}).values() if isinstance(o, dict)
        ]
        if any(r is True for r in refits) and data.get("selection") != "dev_exact_match":
            errors.append(
                "train.refit trains again for the epochs selection kept: it needs train.selection=dev_exact_match"
            )
        lookups = [data.get("lookup")] + [
            o.get("lookup") for o in (data.get("per_primitive") or {}).values() if isinstance(o, dict)
        ]
        if any(lookup is not None for lookup in lookups) and data.get("finetuning", "lora") != "full":
            errors.append(
                "train.per_primitive.<name>.lookup trains the primitive's full weights: it needs train.finetuning=full"
            )
        if data.get("resume") is True and data.get("overwrite") is True:
            errors.append("train.resume and train.overwrite exclude each other")
        if data.get("padding_free") is True and data.get("packing", False) is False:
            errors.append(
                "padding_free without packing cannot enforce max_length in trl; set packing=true "
                "(BFD packing is padding-free) or leave padding_free off"
            )
        max_steps = data.get("max_steps", -1)
        if isinstance(max_steps, int) and (max_steps == 0 or max_steps < -1):
            errors.append("max_steps must be -1 (use epochs) or > 0")
        strategy, eval_steps = data.get("eval_strategy", "epoch"), data.get("eval_steps")
        if strategy == "steps" and eval_steps is None:
            errors.append("eval_strategy 'steps' needs eval_steps")
        if strategy == "steps" and data.get("selection") == "dev_exact_match":
            # Selection evaluates and keeps a checkpoint at every epoch's end (training/train.py): steps would be ignored.
            errors.append(
                "train.eval_strategy 'steps' would be ignored: train.selection=dev_exact_match evaluates and keeps a "
                "checkpoint at each epoch's end; set train.selection=last to evaluate every train.eval_steps"
            )
        if strategy != "steps" and eval_steps is not None:
            errors.append(
                f"eval_steps is used only with eval_strategy 'steps' (it is {strategy!r}): set one, or leave eval_steps null"
            )
        return errors


class LoggingSettings(_Strict):
    backend: Literal["wandb", "none"]
    mode: Literal["offline", "online"] = Field(
        "offline", description="wandb mode; offline runs sync later with `wandb sync`"
    )
    project: str = "forethought"
    entity: str | None = None
    tags: list[str] = Field(default_factory=list)
    progress: bool = Field(True, description="rich progress display (plain log lines when not a terminal)")


class TrainConfig(_Strict):
    # base: only the base stage (built-here profiles: pretrain the base; gemma3_12b: record the checkpoint);
    # all: the base stage (reused when unchanged) and then the five adapters.
    primitive: Annotated[str, AfterValidator(name_validator(*RESERVED_NAMES))]
    dataset_dir: str = LAYOUT["data"]
    output_dir: str = LAYOUT["train"]
    seed: int = 0
    model: ModelConfig
    lora: LoraSettings
    train: TrainSettings
    logging: LoggingSettings

    @classmethod
    def _cross_errors(cls, data: dict[str, Any]) -> list[str]:
        train, model = _sub(data, "train"), _sub(data, "model")
        quantized = model.get("quantization") is not None
        errors = []
        if quantized and train.get("finetuning") == "full":
            errors.append(
                "model.quantization=4bit trains LoRA adapters on a frozen 4-bit base (QLoRA); train.finetuning=full "
                "would update the quantised weights themselves: use train.finetuning=lora or model.quantization=null"
            )
        if quantized and train.get("device") == "cpu":
            errors.append(QUANTIZATION_CPU + " (train.device=cpu)")
        if errors:
            return errors
        if train.get("finetuning") == "full" and model.get("profile") not in (None, *BUILT_HERE):
            return [
                f"train.finetuning=full is for the built-here profiles {BUILT_HERE}: a {model.get('profile')} model is fine-tuned "
                "with LoRA (five full copies of a 12B model would be ~120 GB, and vLLM serves one base with many adapters)"
            ]
        attn = model.get("attn_implementation", "sdpa")
        if (
            (train.get("packing") is True or train.get("padding_free") is True)
            and isinstance(attn, str)
            and attn not in PACKING_ATTENTION
        ):
            return [
                f"train.packing / train.padding_free need an attention implementation that separates packed sequences "
                f"({', '.join(PACKING_ATTENTION)}); model.attn_implementation is {attn!r}"
            ]
        return []

    def primitives(self) -> list[str]:
        """The adapters this run trains (none for primitive=base)."""
        if self.primitive == "base":
            return []
        return list(PRIMITIVE_NAMES) if self.primitive == "all" else [self.primitive]
