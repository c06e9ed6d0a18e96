"""``forethought bench bfcl mode=responder`` and ``mode=vanilla``: the paper's full system and its baseline.

responder (the paper's Forethought rows): each turn the kernel runs on a *copy* of the entry's world and
scratchpad (a trial: its calls run and commit there only); :func:`responder.render_turn` writes that turn
and the base model behind ``responder.base_url`` answers with the tool calls to make. Those calls execute
on the real world through the kernel's own execution path, ``task_steps.execute_call`` (ToolGate's
precondition when CVC is on, the call on a copy of bfcl's instance, the postcondition, the commit, the
scratchpad writes), as the ceiling mode runs ground truth. The committed ones are the turn's candidate
for bfcl's checker. Per turn we keep where the answer departs from the trial's committed calls.

vanilla (the paper's baseline rows): the same endpoint with bfcl's function docs as OpenAI tools, the
conversation so far and the turn's messages, and no kernel: bfcl's own multi-turn loop (a step asks the
model; its tool calls run and their results go back as tool messages; the turn ends on a reply with no
call, or after ``responder.max_steps`` steps). The calls run on the same adapter (``BfclEnvironment``:
stage, then commit) with no guard, as bfcl runs a model's calls; every call made is the candidate.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from forethought.kernel.backends.openai_backend import BackendError
from forethought.kernel.program import Kernel
from forethought.kernel.records import TurnState
from forethought.primitives import Cache

from .answer_execution import answer_record, call_string, execute_answer
from .bfcl_data import Entry, entry_registry, release_withheld, turn_text
from .bfcl_entry import EntryRun, EntryTurns
from .bfcl_env import BfclEnvironment
from .common import kernel_turn, vanilla_step
from .responder import Endpoint, openai_tools, parse_tool_call, registry_name

MAX_TOOL_MESSAGE_CHARS = 20_000  # a tool result sent back to the model (a long_context listing is megabytes)


def run_responder_entry(
    entry: Entry,
    kernel: Kernel,
    backend: Any,
    endpoint: Endpoint,
    *,
    trace: str,
    recorder: Any,
    cache: Cache | None,
    replay: str | None,
) -> EntryRun:
    out = EntryRun(entry.id, entry.category, kernel.config.cvc, mode="responder")
    turns = EntryTurns(entry)
    env, scratchpad, registry = turns.env, turns.scratchpad, turns.registry
    for i, request in turns:
        trial_env, trial_s = copy.deepcopy(env), copy.deepcopy(scratchpad)  # the kernel's trial changes nothing real
        result, tr = kernel_turn(
            kernel,
            where=f"entry {entry.id}, turn {i}, mode responder",
            replay=replay,
            user=request,
            env=trial_env,
            scratchpad=trial_s,
            registry=registry,
            backend=backend,
            turn_context={},
            index=i,
            trace=trace,
            recorder=recorder,
            cache=cache,
        )
        out.add_turn(request, result, tr)
        if result.backend_error is not None:
            out.backend_error = {"turn": i, "source": "kernel backend", **result.backend_error}
            break
        try:
            answer, rendered = endpoint.respond(request, result, tr, registry, state=trial_s.snapshot())
        except BackendError as exc:
            out.backend_error = {"turn": i, "source": "responder", "message": str(exc)}
            break
        turn = TurnState(
            config=kernel.config,
            env=env,
            scratchpad=scratchpad,
            registry=registry,
            tool_briefs=[],  # type: ignore[arg-type]
            user=request,
            turn_context={},
            index=i,
        )
        committed, blocked = execute_answer(answer, turn, f"responder{i}")
        out.candidate.append(committed)
        out.answers.append({"turn": i, **answer_record(answer, result.committed_calls, committed, blocked, rendered)})
        turns.done(request, result)
    return out


def _tool_content(result: Any) -> str:
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    return (
        text if len(text) <= MAX_TOOL_MESSAGE_CHARS else text[:MAX_TOOL_MESSAGE_CHARS] + f"… ({len(text)} chars in all)"
    )


def run_vanilla_entry(entry: Entry, endpoint: Endpoint) -> EntryRun:
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

    out = EntryRun(entry.id, entry.category, False, mode="vanilla")
    env = BfclEnvironment(entry)
    registry = entry_registry(entry, 0)
    messages: list[dict[str, Any]] = []
    for i, turn_messages in enumerate(entry.raw["question"]):
        release_withheld(entry, registry, i)  # bfcl adds the held-out docs at this turn, with its own prompt
        new = [dict(m) for m in turn_messages] or [
            {"role": "user", "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}
        ]
        messages += new
        out.requests.append(turn_text(new))
        tools = openai_tools(registry)
        row: dict[str, Any] = {"turn": i, "steps": [], "parse_errors": [], "step_limit": False, "text": ""}
        made: list[str] = []
        for step in range(endpoint.cfg.max_steps + 1):
            if step == endpoint.cfg.max_steps:
                row["step_limit"] = True  # bfcl's loop stops here too (force-terminated)
                break
            content, tool_calls, error = vanilla_step(endpoint, messages, tools, row, step)
            if error is not None:
                out.backend_error = {"turn": i, "source": "vanilla", "message": error}
                break
            assistant: dict[str, Any] = {"role": "assistant", "content": content or None}
            if tool_calls:
                assistant["tool_calls"] = tool_calls
            messages.append(assistant)
            if not tool_calls:
                break  # bfcl: a reply with no call ends the turn
            step_calls = []
            for k, tc in enumerate(tool_calls):
                call_id = tc.get("id") if isinstance(tc, dict) else None
                try:
                    name, args, _ = parse_tool_call(tc, k)
                    name = registry_name(name, registry)
                except ValueError as exc:
                    row["parse_errors"].append(f"step {step}: {exc}")
                    messages.append(
                        {"role": "tool", "tool_call_id": call_id, "content": f"Error: could not read the call: {exc}"}
                    )
                    continue
                result, staged = env.stage(name, args)
                if staged is not None:
                    env.commit(name, staged)
                text = call_string(name, args)
                if text is not None:
                    made.append(text)
                    step_calls.append(text)
                messages.append({"role": "tool", "tool_call_id": call_id, "content": _tool_content(result)})
            row["steps"].append(step_calls)
        out.answers.append(row)
        if out.backend_error is not None:
            break
        out.candidate.append(made)
    return out
