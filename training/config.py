"""Typed schema of ``conf/train.yaml`` and its groups (model, lora, train, logging).

Every model is strict (``strict=True``: no string-to-number coercion) and closed
(``extra="forbid"``), so a misspelt key or a value of the wrong type is an error
listed with all the others before anything runs. This module imports no torch.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PRIMITIVES = ("decompose", "get_order", "check_prerequisites", "match_func", "match_fill")
PrimitiveName = Literal["decompose", "get_order", "check_prerequisites", "match_func", "match_fill"]

# Attention kernels that keep packed / padding-free sequences apart (they read the
# per-sequence boundaries). Eager attention would build a dense mask over the whole
# packed row; it is refused rather than silently slow or wrong.
PACKING_ATTENTION = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")

_FP16_REFUSED = (
    "float16 is refused for Gemma 3: its activations exceed fp16's range (loss 0 / grad_norm nan, trl #3236); "
    "use bfloat16 on GPU (float32 on CPU)"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


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

    @model_validator(mode="after")
    def _heads(self) -> TinyShape:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        return self


class ModelConfig(_Strict):
    profile: Literal["tiny", "gemma3_12b"]
    path: str | None = Field(None, description="local checkpoint folder (gemma3_12b); never fetched from a hub")
    dtype: Literal["auto", "bfloat16", "float32"] = Field(
        "auto", description="auto: float32 on CPU, bfloat16 on GPU (tiny); gemma3_12b accepts only auto (= bfloat16) or bfloat16"
    )
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"] = "sdpa"
    tiny: TinyShape | None = None

    @field_validator("dtype", mode="before")
    @classmethod
    def _no_fp16(cls, v: object) -> object:
        if isinstance(v, str) and v.lower() in ("float16", "fp16", "half"):
            raise ValueError(_FP16_REFUSED)
        return v

    @model_validator(mode="after")
    def _profile(self) -> ModelConfig:
        if self.profile == "tiny" and self.tiny is None:
            raise ValueError("model.tiny (the tiny shape) is required for profile 'tiny'")
        if self.profile != "tiny" and self.tiny is not None:
            raise ValueError(f"model.tiny is only for profile 'tiny' (profile is {self.profile!r})")
        if self.profile == "gemma3_12b" and self.dtype not in ("auto", "bfloat16"):
            raise ValueError(
                f"model.dtype={self.dtype} is refused for the gemma3_12b profile: bf16 only ('auto' means bfloat16). "
                "float32 doubles the memory of a 12B base for no gain in LoRA training, and float16 overflows on Gemma 3"
            )
        return self


class LoraSettings(_Strict):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    # Module names inside each decoder layer of the *language model*; they are
    # turned into a regex anchored on the text model's path, so a multimodal
    # checkpoint's vision tower is never wrapped.
    target_modules: list[Literal["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], min_length=1
    )


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
    packing: bool = Field(False, description="BFD packing into rows of max_length tokens (padding-free); per_device_batch_size then counts rows")
    padding_free: bool = Field(False, description="implied by packing; alone it is refused (trl cannot enforce max_length then)")
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
        False, description="delete the run folders of the primitives being trained first (with primitive=all also the tiny base)"
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dataloader_num_workers: int = Field(0, ge=0)
    cpu_threads: int | None = Field(
        None, ge=1, description="torch threads on CPU (null: torch's default); 1 is much faster on a machine shared with other jobs"
    )
    max_train_examples: int | None = Field(None, ge=1, description="use only the first N train examples")
    max_eval_examples: int | None = Field(None, ge=1, description="use only the first N validation examples")

    @model_validator(mode="after")
    def _steps(self) -> TrainSettings:
        if self.resume and self.overwrite:
            raise ValueError("train.resume and train.overwrite exclude each other")
        if self.padding_free and not self.packing:
            raise ValueError(
                "padding_free without packing cannot enforce max_length in trl; set packing=true "
                "(BFD packing is padding-free) or leave padding_free off"
            )
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError("max_steps must be -1 (use epochs) or > 0")
        if self.eval_strategy == "steps" and self.eval_steps is None:
            raise ValueError("eval_strategy 'steps' needs eval_steps")
        return self


class LoggingSettings(_Strict):
    backend: Literal["wandb", "none"]
    mode: Literal["offline", "online"] = Field("offline", description="wandb mode; offline runs sync later with `wandb sync`")
    project: str = "forethought"
    entity: str | None = None
    tags: list[str] = Field(default_factory=list)
    progress: bool = Field(True, description="rich progress display (plain log lines when not a terminal)")


class TrainConfig(_Strict):
    primitive: Literal["decompose", "get_order", "check_prerequisites", "match_func", "match_fill", "all"]
    dataset_dir: str = "runs/data"
    output_dir: str = "runs/train"
    seed: int = 0
    model: ModelConfig
    lora: LoraSettings
    train: TrainSettings
    logging: LoggingSettings

    @model_validator(mode="after")
    def _combos(self) -> TrainConfig:
        if (self.train.packing or self.train.padding_free) and self.model.attn_implementation not in PACKING_ATTENTION:
            raise ValueError(
                f"train.packing / train.padding_free need an attention implementation that separates packed sequences "
                f"({', '.join(PACKING_ATTENTION)}); model.attn_implementation is {self.model.attn_implementation!r}"
            )
        return self

    def primitives(self) -> list[str]:
        return list(PRIMITIVES) if self.primitive == "all" else [self.primitive]
