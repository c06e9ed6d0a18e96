"""Scoring with tau2's own evaluator (``tau2.evaluator.evaluator.evaluate_simulation``) and its pass^k.

A run becomes tau2's ``SimulationRun``: its messages are the trajectory (:meth:`Tau2Environment.trajectory`)
and its termination reason is what tau2's orchestrator would record (``agent_stop`` when the agent stopped;
``max_steps`` or ``agent_error`` otherwise, which tau2 scores 0 without looking further). The evaluation
type is ``ALL``, as tau2's runner uses: the environment check (the trajectory replayed on a fresh
environment, every response compared, then the agent and user DB hashes against the gold actions' world
and the task's env assertions), the action check (every gold action among the calls) and the communicate
check, combined by the task's reward basis.
"""

from __future__ import annotations

import datetime
from typing import Any

from .tau2_data import Task, import_tau2


def evaluate(domain: str, task: Task, messages: list[Any], termination: str = "agent_stop") -> dict[str, Any]:
    """tau2's verdict on one run: ``reward`` (1.0 or 0.0), ``db_match``, the env assertions and action checks met,
    and, when tau2 refused the trajectory (a response that differs on replay), ``replay_error``."""
    import_tau2()
    from tau2.data_model.simulation import SimulationRun, TerminationReason
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    now = datetime.datetime.now().isoformat()
    simulation = SimulationRun(
        id=f"forethought-{task.id}",
        task_id=task.id,
        start_time=now,
        end_time=now,
        duration=0.0,
        termination_reason=TerminationReason(termination),
        messages=messages,
    )
    try:
        info = evaluate_simulation(
            simulation=simulation, task=task.raw, evaluation_type=EvaluationType.ALL, solo_mode=True, domain=domain
        )
    except (ValueError, AssertionError) as exc:
        # set_state refuses a trajectory whose responses differ on replay: no reward, and the reason kept
        return {"reward": 0.0, "passed": False, "replay_error": str(exc)[:2000]}
    return verdict(info)


def verdict(info: Any) -> dict[str, Any]:
    from tau2.metrics.agent_metrics import is_successful

    return {
        "reward": info.reward,
        "passed": is_successful(info.reward),
        "db_match": info.db_check.db_match if info.db_check is not None else None,
        "env_assertions": [
            {"func": c.env_assertion.func_name, "arguments": c.env_assertion.arguments, "met": c.met}
            for c in info.env_assertions or []
        ],
        "actions": [
            {"name": c.action.name, "arguments": c.action.arguments, "met": c.action_match}
            for c in info.action_checks or []
        ],
        "reward_basis": [str(getattr(b, "value", b)) for b in info.reward_basis or []],
        "breakdown": {str(getattr(k, "value", k)): v for k, v in (info.reward_breakdown or {}).items()},
        "note": (info.info or {}).get("note") if isinstance(info.info, dict) else None,
    }


def pass_hat_k(successes: dict[str, list[bool]]) -> dict[int, float]:
    """tau2's pass^k (``tau2.metrics.agent_metrics.pass_hat_k``) averaged over the tasks, for k = 1 .. trials.

    ``successes`` maps a task to its trials' outcomes; every task must have the same number of trials."""
    from tau2.metrics.agent_metrics import pass_hat_k as one

    counts = {len(v) for v in successes.values()}
    if not successes or len(counts) != 1:
        return {}
    n = counts.pop()
    return {k: sum(one(n, sum(v), k) for v in successes.values()) / len(successes) for k in range(1, n + 1)}
