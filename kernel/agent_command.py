"""``forethought agent tools=... [conversation=FILE] backend=openai|hf``: the kernel on your own tools, a conversation of
user turns, the scratchpad S carried from one to the next (kernel/session.py).

``tools`` names them:

- ``module:attr`` — a Python object importable from the working directory: a list of functions, an object whose
  ``@tool`` methods hold its state, a class of them (made with no arguments), or any object with the environment
  interface (docs/kernel.md, "Your own tools");
- ``domain:<name>`` — a domain's tools in its initial state: a built-in one, or yours (``forethought new-domain``,
  found on ``FORETHOUGHT_DOMAINS``);
- ``mcp:<command line>`` — an MCP server started over stdio (``mcp:python server.py``);
- ``mcp:http://host/mcp`` — an MCP server over streamable HTTP.

``annotations`` (a YAML sidecar, kernel/registry/annotations.py) adds what the tools' format cannot say.
``conversation`` is a text file, one user turn per line (blank lines and ``#`` comments skipped); without one,
turns are read from the terminal until an empty line or end of input. The run writes what ``forethought run``
writes: ``turns.json``, ``calls.jsonl``, ``final_state.json``, ``trace.jsonl``, ``trace.html`` (and
``recording.jsonl`` with ``record=true``; ``replay=`` answers from one).
"""

from __future__ import annotations

import importlib
import shlex
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from forethought.errors import UserError

from .backends.factory import (
    BackendConfig,
    HFBackendConfig,
    make_model_backend,
    use_recording_rendering,
    write_recording,
)
from .run_command import KernelSettings, ReplayOnly
from .secret_arguments import secret_values, shown_arguments, write_run_files
from .session import Session


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tools: str | None = None
    annotations: str | None = None
    conversation: str | None = None
    output_dir: str = "runs/agent"
    trace: str = Field("full", pattern="^(full|steps|off)$")
    kernel: KernelSettings = Field(default_factory=KernelSettings)
    backend: BackendConfig = Field(default_factory=HFBackendConfig)
    record: bool = False
    replay: str | None = None
    replay_mode: Literal["strict", "replay"] = "strict"
    tool_timeout_s: float = Field(30.0, gt=0)  # an MCP server's answer to one call
    backend_errors: Literal["fail", "count"] = "fail"
    trace_max_mb: int = Field(64, ge=1)

    @field_validator("backend")
    @classmethod
    def _a_model(cls, value: Any) -> Any:
        if value.name == "oracle":
            raise ValueError(
                "the oracle answers from a solution's annotations; a conversation has none: backend=hf or openai"
            )
        return value


def load_tools(spec: str, annotations: str | None, timeout_s: float) -> Any:
    """The environment ``spec`` names (see the module doc); a located UserError otherwise."""
    if spec.startswith("mcp:"):
        from .mcp_tools import McpTools, ToolServerError

        target = spec[4:].strip()
        if not target:
            raise UserError("mcp: needs a server command or URL (tools=mcp:python server.py)", "tools")
        try:
            if target.startswith(("http://", "https://")):
                if "@" in target.split("://", 1)[1].split("/", 1)[0]:
                    # traces, reports and errors name the server: a key in its URL would be written with it
                    raise UserError("an MCP URL with a user name or key (user:key@host) is refused (the value is not "
                                    "shown): give the server its credentials another way", "tools")  # fmt: skip
                return McpTools(url=target, annotations=annotations, timeout_s=timeout_s)
            return McpTools(shlex.split(target), annotations=annotations, timeout_s=timeout_s)
        except ToolServerError as exc:  # the server named cannot be started or reached: said in one line, exit 2
            raise UserError(exc.message, "tools") from None
        except ValueError as exc:  # shlex: an unclosed quote
            raise UserError(f"cannot read the server command: {exc}", "tools") from None
    if spec.startswith("domain:"):
        # a domain (built-in, or yours on FORETHOUGHT_DOMAINS) in its initial state: the tools its solutions use
        from .domains import available
        from .environment import Environment

        name = spec[len("domain:") :].strip()
        if name not in available():
            raise UserError(f"no domain {name!r} (available: {', '.join(available())})", "tools")
        env: Any = Environment([name], {})
        return _annotated(env, annotations)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"expected module:attr, domain:<name>, mcp:<command> or mcp:<url>, got {spec!r}", "tools")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # your module, from where you run the command
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            raise UserError(
                f"no module {module_name!r} (run from the folder that holds it, or install it)", "tools"
            ) from None
        raise UserError(f"module {module_name!r} imports {exc.name!r}, which is not installed", "tools") from None
    except (
        Exception
    ) as exc:  # the user's module failed to import: a SyntaxError, an exception at import, a relative name
        raise UserError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}", "tools") from None
    if not hasattr(module, attr):
        raise UserError(f"module {module_name!r} has no {attr!r}", "tools")
    obj = getattr(module, attr)
    from .python_tools import PythonTools

    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:
            raise UserError(f"{module_name}:{attr}() failed: {type(exc).__name__}: {exc}", "tools") from None
    if all(callable(getattr(obj, m, None)) for m in ("registry", "stage", "commit", "tool", "snapshot")):
        env = obj
    else:
        try:
            env = PythonTools(list(obj) if isinstance(obj, (list, tuple)) else obj)
        except (TypeError, ValueError) as exc:
            raise UserError(str(exc), f"tools ({spec})") from None
    return _annotated(env, annotations)


def _annotated(env: Any, annotations: str | None) -> Any:
    if annotations is not None:
        from .registry.annotations import annotate

        registry = annotate(env.registry(), annotations)
        env.registry = lambda: registry  # the annotated registry is the one the session offers
    return env


def conversation_turns(path: str | None) -> list[str] | None:
    """The turns of a conversation file, or None to read them from the terminal."""
    if path is None:
        return None
    from forethought.bounded import read_bounded

    file_path = Path(path)
    try:
        text = read_bounded(file_path, str(file_path)).decode(
            "utf-8"
        )  # a FIFO or /dev/zero is refused at the size bound
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read the conversation: {getattr(exc, 'strerror', None) or exc}", str(file_path)
        ) from None
    turns = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not turns:
        raise UserError("the conversation holds no turn (one user turn a line)", str(file_path))
    return turns


def _read_terminal() -> Any:
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            return
        if not line:
            return
        yield line


def run_agent(cfg: AgentConfig) -> tuple[Path, Session]:
    from forethought.errors import check_output_dir

    from .run_command import make_recorder

    if cfg.tools is None:
        raise UserError("give the tools: tools=module:attr | mcp:<command> | mcp:<url>", "tools")
    if cfg.record and cfg.replay is not None:
        raise UserError("record=true and replay=... exclude each other", "record")
    turns = conversation_turns(cfg.conversation)  # the inputs first: a refusal writes nothing
    recorder = make_recorder(cfg)  # type: ignore[arg-type]
    check_output_dir(cfg.output_dir, "output_dir")
    if cfg.replay is not None and cfg.replay_mode == "strict":
        use_recording_rendering(recorder, cfg.backend)  # prompts as the recorded run rendered them: the lookup keys
        backend: Any = ReplayOnly()
    else:
        backend = make_model_backend(cfg.backend)
    tools = load_tools(cfg.tools, cfg.annotations, cfg.tool_timeout_s)
    session = Session(tools, backend, config=cfg.kernel.build(), trace=cfg.trace, recorder=recorder)
    try:
        for user in turns if turns is not None else _read_terminal():
            res = session.send(user)
            status = (
                res.backend_error["message"]
                if res.backend_error
                else ", ".join(f"{k}={o.status}" for k, o in res.outcomes.items())
            )
            print(f"turn {res.index + 1}: {status or 'no task'}")
            for call in res.committed_calls:
                print(f"  {call.tool}({shown_arguments(call, secret_values(session.turns))})")
    finally:
        out = Path(cfg.output_dir)
        _write(out, cfg, session)
        close = getattr(tools, "close", None)
        if callable(close):
            close()
    return out, session


def _write(out: Path, cfg: AgentConfig, session: Session) -> None:
    if cfg.record and session.recorder is not None:
        write_recording(session.recorder, out / "recording.jsonl")
    meta = {"tools": cfg.tools, "backend": "replay" if cfg.replay else cfg.backend.name, "cvc": cfg.kernel.cvc}
    write_run_files(
        out,
        session.turns,
        session.traces,
        session.snapshot(),
        title=f"agent: {cfg.tools}",
        meta=meta,
        trace_max_bytes=cfg.trace_max_mb * 1024 * 1024,
    )


def cli(args: list[str]) -> int:
    from forethought.arguments import load, split_args

    parsed = split_args(args)
    cfg = load("agent", parsed, AgentConfig)
    if cfg is None:
        return 0
    if parsed.positional:
        raise UserError(
            f"unexpected argument(s) {parsed.positional}: forethought agent tools=... [conversation=FILE]", "agent"
        )
    out, session = run_agent(cfg)
    print(
        f"wrote {out}/ (turns.json, calls.jsonl, final_state.json, trace.jsonl, trace.html{', recording.jsonl' if cfg.record else ''})"
    )
    failed = [t for t in session.turns if t.backend_error]
    if failed and cfg.backend_errors == "fail":
        print(f"error: {len(failed)} of {len(session.turns)} turn(s) got no answer (first: {failed[0].backend_error['message']})",
              file=sys.stderr)  # fmt: skip
        return 1
    return 1 if any(t.halted for t in session.turns) else 0
