"""An MCP server's tools as the kernel's environment, through the official ``mcp`` Python SDK (stdio or streamable HTTP).

``tools/list`` becomes the registry (the MCP importer, kernel/registry/importers.py: annotations -> side-effect flags),
``tools/call`` runs a call, ``isError`` is a failed call. An MCP server is a live world: a call happens when it runs,
so the kernel's rules for live tools apply (docs/kernel.md, "Your own tools": preconditions before the call,
postconditions after it, a failed one recorded and the task halted, never committed).

The SDK is asynchronous; the kernel is not. One background event loop (an anyio blocking portal) holds the
connection for the environment's lifetime, and each call waits for its reply at most ``timeout_s``. A server that
dies, hangs or cannot be started raises :class:`ToolServerError`: the turn stops there, with nothing committed for
the call that did not answer (the commands exit 1: a failure of the run, not of the input).
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

from forethought.errors import UserError
from forethought.primitives import BackendError

from .python_tools import LiveCall
from .registry import Registry
from .registry.importers import parse_registry


class ToolServerError(BackendError):
    """The MCP server could not be reached, died, or did not answer in time. Like a model backend that does not answer,
    it is no tool result and no contract violation: the turn stops there (``TurnResult.backend_error``), with nothing
    committed for the call, and the commands exit 1."""

    transient = False  # the call may have happened: never re-sent


class McpTools:
    """``McpTools(command=["python", "server.py"])`` (stdio) or ``McpTools(url="http://host/mcp")`` (streamable HTTP);
    use it as a context manager, or call :meth:`close`."""

    live = True

    def __init__(
        self,
        command: list[str] | None = None,
        *,
        url: str | None = None,
        timeout_s: float = 30.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        annotations: str | os.PathLike[str] | None = None,
    ):
        if (command is None) == (url is None):
            raise ValueError("McpTools: give a server command (stdio) or a url (streamable HTTP), not both")
        from .registry.annotations import load_annotations

        self._annotations = (
            load_annotations(annotations) if annotations is not None else None
        )  # checked before starting
        from anyio.from_thread import start_blocking_portal

        self.where = " ".join(command) if command else str(url)
        self.name = name or (os.path.basename(command[0]) if command else str(url))
        self.timeout_s = timeout_s
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._closing: Any = None  # an anyio Event, set to end the connection's task
        self._served: Any = None
        try:
            self._served, (self._session, listed) = self._portal.start_task(self._serve, command, url, env, cwd)
        except BaseException as exc:
            self._shutdown()
            raise ToolServerError(f"MCP server {self.where}: cannot start or initialise: {_message(exc)}") from None
        try:
            registry = Registry(
                parse_registry({"tools": listed}, fmt="mcp", source=f"mcp:{self.where}"), name=self.name
            )
            if self._annotations is not None:
                from .registry.annotations import annotate

                registry = annotate(registry, self._annotations)
        except BaseException:  # a tool list or annotations refused: the server is not left running
            self._shutdown()
            raise
        self._registry = registry

    async def _serve(self, command: list[str] | None, url: str | None, env: dict[str, str] | None, cwd: str | None,
                     *, task_status: Any) -> None:  # fmt: skip
        """The connection's own task: the SDK's transports hold task groups, which must be entered and left by one task."""
        import anyio
        from mcp import ClientSession, StdioServerParameters

        async with AsyncExitStack() as stack:
            if command is not None:
                from mcp.client.stdio import stdio_client

                params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env, cwd=cwd)
                # the server's own log (a traceback of a tool that raised) is not the kernel's output
                errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            else:
                from mcp.client.streamable_http import streamable_http_client

                read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(ClientSession(read, write, read_timeout_seconds=self.timeout_s))
            with anyio.fail_after(self.timeout_s):
                await session.initialize()
                listed = await session.list_tools()
            self._closing = anyio.Event()
            task_status.started(
                (session, [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools])
            )
            await self._closing.wait()

    async def _call(self, name: str, args: dict[str, Any]) -> Any:
        import anyio

        with anyio.fail_after(self.timeout_s):
            return await self._session.call_tool(name, args)

    # ------------------------------------------------------------ the environment interface
    def registry(self) -> Registry:
        return self._registry

    def tool(self, name: str) -> Any:
        """The annotations' postconditions (``expect``) of a tool, if any; ToolGate also checks the server's declared
        output schema."""
        from types import SimpleNamespace

        from .registry.annotations import expectation_checks

        checks = expectation_checks(self._annotations, name)
        return SimpleNamespace(post=checks) if checks else None

    def stage(self, name: str, args: dict[str, Any]) -> tuple[Any, Any]:
        """``tools/call``: the result (its structured content, else its text, JSON-decoded where it is JSON) and a
        :class:`LiveCall`; ``isError`` is ``{"error": text}`` with nothing staged."""
        if self._closing is None:
            raise ToolServerError(f"MCP server {self.where}: the connection is closed")
        try:
            reply = self._portal.call(self._call, name, dict(args))
        except BaseException as exc:
            raise ToolServerError(
                f"MCP server {self.where}: tools/call {name} got no answer: {_message(exc)}"
            ) from None
        data = reply.model_dump(mode="json", by_alias=True, exclude_none=True)
        text = "\n".join(c.get("text", "") for c in data.get("content", []) if c.get("type") == "text")
        if data.get("isError"):
            return {"error": text or "the server reported an error"}, None
        if data.get("structuredContent") is not None:
            return data["structuredContent"], LiveCall(name)
        from forethought.bounded import loads_json

        try:  # strict: a reply with NaN or a key twice is text, not data the kernel would bind from
            return loads_json(text, f"{self.where}: tools/call {name}"), LiveCall(name)
        except (ValueError, UserError):
            return {"result": text}, LiveCall(name)

    def commit(self, name: str, staged: Any) -> None:
        """Nothing to do: the server did it when it was called."""

    def snapshot(self) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------ lifetime
    def close(self) -> None:
        self._shutdown()

    def _shutdown(self) -> None:
        closing, self._closing = self._closing, None
        if closing is not None:
            try:
                self._portal.call(closing.set)
                self._served.result(timeout=self.timeout_s)
            except BaseException:  # a dead server's streams may fail to close; the process is gone either way
                pass
        if self._portal_cm is not None:
            try:
                self._portal_cm.__exit__(None, None, None)
            except BaseException:
                pass
            self._portal_cm = None

    def __enter__(self) -> McpTools:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _message(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)  # an exception group from the SDK's task groups
    if inner:
        return "; ".join(_message(e) for e in inner)
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
