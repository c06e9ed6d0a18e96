"""``forethought <command> [key=value ...]``: each command is a typed function of its config.

Commands are looked up lazily so that ``forethought registry check`` does not
pay for importing torch and transformers.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

# Offline by default: no hub lookups, wandb writes locally and syncs later.
for _k, _v in (
    ("WANDB_MODE", "offline"),
    ("HF_HUB_OFFLINE", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("TOKENIZERS_PARALLELISM", "false"),
):
    os.environ.setdefault(_k, _v)

# command -> (module, function, one-line help). Each function takes the
# command's argument list (overrides and positional arguments) and returns an
# exit status.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "verify": ("data_gen.verify", "cli", "replay worked solutions through the kernel and check them"),
    "generate": ("data_gen.generate", "cli", "expand verified solutions into the five SFT datasets"),
    "train": ("training.train", "cli", "LoRA fine-tuning of the SLM primitives"),
    "validate": ("training.validate", "cli", "exact-match and contract gates per adapter"),
    "package": ("training.package", "cli", "build a bundle (base + adapters + manifest) for the kernel"),
    "run": ("kernel.run", "cli", "run a scenario through the kernel with a chosen backend"),
    "evaluate": ("data_gen.evaluate", "cli", "end-to-end evaluation on held-out scenarios"),
    "pipeline": ("forethought.pipeline", "cli", "verify -> generate -> train -> validate -> package -> evaluate"),
    "registry": ("kernel.registry.cli", "cli", "tool registry utilities: registry check FILE..."),
    "demo-dsl": ("forethought.dsl_demo", "cli", "a two-step DSL program with a contract, a violation and its recovery"),
}


def _usage() -> str:
    lines = ["usage: forethought <command> [key=value ...]", "", "commands:"]
    for name, (_, _, help_) in COMMANDS.items():
        lines.append(f"  {name:<10} {help_}")
    lines.append("")
    lines.append("Every command accepts Hydra overrides (key=value, group=option); --cfg prints the resolved config.")
    return "\n".join(lines)


def resolve(command: str) -> Callable[[list[str]], int]:
    mod, fn, _ = COMMANDS[command]
    return getattr(importlib.import_module(mod), fn)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"forethought: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    from forethought.errors import run_guarded

    return run_guarded(lambda: resolve(command)(rest))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
