"""The responder: a base model that reads the kernel's trace of a turn and gives the final answer (issue 18).

In every Forethought row of the paper (§5, "System configuration") the primitives produce a structured
trace and a base LLM, given that trace in context, produces the final answer; for a tool-calling
benchmark the answer is the tool calls to make. This module is that step, benchmark-agnostic:

- :func:`render_turn` writes one kernel turn (its :class:`TurnResult` and :class:`Trace`) as text in a
  documented, versioned format (:data:`RENDER_VERSION`; docs/responder.md describes every section);
- :class:`Endpoint` calls an OpenAI-compatible chat endpoint through the kernel's own HTTP client
  (:meth:`OpenAIBackend.chat`: one client, one key, one deadline);
- :func:`parse_answer` reads the reply's tool calls (OpenAI ``tool_calls``, or call strings in the text
  such as ``[cd(folder='a'), ls()]``), each failure located (``tool_calls[1].function.arguments: ...``);
- :func:`departures` says where the answer departs from the trace: calls added, dropped, changed.

The caller (the BFCL bench, :mod:`.bfcl_modes`) runs the kernel on a copy of the world, renders its
turn, asks the responder, then executes the responder's calls on the real world through the kernel's
own execution path (``task_steps.execute_call``: ToolGate's precondition, the call, the postcondition, the
commit and the scratchpad writes).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from forethought.kernel.backends.factory import ServerURL
from forethought.kernel.backends.openai_backend import BackendError, OpenAIBackend, resolve_api_key
from forethought.kernel.records import DETAILED_VIEWS, TurnResult
from forethought.kernel.registry import CallParseError, Registry, format_call, parse_calls
from forethought.kernel.registry.model import TOOL_NAME, provider_name
from forethought.kernel.specs import SPECS, ShownDecision, decision_label, shown_decisions
from forethought.primitives import Trace

# The rendering's version: bump it whenever a section, a label or the order changes (docs/responder.md
# keeps the format; a recorded responder reply is only comparable with replies to the same version).
# 2: a binding says where it came from in words (from request, from scratchpad; were tau, S). 3: every primitive's
# decisions from TurnResult.decisions: per task "label (primitive): value" (match_func's "none" where no tool
# matches, was "none in the registry"), any not about a listed task under "## Decisions (other primitives)".
RENDER_VERSION = "3"
MAX_RESULT_CHARS = 2_000  # a call result shown to the responder (a long_context `ls` is megabytes)
MAX_STATE_ENTRIES = 24  # the scratchpad entries shown (the most recent), as the primitives see them

SYSTEM_PROMPT = (
    "You are the responder of a tool-calling agent. A kernel of small models and symbolic checks has analysed "
    "the user's request; its trace follows. The calls the trace lists were tried on a copy of the world: none of "
    "them has been applied. Give the final answer: the tool calls to make now, in order, with their arguments, "
    "by calling the tools. Keep the calls the trace supports, correct or drop those it shows wrong, and add a "
    "call the request needs and the trace missed. If no call should be made (a function or a value is missing), "
    "make none and say why in one sentence."
)


class ResponderConfig(BaseModel):
    """An OpenAI-compatible endpoint serving the base model (the responder, and the vanilla baseline)."""

    model_config = ConfigDict(extra="forbid")
    base_url: ServerURL | None = None  # null: backend.base_url when backend=openai
    model: str = "base"  # the served name of the base model (vLLM: --served-model-name)
    # The key as for the backend: $OPENAI_API_KEY (api_key_env) or api_key_file; masked wherever shown.
    api_key: SecretStr | None = None
    api_key_env: str = Field("OPENAI_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    api_key_file: str | None = None
    max_tokens: int = Field(1024, ge=1)
    temperature: float = Field(0.0, ge=0)
    timeout_s: float = Field(120.0, gt=0)
    retries: int = Field(2, ge=0)  # a request that raised (server down, timeout, bad reply) is repeated
    retry_wait_s: float = Field(0.5, ge=0)
    max_steps: int = Field(20, ge=1)  # vanilla: model calls per turn (bfcl's MAXIMUM_STEP_LIMIT)
    extra_body: dict[str, Any] = Field(default_factory=dict)


# ------------------------------------------------------------------ rendering
def _json(value: Any, limit: int = MAX_RESULT_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars in all)"


def _call(tool: str, args: dict[str, Any]) -> str:
    try:
        return format_call(tool, args)
    except (ValueError, TypeError):
        return f"{tool}({_json(args)})"


def _decision_line(decision: ShownDecision, about: str) -> str:
    """``function (match_func): ls``; the key in brackets when it says more than the task (or the turn)."""
    qualifier = f" [{decision.key}]" if decision.key != about else ""
    name = f"{decision.label} ({decision.primitive})" if decision.label else decision.primitive
    return f"{name}{qualifier}: {decision.value}"


def _asked_per_task() -> dict[str, str]:
    """primitive -> its label, for the registered primitives shown from the decision map that are asked per task
    (their input has a ``task``): a task without a decision of one says so ("no decision": the task did not get to
    it, or no answer passed its contract; the contract-check section tells which)."""
    return {
        name: decision_label(spec.output_type) or name
        for name, spec in SPECS.items()
        if name not in DETAILED_VIEWS and "task" in spec.input_type.model_fields
    }


def render_turn(
    request: str, result: TurnResult, trace: Trace | None = None, *, state: dict[str, Any] | None = None
) -> str:
    """One kernel turn as the responder reads it (format version :data:`RENDER_VERSION`, docs/responder.md).

    ``state`` is the scratchpad S after the kernel's trial (default: the turn's own view of it)."""
    lines = [f"FORETHOUGHT TRACE v{RENDER_VERSION}", "", "## Request", request.strip() or "(empty)", ""]
    lines += ["## Tasks (decompose)"]
    if not result.tasks:
        lines.append("- none")
    for task in result.tasks:
        deps = f"; after {', '.join(task.depends_on)}" if task.depends_on else ""
        params = f"; values {_json(task.parameters)}" if task.parameters else ""
        lines.append(f"- {task.id}: {task.text}{deps}{params}")
    lines += ["", "## Order (get_order)", ", ".join(result.order) if result.order else "none", ""]
    # every other primitive's decisions, from the generic map: those about a listed task under it, the rest here
    decided = [d for d in shown_decisions(result.decisions) if d.primitive not in DETAILED_VIEWS]
    unplaced = [d for d in decided if not any(d.about(t.id) for t in result.tasks)]
    if unplaced:
        lines += ["## Decisions (other primitives)", *(f"- {_decision_line(d, 'turn')}" for d in unplaced), ""]
    asked = _asked_per_task()
    lines += ["## Per task"]
    for task in result.tasks:
        outcome = result.outcomes.get(task.id)
        lines.append(f"### {task.id}: {task.text}")
        mine = [d for d in decided if d.about(task.id)]
        for name in dict.fromkeys([*asked, *(d.primitive for d in mine)]):
            theirs = [d for d in mine if d.primitive == name]
            lines += [_decision_line(d, task.id) for d in theirs] or [f"{asked[name]} ({name}): no decision"]
        for prerequisite in result.prerequisites.get(task.id, []):
            extra = ""
            if prerequisite.remediation is not None:
                extra = (
                    f"; remediation {_call(prerequisite.remediation.tool_name, prerequisite.remediation.parameters)}"
                )
            if prerequisite.retrieval is not None:
                extra += f"; retrieval {_call(prerequisite.retrieval.tool_name, prerequisite.retrieval.parameters)}"
            if prerequisite.recheck is not None:
                extra += f"; rechecked: {prerequisite.recheck}"
            lines.append(f"prerequisite {prerequisite.key}: {prerequisite.outcome}{extra}")
        for name, binding in result.bindings.get(task.id, {}).items():
            value = "MISSING" if binding.source == "missing" else _json(binding.value, 300)
            lines.append(f"parameter {name} = {value} (from {binding.source})")
        if outcome is None:
            lines.append("outcome: not reached")
            continue
        line = f"outcome: {outcome.status}" + (f" ({outcome.tool})" if outcome.tool else "")
        if outcome.reason:
            line += f": {outcome.reason}"
        lines.append(line)
        if outcome.missing:
            lines.append(f"missing parameters: {', '.join(outcome.missing)}")
        if outcome.blocked_key:
            lines.append(f"blocked on: {outcome.blocked_key}")
        if outcome.remediation is not None:
            lines.append(f"remediation: {_call(outcome.remediation.tool_name, outcome.remediation.parameters)}")
    lines += ["", "## Calls (tried on a copy of the world; none applied)"]
    if not result.calls:
        lines.append("- none")
    for n, call in enumerate(result.calls, 1):
        head = f"{n}. [{call.task_id}, {call.purpose}] {_call(call.tool, call.arguments)}"
        if call.rejected:
            lines.append(f"{head} -> rejected: {'; '.join(call.rejected)}")
        else:
            lines.append(
                f"{head} -> {'committed' if call.committed else 'ran, nothing to commit'}; result {_json(call.result)}"
            )
        for warning in call.warnings:
            lines.append(f"   warning: {warning}")
    lines += ["", "## Contract checks (per step)"]
    steps: dict[str, Counter] = {}
    for rec in trace or []:
        if rec.kind != "slm":
            continue
        row = steps.setdefault(rec.primitive, Counter())
        row["attempts"] += 1
        for violation in rec.contract.get("violations", []):
            row[violation.get("constraint", "?")] += 1
    if not steps:
        lines.append("- no model steps")
    for primitive, row in steps.items():
        broken = ", ".join(f"{k} x{n}" for k, n in sorted(row.items()) if k != "attempts") or "none"
        lines.append(f"- {primitive}: {row['attempts']} attempt(s); violations: {broken}")
    if result.halted:
        lines += ["", "## Halted", _json(result.halted, 500)]
    view = state if state is not None else result.scratchpad
    items = list(view.items())[-MAX_STATE_ENTRIES:]
    lines += ["", "## State S after the trial"]
    lines += [f"- {k} = {_json(v, 300)}" for k, v in items] or ["- empty"]
    return "\n".join(lines) + "\n"


def openai_tools(registry: Registry) -> list[dict[str, Any]]:
    """The registry's functions in OpenAI's ``tools`` form (the docs as imported, schema as the kernel checks it), each
    under the name a provider accepts (a dotted BFCL name with '_'; :func:`registry_name` maps a reply's back)."""
    return [
        {
            "type": "function",
            "function": {"name": provider_name(t.name), "description": t.description, "parameters": t.parameters},
        }
        for t in registry
    ]


def registry_name(name: str, registry: Registry) -> str:
    """The registry's name of the tool a reply calls by its offered name (itself when no tool is offered under it)."""
    return registry.tool_for_provider_name(name) or name


# ------------------------------------------------------------------ the answer
@dataclass
class Answer:
    """The calls a reply asks for, with every part of it that could not be read (located)."""

    calls: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)  # (name, args, tool_call id)
    errors: list[str] = field(default_factory=list)
    text: str = ""
    message: dict[str, Any] = field(default_factory=dict)  # the assistant message as the endpoint sent it


_FENCE = re.compile(r"```[a-zA-Z]*\n?(.*?)```", re.S)
_NAME = TOOL_NAME  # what a provider may call a tool (the registry's names, dotted ones mapped: provider_name)


def _text_calls(text: str, registry: Registry, out: Answer) -> None:
    """Call strings in the text: the whole text, a fenced block, or the first line that parses."""
    body = text.strip()
    fenced = _FENCE.findall(body)
    candidates = (
        [c.strip() for c in fenced] + [body] + [ln.strip() for ln in body.splitlines() if ln.strip().startswith("[")]
    )
    first_error = None
    for candidate in candidates:
        try:
            parsed = parse_calls(candidate, registry.signatures)
        except CallParseError as exc:
            first_error = first_error or exc
            continue
        out.calls += [(p.name, p.args, None) for p in parsed]
        return
    looks_like_calls = re.search(r"[A-Za-z_]\w*\(", body) is not None
    if first_error is not None and looks_like_calls:
        out.errors.append(f"content: {first_error}")


def parse_tool_call(tc: Any, k: int) -> tuple[str, dict[str, Any], str | None]:
    """One OpenAI tool call as (name, arguments, id); a ValueError located as ``tool_calls[k]...``."""
    where = f"tool_calls[{k}]"
    fn = tc.get("function") if isinstance(tc, dict) else None
    if not isinstance(fn, dict):
        raise ValueError(f"{where}: no function object")
    name, raw = fn.get("name"), fn.get("arguments", "{}")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{where}.function.name: {name!r} is not a function name")
    if isinstance(raw, str):
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{where}.function.arguments: not JSON ({exc.msg} at column {exc.colno}) in {raw[:80]!r}"
            ) from None
    else:
        args = raw
    if not isinstance(args, dict):
        raise ValueError(f"{where}.function.arguments: expected an object, got {type(args).__name__}")
    return name, args, tc.get("id") if isinstance(tc.get("id"), str) else None


def parse_answer(reply: dict[str, Any], registry: Registry) -> Answer:
    """The tool calls of a chat-completions reply: ``choices[0].message.tool_calls`` (OpenAI), else call
    strings in ``content``. A part that cannot be read is left out and its error kept, located by its path
    in the reply; a reply with neither calls nor text is an answer of no calls."""
    out = Answer()
    try:
        message = reply["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise BackendError(f"reply has no choices[0].message: {json.dumps(reply, default=str)[:200]}") from None
    if not isinstance(message, dict):
        raise BackendError(f"choices[0].message is {type(message).__name__}, not an object")
    out.message = message
    out.text = message.get("content") if isinstance(message.get("content"), str) else ""
    tool_calls = message.get("tool_calls") or []
    if not isinstance(tool_calls, list):
        out.errors.append(f"tool_calls: expected a list, got {type(tool_calls).__name__}")
        tool_calls = []
    for k, tc in enumerate(tool_calls):
        try:
            name, args, call_id = parse_tool_call(tc, k)
        except ValueError as exc:
            out.errors.append(str(exc))
            continue
        out.calls.append((registry_name(name, registry), args, call_id))
    if not tool_calls and out.text.strip():
        _text_calls(out.text, registry, out)
    return out


# ------------------------------------------------------------------ departures
def departures(kernel_calls: list[str], answer_calls: list[str]) -> dict[str, Any]:
    """Where the answer departs from the trace's committed calls (both as call strings, in order).

    A call in both is kept; a call only in the answer is *added*, only in the trace *dropped*; an added
    and a dropped call of the same function are paired as *changed* (its arguments differ), in order."""
    remaining = Counter(kernel_calls)
    kept, added = [], []
    for call in answer_calls:
        if remaining[call] > 0:
            remaining[call] -= 1
            kept.append(call)
        else:
            added.append(call)
    dropped = []
    for call in kernel_calls:
        if remaining[call] > 0:  # in the trace more often than in the answer
            remaining[call] -= 1
            dropped.append(call)
    changed = []
    for call in list(added):
        name = call.split("(", 1)[0]
        match = next((d for d in dropped if d.split("(", 1)[0] == name), None)
        if match is not None:
            added.remove(call)
            dropped.remove(match)
            changed.append({"trace": match, "answer": call})
    return {
        "kept": len(kept),
        "added": added,
        "dropped": dropped,
        "changed": changed,
        "departs": bool(added or dropped or changed),
    }


# ------------------------------------------------------------------ the endpoint
class Endpoint:
    """The base model's chat endpoint, through the kernel's OpenAI-compatible client."""

    def __init__(self, cfg: ResponderConfig, base_url: str):
        self.cfg = cfg
        self.client = OpenAIBackend(base_url, api_key=resolve_api_key(cfg, "responder"), timeout_s=cfg.timeout_s)
        self.requests = 0

    @property
    def label(self) -> dict[str, Any]:
        return {"base_url": self.client.base_url, "model": self.cfg.model}

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One chat completion; ``extra`` adds request fields a benchmark sets (tau2: ``tool_choice``, ``seed``),
        and ``extra_body`` from the config goes last."""
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": messages,
            "temperature": self.cfg.temperature,
            "max_tokens": self.cfg.max_tokens,
        }
        if tools:
            body["tools"] = tools
        body.update(extra or {})
        body.update(self.cfg.extra_body)
        wait = self.cfg.retry_wait_s
        for attempt in range(self.cfg.retries + 1):
            self.requests += 1
            try:
                return self.client.chat(body)
            except BackendError as exc:
                if attempt == self.cfg.retries or not getattr(exc, "transient", True):
                    raise
                time.sleep(wait)
                wait *= 2
        raise AssertionError("unreachable")

    def respond(
        self,
        request: str,
        result: TurnResult,
        trace: Trace | None,
        registry: Registry,
        state: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> tuple[Answer, str]:
        """The responder's answer to one kernel turn, and the rendering it was given."""
        rendered = render_turn(request, result, trace, state=state)
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": rendered}]
        return parse_answer(self.chat(messages, openai_tools(registry), extra), registry), rendered
