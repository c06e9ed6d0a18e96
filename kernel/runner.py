"""Run a scenario (or worked solution) turn by turn through the kernel."""

from __future__ import annotations

from collections.abc import Callable

from forethought.errors import UserError
from forethought.primitives import Backend, Recorder, Trace
from forethought.primitives.store import Cache

from .backends.oracle import OracleBackend
from .environment import Environment
from .program import Kernel
from .records import ScenarioResult, TurnResult
from .registry import Registry
from .scenario import Solution, Turn
from .scratchpad import Scratchpad

BackendFactory = Callable[[int, Turn], Backend]


def build_environment(sol: Solution) -> Environment:
    try:
        return Environment(sol.domains, sol.initial_state)
    except (KeyError, ValueError) as exc:
        raise UserError(
            str(exc.args[0] if exc.args else exc), f"{sol.source_file or sol.id}: initial_state/domains"
        ) from None


def build_registry(sol: Solution, env: Environment) -> Registry:
    ref = sol.registry
    where = f"{sol.source_file or sol.id}: registry"
    domains = ref.domains or sol.domains
    bad = [d for d in domains if d not in env.domains]
    if bad:
        raise UserError(f"registry names domains {bad} that the solution does not load", where)
    names = [n for d in domains for n in env.domains[d].tools]
    if ref.include is not None:
        unknown = [n for n in ref.include if env.tool(n) is None]
        if unknown:
            raise UserError(f"include names unknown tools {unknown}", where)
        names = [n for n in ref.include]
    unknown_ex = [n for n in ref.exclude if env.tool(n) is None]
    if unknown_ex:
        raise UserError(f"exclude names unknown tools {unknown_ex}", where)
    reg = env.registry(names, exclude=ref.exclude)
    for spec in ref.extra:
        if spec.name in reg:
            raise UserError(f"extra tool {spec.name!r} duplicates a domain tool", where)
        reg.add(spec)
    return reg


def run_solution(
    sol: Solution,
    kernel: Kernel,
    backend_for: BackendFactory,
    *,
    trace: str = "full",
    recorder: Recorder | None = None,
    cache: Cache | None = None,
    turns: list[int] | None = None,
    on_turn: Callable[[int, TurnResult, Trace, Environment], None] | None = None,
) -> ScenarioResult:
    """Execute every turn; the scratchpad and the world persist across turns."""
    env = build_environment(sol)
    registry = build_registry(sol, env)
    scratchpad = Scratchpad(sol.config)
    results: list[TurnResult] = []
    traces: list[Trace] = []
    for i, turn in enumerate(sol.turns):
        if turns is not None and i not in turns:
            continue
        res, tr = kernel.run_turn(
            user=turn.user,
            env=env,
            scratchpad=scratchpad,
            registry=registry,
            backend=backend_for(i, turn),
            turn_context=turn.context,
            config=turn.config,
            index=i,
            trace=trace,
            recorder=recorder,
            cache=cache,
        )
        results.append(res)
        traces.append(tr)
        if on_turn is not None:
            on_turn(i, res, tr, env)
    return ScenarioResult(sol.id, results, traces, env.snapshot())


def oracle_factory(sol: Solution) -> BackendFactory:
    return lambda i, turn: OracleBackend(turn, sol.id)
