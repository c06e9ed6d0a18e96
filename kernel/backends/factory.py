"""Backend choice by config: ``backend=oracle|hf|openai`` (conf/backend/*.yaml)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr

from forethought.bundle.manifest import bundle_spec_hashes, bundle_tool_rendering
from forethought.config import LAYOUT
from forethought.errors import UserError

from ..runner import oracle_factory
from ..scenario import Solution
from ..specs import (  # a registered primitive's name, checked against the registry
    SPECS,
    TOOL_RENDERINGS,
    DemonstrationStore,
    PrimitiveName,
    active_store,
    active_tool_rendering,
    bundle_stores,
    set_stores,
    set_tool_rendering,
)
from .hf import HFBackend
from .openai_backend import OpenAIBackend, resolve_api_key

__all__ = [
    "BackendConfig",
    "Device",
    "PrimitiveName",
    "ServerURL",
    "backend_factory",
    "make_model_backend",
    "use_recording_rendering",
    "write_recording",
]

_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


def _device(device: str) -> str:
    if not _DEVICE.fullmatch(device):
        raise ValueError("expected auto, cpu, cuda or cuda:N (N a GPU index)")
    return device


def _server_url(url: str) -> str:
    if not re.fullmatch(r"https?://\S+", url):
        raise ValueError("expected an http:// or https:// URL")
    if "@" in url.split("://", 1)[1].split("/", 1)[0]:
        # Reports and traces record the URL: a key in it would be written with it (docs/serving.md, Credentials).
        raise ValueError(
            "a URL with a user name or key (user:key@host) is refused: reports and traces record the URL; put the key "
            "in $OPENAI_API_KEY (api_key_env names another variable) or a file (api_key_file)"
        )
    return url


# An OpenAI-compatible server's URL, without credentials in it.
ServerURL = Annotated[str, AfterValidator(_server_url)]

# A torch device for inference: auto (cuda when available, else cpu), cpu, cuda, or cuda:N.
Device = Annotated[str, AfterValidator(_device)]


class _B(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OracleBackendConfig(_B):
    name: Literal["oracle"] = "oracle"


class OpenAIBackendConfig(_B):
    name: Literal["openai"] = "openai"
    base_url: ServerURL = "http://localhost:8000/v1"
    # The key: from the environment variable api_key_env (OPENAI_API_KEY by default), or from the file
    # api_key_file; api_key itself is for a config file kept private. A SecretStr: --cfg, model_dump and
    # every file written show it as '**********', never its value (docs/serving.md, "Credentials").
    api_key: SecretStr | None = None
    api_key_env: str = Field("OPENAI_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    api_key_file: str | None = None
    models: dict[PrimitiveName, str] = Field(default_factory=dict)  # primitive -> served model (LoRA module) name
    # served model name -> its own server URL (a full-weight bundle: one vLLM server per primitive); others use base_url
    urls: dict[str, ServerURL] = Field(default_factory=dict)
    max_tokens: int = Field(512, ge=1)
    timeout_s: float = Field(120.0, gt=0)
    concurrency: int = Field(8, ge=1)
    # Contract-compiled decoding on the server (vLLM structured outputs; its guidance backend reads the schema's
    # x-guidance JSON format): each request carries its decoding schema (kernel/decoding.py).
    json_schema: bool = False
    # The bundle whose adapters the server serves: the prompts are rendered as its manifest says they were trained
    # (tool_rendering, and the demonstrations stores it carries, digests checked). Without it, the two below.
    bundle: str | None = None
    # How the prompts show tool lists: as the served adapters were trained (their bundle's manifest tool_rendering);
    # null: the bundle's, or full without one.
    tool_rendering: Literal["full", "compact", "focused", "valued"] | None = None
    # primitive -> the demonstrations store its served adapter was trained with (its bundle's
    # demonstrations/<primitive>.jsonl): the kernel retrieves from it as generate did (kernel/specs/demonstrations.py)
    demonstrations: dict[PrimitiveName, str] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # e.g. {"stop_token_ids": [106]}


class HFBackendConfig(_B):
    name: Literal["hf"] = "hf"
    bundle: str = LAYOUT["bundle"]
    device: Device = "auto"
    batch_size: int = Field(16, ge=1)
    max_new_tokens: int = Field(384, ge=1)
    constrained: bool | None = None  # JSON-schema-constrained decoding; null: as the bundle's gates were measured
    allow_smoke: bool = False  # load a bundle marked smoke (failed gates), with a loud warning


BackendConfig = Annotated[Union[OracleBackendConfig, OpenAIBackendConfig, HFBackendConfig], Field(discriminator="name")]


def backend_factory(cfg: Any, sol: Solution):
    """A per-turn backend factory for ``run_solution``; model backends are built once and shared."""
    if cfg.name == "oracle":
        if not sol.annotated:
            raise UserError(
                "the oracle backend needs an annotated scenario (tasks, order and calls on every turn)",
                sol.source_file or sol.id,
            )
        return oracle_factory(sol)
    backend = make_model_backend(cfg)
    return lambda i, turn: backend


def _served_rendering(cfg: OpenAIBackendConfig) -> tuple[str, list[DemonstrationStore]]:
    """How the served adapters' prompts were rendered: from their bundle (backend.bundle), or as configured."""
    if cfg.bundle is not None:
        rendering = bundle_tool_rendering(cfg.bundle)
        if cfg.tool_rendering not in (None, rendering):
            raise UserError(
                f"the bundle's adapters were trained with tool_rendering={rendering}, not {cfg.tool_rendering}: "
                "leave backend.tool_rendering out (the bundle's is used)",
                "backend.tool_rendering",
            )
        if cfg.demonstrations:
            raise UserError(
                "the bundle names its demonstrations stores: leave backend.demonstrations out, or backend.bundle",
                "backend.demonstrations",
            )
        return rendering, bundle_stores(cfg.bundle)
    stores = [DemonstrationStore.read(path) for path in cfg.demonstrations.values()]
    for (primitive, path), store in zip(cfg.demonstrations.items(), stores, strict=True):
        if store.primitive != primitive:
            raise UserError(f"backend.demonstrations.{primitive}: the store is {store.primitive!r}'s", path)
    return cfg.tool_rendering or "full", stores


def _backend_stores(cfg: Any) -> list[DemonstrationStore]:
    """The demonstrations stores ``cfg`` names (its bundle's, or the openai backend's files), none for the oracle
    or a bundle that is not there."""
    if cfg.name == "openai":
        return _served_rendering(cfg)[1]
    if cfg.name == "hf" and (Path(cfg.bundle) / "manifest.json").is_file():
        return bundle_stores(cfg.bundle)
    return []


def write_recording(recorder: Any, path: Path) -> None:
    """Write a recording with a header saying how this process rendered its prompts (the tool rendering, the
    demonstrations stores' digests): its keys are hashes of the prompts, so a replay must render them the same way."""
    stores = {name: active_store(name) for name in SPECS}
    recorder.rendering = {
        "tool_rendering": active_tool_rendering(),
        "demonstrations": {name: store.digest() for name, store in stores.items() if store is not None},
    }
    recorder.save(path)


def use_recording_rendering(recorder: Any, cfg: Any) -> None:
    """Render prompts as the recorded run did (its header), without loading a model: a strict replay looks answers
    up by the rendered prompt. A store the recording's prompts retrieved from must be one ``cfg`` names (its bundle),
    digest for digest; a recording from before headers said so was rendered with the defaults."""
    rendering = recorder.rendering or {}
    style = rendering.get("tool_rendering", "full")
    if style not in TOOL_RENDERINGS:
        raise UserError(f"the recording's tool_rendering {style!r} is not one this forethought renders", "replay")
    wanted = rendering.get("demonstrations") or {}
    if not isinstance(wanted, dict) or not all(isinstance(d, str) for d in wanted.values()):
        raise UserError("the recording's rendering.demonstrations must map primitives to store digests", "replay")
    offered = {store.primitive: store for store in _backend_stores(cfg)} if wanted else {}
    missing = sorted(p for p, digest in wanted.items() if p not in offered or offered[p].digest() != digest)
    if missing:
        raise UserError(
            f"the recorded {', '.join(missing)} prompts showed demonstrations from a store the backend does not name "
            f"(sha256 {str(wanted[missing[0]])[:12]}...): name the bundle the recording was made with "
            "(backend.bundle=...)",
            "replay",
        )
    set_tool_rendering(style)
    set_stores([offered[p] for p in sorted(wanted)])


def make_model_backend(cfg: Any):
    if cfg.name == "openai":
        rendering, stores = _served_rendering(cfg)
        set_tool_rendering(rendering)
        set_stores(stores)
        if cfg.bundle is not None:  # prompts as this code renders them must be the ones the served adapters learned
            stale = {p: h for p, h in bundle_spec_hashes(cfg.bundle).items() if p in SPECS and SPECS[p].spec_hash != h}
            if stale:
                raise UserError(
                    f"the bundle's adapters of {', '.join(sorted(stale))} were trained on prompts of another spec "
                    "(their spec hash is not this forethought's): the served prompts would not be the ones they "
                    "learned; serve adapters trained with this version",
                    f"{cfg.bundle}/manifest.json",
                )
        return OpenAIBackend(
            cfg.base_url,
            api_key=resolve_api_key(cfg, "backend"),
            models=cfg.models,
            max_tokens=cfg.max_tokens,
            timeout_s=cfg.timeout_s,
            concurrency=cfg.concurrency,
            json_schema=cfg.json_schema,
            extra_body=cfg.extra_body,
            urls=cfg.urls,
        )
    if cfg.name == "hf":
        return HFBackend.from_bundle(
            cfg.bundle,
            device=cfg.device,
            batch_size=cfg.batch_size,
            max_new_tokens=cfg.max_new_tokens,
            constrained=cfg.constrained,
            allow_smoke=cfg.allow_smoke,
        )
    raise ValueError(f"unknown backend {cfg.name!r}")
