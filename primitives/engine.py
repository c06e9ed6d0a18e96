"""The execution engine: interprets programs, checks every output, recovers, traces."""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from .contract import ContractResult, Violation, jsonable
from .errors import BackendError, DesignError, HaltError, ReplayMissError
from .primitive import Backend, Primitive, RenderError, SLMReply, input_hash
from .program import Conditional, Fallback, ForEach, Iterate, Node, Parallel, Program, Sequence, Step, adapt, as_node
from .store import Cache, Recorder
from .trace import Trace, TraceRecord

TraceLevel = Literal["full", "steps", "violations", "off"]


def _trace_safe(obj: Any) -> Any:
    """A JSON-safe copy of a trace payload, so a trace written as JSONL loads back equal.

    Models (dumped in JSON mode) and scalars pass through cheaply; anything
    else (a failed primitive's raw output: a set, a tuple, an arbitrary object)
    goes through the same ``default=str`` encoding the JSONL writer uses.
    """
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    return json.loads(json.dumps(obj, ensure_ascii=False, default=str))


@dataclass
class Run:
    """The result of :meth:`Engine.run`: an output or a structured halt, plus the trace."""

    output: Any
    error: HaltError | None
    trace: Trace
    slm_calls: int = 0
    elapsed_ms: float = 0.0
    # The backend did not answer (after its own retries): the run stopped, and no
    # step's contract was judged on that failure.
    backend_error: BackendError | None = None
    backend_retries: int = 0  # backend calls repeated after a backend error (not contract retries)

    @property
    def ok(self) -> bool:
        return self.error is None and self.backend_error is None

    def raise_for_error(self) -> Any:
        if self.backend_error is not None:
            raise self.backend_error
        if self.error is not None:
            raise self.error
        return self.output


@dataclass
class _State:
    ctx: Any
    trace: Trace
    level: TraceLevel
    seq: itertools.count = field(default_factory=itertools.count)
    slm_calls: int = 0
    backend_retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Engine:
    """Runs programs.

    Args:
        backend: answers SLM requests (required when a program has SLM steps).
        check_contracts: ``False`` chains the same primitives without value or
            semantic checks and without recovery (the CVC ablation); outputs
            are still parsed into their types, since the next step needs them.
        cache: a :class:`Cache` for pure primitives (symbolic and SLM).
        recorder: a :class:`Recorder` to record or replay SLM outputs.
        trace: ``full`` (inputs and outputs), ``steps`` (no payloads), ``violations``
            (only the steps whose contract failed, no payloads: the cheapest level that
            still shows every problem) or ``off``.
        backend_retries: how often a backend call that raised is repeated before the
            run stops with :attr:`Run.backend_error` (separate from a step's contract
            retries, which feed a violation back to the model).
        backend_retry_wait_s: the wait before the first backend retry; it doubles per retry.
    """

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        check_contracts: bool = True,
        cache: Cache | None = None,
        recorder: Recorder | None = None,
        trace: TraceLevel = "full",
        max_workers: int = 4,
        backend_retries: int = 0,
        backend_retry_wait_s: float = 0.5,
    ):
        if backend_retries < 0 or backend_retry_wait_s < 0:
            raise ValueError("backend_retries and backend_retry_wait_s must be >= 0")
        if trace not in ("full", "steps", "violations", "off"):
            raise ValueError(f"trace must be 'full', 'steps', 'violations' or 'off', got {trace!r}")
        self.backend = backend
        self.check_contracts = check_contracts
        self.cache = cache
        self.recorder = recorder
        self.trace_level: TraceLevel = trace
        self.max_workers = max_workers
        self.backend_retries = backend_retries
        self.backend_retry_wait_s = backend_retry_wait_s

    # ------------------------------------------------------------------ API
    def run(
        self, program: Program | Node | Primitive, inp: Any, *, context: Any = None, run_id: str | None = None
    ) -> Run:
        root = program.root if isinstance(program, Program) else as_node(program)
        if self.backend is None and any(isinstance(n, Step) and n.primitive.kind == "slm" for n in root.walk()):
            raise DesignError("this program has SLM steps but the engine has no backend")
        if not isinstance(inp, root.input_type):
            inp = root.input_type.model_validate(jsonable(inp))
        st = _State(context, Trace(run_id or uuid.uuid4().hex[:12]), self.trace_level)
        t0 = time.perf_counter()
        out, err, backend_err = None, None, None
        try:
            out = self._exec(root, inp, root.label, st, recoverable=False)
        except HaltError as exc:
            err = exc
        except BackendError as exc:
            backend_err = exc
        return Run(out, err, st.trace, st.slm_calls, (time.perf_counter() - t0) * 1000, backend_err, st.backend_retries)

    # ------------------------------------------------------------- dispatch
    def _exec(self, node: Node, inp: BaseModel, path: str, st: _State, recoverable: bool) -> BaseModel:
        if isinstance(node, Step):
            return self._step(node, inp, path, st, recoverable)
        if isinstance(node, Sequence):
            cur = inp
            for step in node.steps:
                cur = self._exec(step, adapt(cur, step.input_type), f"{path}/{step.label}", st, recoverable)
            return cur
        if isinstance(node, Parallel):
            return self._parallel(node, inp, path, st, recoverable)
        if isinstance(node, Conditional):
            if node.probe is not None:
                try:
                    probed = self._exec(
                        node.probe, adapt(inp, node.probe.input_type), f"{path}/{node.probe.label}", st, True
                    )
                except HaltError:
                    return self._exec(
                        node.otherwise, adapt(inp, node.otherwise.input_type), f"{path}/else", st, recoverable
                    )
                return self._exec(node.then, adapt(probed, node.then.input_type), f"{path}/then", st, recoverable)
            try:
                taken = bool(node.when(inp))  # type: ignore[misc]
            except Exception as exc:
                raise HaltError(path, None, inp, [], f"condition raised {exc!r}") from None
            branch = node.then if taken else node.otherwise
            return self._exec(
                branch, adapt(inp, branch.input_type), f"{path}/{'then' if taken else 'else'}", st, recoverable
            )
        if isinstance(node, Iterate):
            state = inp
            for i in range(node.max_iters):
                state = adapt(self._exec(node.body, state, f"{path}[{i}]", st, recoverable), node.body.input_type)
                try:
                    done = bool(node.until(state))
                except Exception as exc:
                    raise HaltError(path, None, state, [], f"until-condition raised {exc!r}") from None
                if done:
                    return state
            if node.on_exhausted == "halt":
                raise HaltError(path, None, state, [], f"iteration budget of {node.max_iters} exhausted")
            return state
        if isinstance(node, Fallback):
            errors: list[HaltError] = []
            n = len(node.alternatives)
            for i, alt in enumerate(node.alternatives):
                # Without contracts there is no recovery: only the first alternative runs.
                last = i == n - 1 or not self.check_contracts
                try:
                    return self._exec(
                        alt, adapt(inp, alt.input_type), f"{path}/{alt.label}", st, recoverable or not last
                    )
                except HaltError as exc:
                    errors.append(exc)
                    if last:
                        break
            raise HaltError(
                path,
                None,
                inp,
                [v for e in errors for v in e.violations],
                f"all {len(errors)} alternatives failed: " + " | ".join(e.reason for e in errors),
            )
        if isinstance(node, ForEach):
            return self._foreach(node, inp, path, st, recoverable)
        raise DesignError(f"unknown node type {type(node).__name__}")

    # ------------------------------------------------------------------ step
    def _record(
        self,
        st: _State,
        path: str,
        prim: Primitive,
        attempt: int,
        action: str,
        inp: Any,
        out: Any,
        res: ContractResult,
        elapsed: float,
        model: dict | None,
        source: str,
    ) -> None:
        if st.level == "off" or (st.level == "violations" and res.ok):
            return
        full = st.level == "full"
        contract = res.to_dict()
        if not res.ok:
            contract = _trace_safe(contract)
            if not full:  # "steps" keeps no payloads, not even the input inside a violation
                for violation in contract["violations"]:
                    violation["input"] = None
        rec = TraceRecord(
            seq=0,
            path=path,
            primitive=prim.name,
            kind=prim.kind,
            attempt=attempt,
            action=action,
            input=_trace_safe(inp) if full else None,
            output=_trace_safe(out) if full else None,
            contract=contract,
            elapsed_ms=round(elapsed * 1000, 4),
            model=_trace_safe(model),
            source=source,
        )
        with st.lock:
            rec.seq = next(st.seq)
            st.trace.records.append(rec)

    def _invoke_symbolic(self, prim: Primitive, inp: BaseModel, st: _State) -> tuple[Any, str]:
        key = None
        if self.cache is not None and prim.pure and not prim.uses_context:
            key = input_hash(prim.name, inp, (), prim.version)
            hit = self.cache.get(key)
            if hit is not None:
                # A copy: a later step that mutates its input must not change the cached value.
                return copy.deepcopy(hit), "cache"
        out = prim.fn(inp, st.ctx) if prim.uses_context else prim.fn(inp)  # type: ignore[misc]
        if key is not None:
            self.cache.put(key, copy.deepcopy(out))  # type: ignore[union-attr]
        return out, "call"

    def _slm_lookup(
        self, prim: Primitive, inp: BaseModel, feedback: tuple[str, ...]
    ) -> tuple[str, SLMReply | None, str]:
        if self.recorder is None and self.cache is None:
            return "", None, "call"  # nothing to look up: skip hashing the input
        key = input_hash(prim.name, inp, feedback, prim.version)
        if self.recorder is not None:
            hit = self.recorder.lookup(prim.name, key)
            if hit is not None:
                return key, SLMReply(hit["text"], hit.get("model", {})), "replay"
        if self.cache is not None:
            hit = self.cache.get(self._cache_key(key))
            if hit is not None:
                return key, hit, "cache"
        return key, None, "call"

    def _cache_key(self, key: str) -> str:
        # A cache may be shared by engines with different backends: an answer is only reused
        # for the backend (model) that gave it. (A Recorder is deliberately backend-free:
        # replaying one model's recording without that model is its purpose.)
        return f"{getattr(self.backend, 'name', type(self.backend).__name__)}|{key}"

    def _slm_complete(
        self, prim: Primitive, items: list[tuple[BaseModel, tuple[str, ...]]], st: _State
    ) -> list[tuple[SLMReply, str]]:
        """Answer a batch of requests to one primitive: replay/cache first, then one backend call."""
        out: list[tuple[SLMReply, str] | None] = [None] * len(items)
        todo: list[tuple[int, str]] = []
        for i, (inp, fb) in enumerate(items):
            key, reply, source = self._slm_lookup(prim, inp, fb)
            if reply is not None:
                out[i] = (reply, source)
            else:
                todo.append((i, key))
        if todo:
            reqs = [prim.request(items[i][0], items[i][1]) for i, _ in todo]
            # Count what is sent, before the call: a backend that fails still
            # spent (and bounded) those calls.
            with st.lock:
                st.slm_calls += len(reqs)
            replies = self._call_backend(prim, reqs, st)
            for (i, key), reply in zip(todo, replies, strict=True):
                if self.recorder is not None:
                    # The recording keeps the first answer to a request; an identical
                    # request (a repeated retry, a duplicate item) gets that same answer,
                    # so a replay of this run reproduces it exactly.
                    kept = self.recorder.store(prim.name, key, reply.text, reply.model)
                    if kept is not None:
                        reply = SLMReply(kept["text"], kept.get("model", {}))
                if self.cache is not None:
                    self.cache.put(self._cache_key(key), reply)
                out[i] = (reply, "call")
        return out  # type: ignore[return-value]

    def _call_backend(self, prim: Primitive, reqs: list[Any], st: _State) -> list[SLMReply]:
        """One backend call, repeated on a backend error up to ``backend_retries`` times.

        Whatever the backend raises is a :class:`BackendError` here: an exception is
        not an answer, so no contract is checked on it. Connection errors, timeouts
        and :class:`BackendError` are retried; any other exception (a bug in the
        backend) is not, since repeating it would give the same result.
        """
        for attempt in range(self.backend_retries + 1):
            try:
                replies = list(self.backend.complete(reqs))  # type: ignore[union-attr]
                if len(replies) != len(reqs):
                    raise BackendError(
                        f"backend returned {len(replies)} replies for {len(reqs)} requests", primitive=prim.name
                    )
                bad = [type(r).__name__ for r in replies if not isinstance(getattr(r, "text", None), str)]
                if bad:
                    raise BackendError(
                        f"backend returned {bad[0]} where a reply with text was expected", primitive=prim.name
                    )
                return replies
            except (HaltError, ReplayMissError, RenderError):
                raise
            except Exception as exc:
                err = exc if isinstance(exc, BackendError) else BackendError(f"backend raised {exc!r}")
                retry = isinstance(exc, (BackendError, OSError)) and getattr(err, "transient", True)
                if not retry or attempt == self.backend_retries:
                    err.primitive = err.primitive or prim.name
                    err.attempts = attempt + 1
                    raise err from (None if err is exc else exc)
                with st.lock:
                    st.backend_retries += 1
                time.sleep(self.backend_retry_wait_s * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _record_backend_error(
        self, st: _State, path: str, prim: Primitive, attempt: int, inp: Any, exc: BackendError, elapsed: float
    ) -> None:
        """A trace record that says the backend failed: no output, no contract verdict."""
        exc.path = exc.path or path
        if st.level == "off":
            return
        rec = TraceRecord(
            seq=0,
            path=path,
            primitive=prim.name,
            kind=prim.kind,
            attempt=attempt,
            action="backend_error",
            input=_trace_safe(inp) if st.level == "full" else None,
            output=None,
            contract={"ok": False, "violations": []},
            elapsed_ms=round(elapsed * 1000, 4),
            meta={"backend_error": exc.message, "backend_attempts": exc.attempts},
        )
        with st.lock:
            rec.seq = next(st.seq)
            st.trace.records.append(rec)

    def _check(self, prim: Primitive, inp: BaseModel, raw: Any) -> ContractResult:
        return prim.contract.check(prim.name, prim.output_type, inp, raw, full=self.check_contracts)

    def _parse_slm(self, prim: Primitive, inp: BaseModel, reply: SLMReply) -> ContractResult:
        try:
            raw = prim.parse(reply.text)
        except Exception as exc:
            return ContractResult(
                False, None, [Violation(prim.name, "type", "parse", f"reply is not valid output: {exc}", inp)]
            )
        return self._check(prim, inp, raw)

    def _step(self, step: Step, inp: BaseModel, path: str, st: _State, recoverable: bool) -> BaseModel:
        prim = step.primitive
        attempts = step.retries + 1 if self.check_contracts else 1
        cur, feedback = inp, ()
        res = ContractResult(False)
        for attempt in range(attempts):
            t0 = time.perf_counter()
            model, source, raw = None, "call", None
            try:
                if prim.kind == "slm":
                    ((reply, source),) = self._slm_complete(prim, [(cur, feedback)], st)
                    model = reply.model
                    res = self._parse_slm(prim, cur, reply)
                    raw = res.output if res.output is not None else reply.text
                else:
                    raw, source = self._invoke_symbolic(prim, cur, st)
                    res = self._check(prim, cur, raw)
            except (HaltError, ReplayMissError):
                raise  # a strict-replay miss is a problem with the recording, not with the primitive
            except BackendError as exc:  # not an answer: no verdict, no contract retry, no fallback
                self._record_backend_error(st, path, prim, attempt, cur, exc, time.perf_counter() - t0)
                raise
            except Exception as exc:  # a failing primitive is a (runtime) violation, not a crash
                res = ContractResult(False, None, [Violation(prim.name, "runtime", "raised", repr(exc), cur)])
            elapsed = time.perf_counter() - t0
            last = attempt == attempts - 1
            action = "accept" if res.ok else ("retry" if not last else ("fallback" if recoverable else "halt"))
            self._record(
                st, path, prim, attempt, action, cur, res.output if res.ok else raw, res, elapsed, model, source
            )
            if res.ok:
                return res.output
            feedback = tuple(v.feedback() for v in res.violations)
            if step.repair is not None and not last:
                try:
                    repaired = step.repair(cur, res.violations)
                except Exception as exc:
                    raise HaltError(path, prim.name, cur, res.violations, f"repair raised {exc!r}") from None
                cur = self._repaired_input(prim, path, cur, repaired, res.violations)
        raise HaltError(path, prim.name, inp, res.violations)

    @staticmethod
    def _repaired_input(
        prim: Primitive, path: str, cur: BaseModel, repaired: Any, violations: list[Violation]
    ) -> BaseModel:
        """A repair must give the primitive a valid input again (validated, never passed through unchecked)."""
        if isinstance(repaired, prim.input_type):
            return repaired
        try:
            return prim.input_type.model_validate(jsonable(repaired))
        except Exception as exc:
            reason = f"repair returned an invalid {prim.input_type.__name__}: {exc!r}"[:500]
            raise HaltError(path, prim.name, cur, violations, reason) from None

    # ------------------------------------------------------------- parallel
    def _parallel(self, node: Parallel, inp: BaseModel, path: str, st: _State, recoverable: bool) -> BaseModel:
        names = list(node.branches)
        if len(names) == 1 or self.max_workers <= 1:
            results = [
                self._exec(node.branches[n], adapt(inp, node.branches[n].input_type), f"{path}/{n}", st, recoverable)
                for n in names
            ]
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(names))) as pool:
                futs = [
                    pool.submit(
                        self._exec,
                        node.branches[n],
                        adapt(inp, node.branches[n].input_type),
                        f"{path}/{n}",
                        st,
                        recoverable,
                    )
                    for n in names
                ]
                results, first_err = [], None
                for future in futs:
                    try:
                        results.append(future.result())
                    except (HaltError, BackendError) as exc:  # the first in branch order, as when sequential
                        first_err = first_err or exc
                        results.append(None)
                if first_err is not None:
                    raise first_err
        return node.output_type.model_construct(**dict(zip(names, results, strict=True)))

    # -------------------------------------------------------------- foreach
    def _foreach(self, node: ForEach, inp: BaseModel, path: str, st: _State, recoverable: bool) -> BaseModel:
        items = list(getattr(inp, node.over))
        if len(items) > node.max_items:
            raise HaltError(path, None, inp, [], f"{len(items)} items exceed the declared fan-out of {node.max_items}")
        body = node.body
        skip = node.on_item_error == "skip"
        if isinstance(body, Step) and body.primitive.kind == "slm" and body.repair is None:
            results, errors = self._batched_slm(body, items, path, st, recoverable or skip, skip)
        else:
            results, errors = [], []
            for i, item in enumerate(items):
                try:
                    results.append(
                        self._exec(body, adapt(item, body.input_type), f"{path}[{i}]", st, recoverable or skip)
                    )
                    errors.append(None)
                except HaltError as exc:
                    if not skip:
                        raise
                    results.append(None)
                    errors.append(exc.reason)
        if skip:
            return node.output_type.model_construct(results=results, errors=errors)
        return node.output_type.model_construct(results=results)

    def _batched_slm(
        self, step: Step, items: list[BaseModel], path: str, st: _State, recoverable: bool, skip: bool
    ) -> tuple[list[BaseModel | None], list[str | None]]:
        """All items' model calls go to the backend together; failed items retry together."""
        prim = step.primitive
        attempts = step.retries + 1 if self.check_contracts else 1
        inputs = [adapt(x, prim.input_type) for x in items]
        feedback: dict[int, tuple[str, ...]] = {i: () for i in range(len(items))}
        results: dict[int, BaseModel] = {}
        last_res: dict[int, ContractResult] = {}
        pending = list(range(len(items)))
        for attempt in range(attempts):
            if not pending:
                break
            t0 = time.perf_counter()
            try:
                answers: list[tuple[SLMReply | None, str]] = list(
                    self._slm_complete(prim, [(inputs[i], feedback[i]) for i in pending], st)
                )
                failure = None
            except (ReplayMissError, HaltError):
                raise
            except BackendError as exc:  # the backend did not answer: the run stops, no item is judged
                self._record_backend_error(
                    st, f"{path}[{pending[0]}]", prim, attempt, inputs[pending[0]], exc, time.perf_counter() - t0
                )
                raise
            except Exception as exc:  # the batch could not be sent (a render raised): runtime violation per item
                answers, failure = [(None, "call")] * len(pending), repr(exc)
            per = (time.perf_counter() - t0) / max(1, len(pending))
            still = []
            last = attempt == attempts - 1
            for i, (reply, source) in zip(pending, answers, strict=True):
                if reply is None:
                    res = ContractResult(
                        False, None, [Violation(prim.name, "runtime", "raised", failure or "", inputs[i])]
                    )
                else:
                    res = self._parse_slm(prim, inputs[i], reply)
                action = "accept" if res.ok else ("retry" if not last else ("fallback" if recoverable else "halt"))
                shown = res.output if res.ok else (reply.text if reply is not None else None)
                model = reply.model if reply is not None else None
                self._record(st, f"{path}[{i}]", prim, attempt, action, inputs[i], shown, res, per, model, source)
                if res.ok:
                    results[i] = res.output
                else:
                    last_res[i] = res
                    feedback[i] = tuple(v.feedback() for v in res.violations)
                    still.append(i)
            pending = still
        if pending and not skip:
            i = pending[0]
            raise HaltError(f"{path}[{i}]", prim.name, inputs[i], last_res[i].violations)
        errors = [
            None if i in results else HaltError(f"{path}[{i}]", prim.name, inputs[i], last_res[i].violations).reason
            for i in range(len(items))
        ]
        return [results.get(i) for i in range(len(items))], errors
