"""What the two benchmark commands share: ``bench bfcl`` (:mod:`.bfcl_run`) and ``bench tau2`` (:mod:`.tau2_run`).

Both run the kernel (``kernel``), the kernel with a base model answering (``responder``) and the base model
alone (``vanilla``), with CVC on, off or both, record or replay the kernel's primitives, and refuse a run
that cannot start before any folder is made. The settings of a run, the checks before it, the kernel's
backend, its label in the report, a kernel turn whose recording misses, one step of a vanilla loop and the
exit on unanswered turns are the same logic in both, so they live here once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forethought.errors import UserError
from forethought.kernel.backends.factory import (
    BackendConfig,
    HFBackendConfig,
    make_model_backend,
    use_recording_rendering,
    write_recording,
)
from forethought.kernel.backends.openai_backend import BackendError
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig, TurnResult
from forethought.kernel.run_command import (  # the record/replay of `forethought run`
    KernelSettings,
    ReplayOnly,
    make_recorder,
)
from forethought.primitives import Cache, ReplayMissError, Trace

from .responder import Endpoint, ResponderConfig

# A setting of a run: its folder, its summary key and its label in the report, in the report's order.
SETTINGS = {
    "cvc_on": "kernel, CVC on",
    "cvc_off": "kernel, CVC off",
    "responder_cvc_on": "responder, CVC on",
    "responder_cvc_off": "responder, CVC off",
    "vanilla": "vanilla (no kernel)",
}


def setting_key(mode: str, cvc: bool | None) -> str:
    if mode == "vanilla":
        return "vanilla"
    return ("responder_" if mode == "responder" else "") + ("cvc_on" if cvc else "cvc_off")


class RunSettings(BaseModel):
    """The keys both commands take; each command's config adds what to run (its mode, entries or tasks)."""

    model_config = ConfigDict(extra="forbid")
    mode: list[str] = Field(default_factory=lambda: ["kernel"])  # each command narrows it to its own modes
    output_dir: str | None = None  # null: runs/bench/<benchmark>_<mode>[+<mode>...]
    cvc: Literal["both"] | None = None  # both: run with CVC on and off; null: as kernel.cvc says
    trace: str = Field("steps", pattern="^(full|steps|off)$")
    kernel: KernelSettings = Field(default_factory=KernelSettings)
    backend: BackendConfig = Field(default_factory=HFBackendConfig)
    responder: ResponderConfig = Field(default_factory=ResponderConfig)  # the base model (responder and vanilla modes)
    record: bool = False
    replay: str | None = None
    replay_mode: Literal["strict", "replay"] = "strict"
    cache: bool = False
    backend_errors: Literal["fail", "count"] = "fail"
    trace_max_mb: int = Field(64, ge=1)

    def variants(self) -> list[bool]:
        return [True, False] if self.cvc == "both" else [self.kernel.cvc]


def mode_list(value: Any, available: tuple[str, ...], lists: str, aliases: dict[str, str] | None = None) -> Any:
    """``mode=``: one mode or a list of them, as a list (``aliases`` renamed); an unknown mode, none, or one twice is an
    error (``lists`` says which modes may go side by side). A value of another type is left to pydantic's own error."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list):
        return value
    values = [(aliases or {}).get(v, v) for v in values]
    unknown = [v for v in values if v not in available]
    if unknown:
        raise ValueError(f"unknown mode {unknown[0]!r}; available: {', '.join(available)} (or {lists}, side by side)")
    if not values:
        raise ValueError(f"name at least one mode: {', '.join(available)}")
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise ValueError(f"modes listed more than once: {dup}")
    return values


def recorded(command: str | None) -> str | None:
    """The command line as the summary and the report record it: a secret in it masked (docs/guarantees.md)."""
    from forethought.config import mask_secrets

    return None if command is None else mask_secrets(command)


def strict_replay(cfg: RunSettings) -> bool:
    return cfg.replay is not None and cfg.replay_mode == "strict"


def refuse_oracle(cfg: RunSettings, items: str) -> None:
    """The oracle answers from a solution's annotations, which a benchmark's ``items`` do not carry."""
    if cfg.backend.name == "oracle" and not strict_replay(cfg):
        raise UserError(
            f"{items} carry no annotations for the oracle backend to answer from; "
            "use backend=hf (a bundle), backend=openai (a served model) or replay=RECORDING",
            "backend",
        )


def make_endpoint(cfg: RunSettings) -> Endpoint:
    """The base model's endpoint (responder and vanilla modes): responder.base_url, else the openai backend's URL."""
    url = cfg.responder.base_url or (cfg.backend.base_url if cfg.backend.name == "openai" else None)  # type: ignore[union-attr]
    if url is None:
        raise UserError(
            "the responder and vanilla modes ask a base model at an OpenAI-compatible URL; give it as "
            "responder.base_url=http://HOST:PORT/v1 (docs/serving.md)",
            "responder.base_url",
        )
    return Endpoint(cfg.responder, url)


def preflight(cfg: RunSettings, backend: Any, endpoint: Any, items: str) -> tuple[list[str], Any]:
    """The checks a run makes before any folder or model: (the modes that run the kernel, the base model's endpoint).
    A given ``backend`` or ``endpoint`` (tests) is not checked; a missing URL or key file is reported here."""
    if cfg.record and cfg.replay is not None:
        raise UserError("record=true and replay=... exclude each other", "record")
    kernel_modes = [m for m in cfg.mode if m in ("kernel", "responder")]
    if kernel_modes and backend is None:
        refuse_oracle(cfg, items)
    if any(m in ("responder", "vanilla") for m in cfg.mode) and endpoint is None:
        endpoint = make_endpoint(cfg)
    return kernel_modes, endpoint


def kernel_side(cfg: RunSettings, backend: Any, kernel_modes: list[str]) -> tuple[Any, Any, Cache | None]:
    """(recorder, kernel backend, cache): a strict replay loads no model, every answer comes from the recording."""
    recorder = make_recorder(cfg) if kernel_modes else None  # type: ignore[arg-type]
    if kernel_modes and backend is None:
        if strict_replay(cfg):
            use_recording_rendering(recorder, cfg.backend)  # prompts as the recorded run rendered them: the lookup keys
            backend = ReplayOnly()
        else:
            backend = make_model_backend(cfg.backend)
    return recorder, backend, Cache() if cfg.cache else None


def settings(cfg: RunSettings) -> Iterator[tuple[str, str, Kernel]]:
    """(mode, setting key, its kernel) for each mode in order and, but for vanilla (no kernel), each CVC variant."""
    for mode in cfg.mode:
        for cvc in cfg.variants() if mode != "vanilla" else [None]:
            yield mode, setting_key(mode, cvc), Kernel(KernelConfig(**{**cfg.kernel.model_dump(), "cvc": bool(cvc)}))


def save_recording(cfg: RunSettings, recorder: Any, out: Path) -> None:
    if cfg.record and recorder is not None:
        write_recording(recorder, out / "recording.jsonl")


def backend_label(cfg: RunSettings, backend: Any, *, bundle: bool = False) -> dict[str, Any]:
    """The kernel backend as the report names it; ``bundle``: with the bundle an hf backend loaded."""
    if isinstance(backend, ReplayOnly):
        return {"name": "replay", "recording": cfg.replay}
    label: dict[str, Any] = {"name": getattr(backend, "name", cfg.backend.name)}
    path = getattr(getattr(backend, "bundle", None), "path", None) if bundle else None
    if path:
        label["bundle"] = str(path)
    if cfg.backend.name == "openai" and label["name"] == "openai":
        label["base_url"] = cfg.backend.base_url  # type: ignore[union-attr]
    if cfg.replay is not None:
        label["replay"] = cfg.replay
    return label


def kernel_turn(kernel: Kernel, *, where: str, replay: str | None, **turn: Any) -> tuple[TurnResult, Trace]:
    """``kernel.run_turn(**turn)``; a strict replay's missing answer becomes a located error naming ``where``."""
    try:
        return kernel.run_turn(**turn)
    except ReplayMissError as exc:
        raise UserError(f"{exc} ({where}, cvc={kernel.config.cvc})", str(replay)) from None


def vanilla_step(
    endpoint: Endpoint,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    row: dict[str, Any],
    step: int,
    extra: dict[str, Any] | None = None,
) -> tuple[str, list[Any], str | None]:
    """One model call of a vanilla loop: (its text, its tool calls, why it gave none: None when it answered).
    A tool_calls that is not a list is a parse error of ``row`` (the step goes on with no call)."""
    try:
        reply = endpoint.chat(messages, tools, extra=extra)
        message = reply["choices"][0]["message"]
    except BackendError as exc:
        return "", [], str(exc)
    except (KeyError, IndexError, TypeError):
        return "", [], f"reply has no choices[0].message: {json.dumps(reply, default=str)[:200]}"
    if not isinstance(message, dict):
        return "", [], "choices[0].message is not an object"
    tool_calls = message.get("tool_calls") or []
    if not isinstance(tool_calls, list):
        row["parse_errors"].append(f"step {step}: tool_calls: expected a list, got {type(tool_calls).__name__}")
        tool_calls = []
    content = message.get("content") if isinstance(message.get("content"), str) else ""
    row["text"] = content[:1000]
    return content, tool_calls, None


def exit_on_backend_errors(cfg: RunSettings, count: int, what: str, first: str) -> int:
    """Report ``count`` unanswered ``what`` (never scored); exit 1 unless ``backend_errors=count``."""
    print(
        f"error: {count} {what} got no answer from the backend and were not scored (first: {first})"
        + ("" if cfg.backend_errors == "fail" else "; counted (backend_errors=count)"),
        file=sys.stderr,
    )
    return 1 if cfg.backend_errors == "fail" else 0
