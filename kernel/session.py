"""A conversation with the kernel over your own tools: the scratchpad and the world carried from turn to turn.

    from forethought.kernel.python_tools import PythonTools, tool
    from forethought.kernel.session import Session

    session = Session(PythonTools(CalendarTools()), backend)
    result = session.send("Cancel my 3 pm meeting")
    result.committed_calls, result.outcomes, session.traces[-1]

``tools`` is any environment the kernel runs on (docs/kernel.md, "Your own tools"): :class:`PythonTools`, an MCP
server's tools, a simulated domain's :class:`~forethought.kernel.environment.Environment`; its registry is
``tools.registry()`` unless one is given. ``backend`` answers the five primitives (a bundle through the hf
backend, an OpenAI-compatible endpoint, a scripted backend in tests).
"""

from __future__ import annotations

from typing import Any

from forethought.primitives import Backend, Recorder, Trace
from forethought.primitives.store import Cache

from .program import Kernel
from .records import KernelConfig, TurnResult
from .registry import Registry
from .scratchpad import Scratchpad


class Session:
    """Turns of one conversation: :meth:`send` runs the kernel on a request with the scratchpad S as the earlier turns
    left it; every result and trace is kept (``turns``, ``traces``)."""

    def __init__(
        self,
        tools: Any,
        backend: Backend,
        *,
        config: KernelConfig | None = None,
        registry: Registry | None = None,
        trace: str = "full",
        recorder: Recorder | None = None,
        cache: Cache | None = None,
        scratchpad_config: dict[str, Any] | None = None,
    ):
        for method in ("stage", "commit", "tool", "snapshot"):
            if not callable(getattr(tools, method, None)):
                raise TypeError(
                    f"Session: tools has no {method}() (the environment interface: docs/kernel.md, 'Your own tools')"
                )
        self.tools = tools
        self.backend = backend
        self.kernel = Kernel(config or KernelConfig())
        self.registry = registry if registry is not None else tools.registry()
        self.scratchpad = Scratchpad(scratchpad_config or {})
        self.trace_level, self.recorder, self.cache = trace, recorder, cache
        self.turns: list[TurnResult] = []
        self.traces: list[Trace] = []

    def send(
        self,
        user: str,
        *,
        context: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        backend: Backend | None = None,
    ) -> TurnResult:
        """One turn: the request ``user`` (with the turn's context τ, if any); returns what the kernel did. ``backend``
        answers this turn instead of the session's (an oracle is one per annotated turn)."""
        result, trace = self.kernel.run_turn(
            user=user,
            env=self.tools,
            scratchpad=self.scratchpad,
            registry=self.registry,
            backend=backend if backend is not None else self.backend,
            turn_context=context,
            config=config,
            index=len(self.turns),
            trace=self.trace_level,
            recorder=self.recorder,
            cache=self.cache,
        )
        self.turns.append(result)
        self.traces.append(trace)
        return result

    def snapshot(self) -> dict[str, Any]:
        """The world as the tools report it now (what ``forethought run`` compares with a solution's expected state)."""
        return self.tools.snapshot()
