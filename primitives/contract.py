"""Output contracts: checks at three levels (type, value, semantic).

A contract is evaluated on (input, raw output). The type level is implied by
the primitive's output model and always runs first; value and semantic checks
only run on a well-typed output. Contracts fail closed: a check that raises is
a violation, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

Level = Literal["type", "value", "semantic", "runtime"]

# A check returns None/True when the constraint holds, or False / a message
# string describing how it is violated.
CheckFn = Callable[[Any, Any], "bool | str | None"]


def jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    return obj


@dataclass(frozen=True)
class Violation:
    """One violated constraint, naming the primitive, its input and the rule."""

    primitive: str
    level: Level
    constraint: str
    message: str
    input: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "primitive": self.primitive,
            "level": self.level,
            "constraint": self.constraint,
            "message": self.message,
            "input": jsonable(self.input),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Violation:
        return cls(data["primitive"], data["level"], data["constraint"], data["message"], data.get("input"))

    def feedback(self) -> str:
        """Short text fed back to a retried primitive."""
        return f"[{self.level}] {self.constraint}: {self.message}"

    def __str__(self) -> str:
        return f"{self.primitive}: {self.feedback()}"


@dataclass(frozen=True)
class Check:
    """A named constraint at one level."""

    name: str
    level: Literal["value", "semantic"]
    fn: CheckFn

    def evaluate(self, primitive: str, inp: Any, out: Any) -> Violation | None:
        try:
            res = self.fn(inp, out)
        except Exception as exc:  # fail closed: an unevaluable check is violated
            return Violation(primitive, self.level, self.name, f"check could not be evaluated: {exc!r}", inp)
        if res is None or res is True:
            return None
        msg = res if isinstance(res, str) else "constraint does not hold"
        return Violation(primitive, self.level, self.name, msg, inp)


@dataclass
class ContractResult:
    ok: bool
    output: Any = None
    violations: list[Violation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "violations": [v.to_dict() for v in self.violations]}


class Contract:
    """A composition of value and semantic checks on top of the type check.

    ``Contract()`` with no checks is an explicit, type-only contract; a
    primitive must always be given one (``contract=None`` is rejected).
    """

    def __init__(self, value: Sequence[Check | CheckFn] = (), semantic: Sequence[Check | CheckFn] = ()):
        self.checks: list[Check] = []
        for level, items in (("value", value), ("semantic", semantic)):
            for i, item in enumerate(items):
                if isinstance(item, Check):
                    if item.level != level:
                        item = Check(item.name, level, item.fn)  # type: ignore[arg-type]
                    self.checks.append(item)
                elif callable(item):
                    name = getattr(item, "__name__", f"{level}_{i}")
                    self.checks.append(Check(name, level, item))  # type: ignore[arg-type]
                else:
                    raise TypeError(f"contract {level} check #{i} is not callable: {item!r}")

    def __repr__(self) -> str:
        return f"Contract({[c.name for c in self.checks]})"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.checks]

    def check_type(self, primitive: str, output_type: type[BaseModel], inp: Any, raw: Any) -> ContractResult:
        if isinstance(raw, output_type):
            return ContractResult(True, raw)
        try:
            if isinstance(raw, BaseModel):
                raw = raw.model_dump()
            return ContractResult(True, output_type.model_validate(raw))
        except ValidationError as exc:
            errs = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:5])
            return ContractResult(False, None, [Violation(primitive, "type", "schema", errs, inp)])
        except Exception as exc:  # fail closed
            return ContractResult(False, None, [Violation(primitive, "type", "schema", repr(exc), inp)])

    def check(
        self, primitive: str, output_type: type[BaseModel], inp: Any, raw: Any, *, full: bool = True
    ) -> ContractResult:
        """Type check, then (if ``full``) every value and semantic check.

        All value/semantic violations are reported together, so a retry gets
        the complete feedback at once.
        """
        res = self.check_type(primitive, output_type, inp, raw)
        if not res.ok or not full:
            return res
        for contract_check in self.checks:
            violation = contract_check.evaluate(primitive, inp, res.output)
            if violation is not None:
                res.violations.append(violation)
        res.ok = not res.violations
        return res


def check(name: str, level: Literal["value", "semantic"] = "value") -> Callable[[CheckFn], Check]:
    """Decorator form: ``@check("ids_unique")`` turns a function into a Check."""

    def wrap(fn: CheckFn) -> Check:
        return Check(name, level, fn)

    return wrap
