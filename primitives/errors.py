"""Errors raised by the DSL: at construction (design) and at run time (halt)."""

from __future__ import annotations

from typing import Any

from .contract import Violation


class DesignError(ValueError):
    """A program or primitive is ill-formed; raised at construction, never at run time."""


class HaltError(RuntimeError):
    """A run halted: which step, on what input, violating which constraints."""

    def __init__(self, step: str, primitive: str | None, input: Any, violations: list[Violation], reason: str = ""):
        self.step = step
        self.primitive = primitive
        self.input = input
        self.violations = list(violations)
        self.reason = reason or (violations[0].feedback() if violations else "halted")
        super().__init__(self._describe())

    def _describe(self) -> str:
        head = f"halted at {self.step}"
        if self.primitive:
            head += f" (primitive {self.primitive!r})"
        lines = [f"{head}: {self.reason}"]
        for violation in self.violations[:8]:
            lines.append(f"  - {violation}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        from .contract import jsonable

        return {
            "step": self.step,
            "primitive": self.primitive,
            "reason": self.reason,
            "input": jsonable(self.input),
            "violations": [v.to_dict() for v in self.violations],
        }


class ReplayMissError(RuntimeError):
    """Strict replay found no recording for a model call."""

    def __init__(self, primitive: str, key: str):
        self.primitive = primitive
        self.key = key
        super().__init__(
            f"strict replay: no recorded output for primitive {primitive!r} (input hash {key[:16]}...); "
            "re-record the run or use non-strict replay"
        )


class BackendError(RuntimeError):
    """The backend did not answer: a connection error, a timeout, an HTTP error or a malformed reply.

    A backend failure is never a model answer and never a contract violation:
    the engine retries it on its own bounded budget (``Engine(backend_retries=)``),
    then ends the run with :attr:`Run.backend_error` instead of halting a step,
    so no fallback or recovery treats "the server was down" as "the model was wrong".
    """

    transient = True  # worth a retry (a subclass for a permanent failure sets False)

    def __init__(self, message: str, *, primitive: str | None = None, path: str | None = None, attempts: int = 1):
        self.message = message
        self.primitive = primitive
        self.path = path
        self.attempts = attempts
        super().__init__(message)

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        who = f" (primitive {self.primitive!r})" if self.primitive else ""
        tries = f" after {self.attempts} attempt(s)" if self.attempts > 1 else ""
        return f"backend error{where}{who}{tries}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.path, "primitive": self.primitive, "attempts": self.attempts, "message": self.message}
