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
    "verify": ("forethought.data_gen.verify", "cli", "replay worked solutions through the kernel and check them"),
    "migrate": (
        "forethought.data_gen.migrate",
        "cli",
        "rewrite solution files of an older format version (with a backup)",
    ),
    "generate": ("forethought.data_gen.generate", "cli", "expand verified solutions into the five SFT datasets"),
    "train": ("forethought.training.train", "cli", "LoRA fine-tuning of the SLM primitives"),
    "validate": ("forethought.training.validate", "cli", "exact-match and contract gates per adapter"),
    "package": ("forethought.training.package", "cli", "build a bundle (base + adapters + manifest) for the kernel"),
    "import-data": (
        "forethought.training.import_data",
        "cli",
        "a datasets dataset (hub-layout folder or load_dataset path) in, checked as generated data: import-data SOURCE",
    ),
    "export": (
        "forethought.training.export",
        "cli",
        "a bundle's adapters (or with --merge, merged models) in hub layout with model cards",
    ),
    "run": ("forethought.kernel.run_command", "cli", "run a scenario through the kernel with a chosen backend"),
    "agent": (
        "forethought.kernel.agent_command",
        "cli",
        "the kernel on your own tools (Python, MCP): a conversation, turn by turn",
    ),
    "evaluate": ("forethought.evaluation", "cli", "end-to-end evaluation on held-out scenarios"),
    "pipeline": ("forethought.pipeline", "cli", "verify -> generate -> train -> validate -> package -> evaluate"),
    "bench": (
        "forethought.bench.bfcl_run",
        "cli",
        "bench bfcl|tau2: BFCL multi-turn, tau2 telecom solo (kernel|responder|vanilla); bench serving",
    ),
    "registry": ("forethought.kernel.registry.cli", "cli", "tool registry utilities: registry check FILE..."),
    "new-domain": (
        "forethought.kernel.new_domain",
        "cli",
        "a domain folder of your own from a registry file or an MCP server: new-domain NAME --from FILE|mcp:<server>",
    ),
    "demo-dsl": ("forethought.dsl_demo", "cli", "a two-step DSL program with a contract, a violation and its recovery"),
}
# Commands configured by conf/<command>.yaml: their usage line (positional
# arguments) and the flags they accept besides --help and --cfg.
CONFIGURED: dict[str, tuple[str, set[str]]] = {
    "verify": ("[PATH ...]", set()),
    "generate": ("", set()),
    "train": ("", {"-m", "--multirun"}),
    "validate": ("", set()),
    "package": ("", set()),
    "export": ("", {"--merge"}),
    "run": ("SCENARIO", set()),
    "agent": ("", set()),
    "evaluate": ("", set()),
    "pipeline": ("", set()),
    "bench": ("bfcl|tau2|serving", set()),
}
# Subcommands with a config of their own: (command, subcommand) -> its config (conf/<name>.yaml).
SUBCOMMAND_CONFIGS: dict[tuple[str, str], str] = {("bench", "tau2"): "bench_tau2"}
# Every command line whose --help is a promise (tests/test_cli.py runs each in a fresh process).
HELP_LINES: list[list[str]] = [
    *([c] for c in COMMANDS),
    ["bench", "bfcl"],
    ["bench", "tau2"],
    ["bench", "serving"],
    ["registry", "check"],
]


def _usage() -> str:
    lines = ["usage: forethought <command> [key=value ...]", "", "commands:"]
    for name, (_, _, help_) in COMMANDS.items():
        lines.append(f"  {name:<10} {help_}")
    lines.append("")
    lines.append("Every command accepts Hydra overrides (key=value, group=option); --cfg prints the resolved config;")
    lines.append("--config-dir DIR --config-name NAME composes a run config of yours (DIR/NAME.yaml) that may extend")
    lines.append("the shipped ones (docs/configs.md); forethought <command> --help lists its settings;")
    lines.append("forethought --version prints the version.")
    return "\n".join(lines)


def command_help(command: str, subcommand: str | None = None) -> str:
    """What ``forethought <command> [subcommand] --help`` prints: usage, config file, groups and every default setting."""
    from omegaconf import OmegaConf

    from forethought.config import compose_config, config_file, config_source, group_options

    # The command's own module first: composing a config checks its per-primitive tables against the
    # primitive registry, which the command's imports register (as they do when the command runs).
    resolve(command)
    positional, flags = CONFIGURED[command]
    conf = SUBCOMMAND_CONFIGS.get((command, subcommand or ""), command)
    if conf != command:
        positional = str(subcommand)
    extra = "[-m|--multirun]" if "--multirun" in flags else ""
    usage = " ".join(
        x
        for x in (
            "usage: forethought",
            command,
            positional,
            "[key=value ...]",
            "[--cfg]",
            "[--config-dir DIR] [--config-name NAME]",
            extra,
        )
        if x
    )
    cfg = compose_config(conf, [])
    raw = OmegaConf.to_container(OmegaConf.load(config_file(conf)))
    defaults = [d for d in raw.get("defaults", []) if isinstance(d, dict)]  # type: ignore[union-attr]
    lines = [
        usage,
        "",
        COMMANDS[command][2] + ".",
        "",
        f"config: {config_source(conf)} (strict: unknown keys and wrong types are rejected, all at once)",
    ]
    if defaults:
        lines.append("config groups (group=option):")
        for entry in defaults:
            for group, chosen in entry.items():
                group = str(group).removeprefix("override ")
                options = group_options(group)
                lines.append(f"  {group}={chosen}" + (f"  (options: {', '.join(options)})" if options else ""))
    lines += ["", "settings and their defaults (override with key=value):", OmegaConf.to_yaml(cfg).rstrip()]
    return "\n".join(lines)


def version() -> str:
    """The installed distribution's version (what pip shows), or the source tree's when run uninstalled."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("forethought")
    except PackageNotFoundError:
        return "unknown (not installed)"


def resolve(command: str) -> Callable[[list[str]], int]:
    mod, fn, _ = COMMANDS[command]
    return getattr(importlib.import_module(mod), fn)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] in ("-V", "--version"):
        print(f"forethought {version()}")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"forethought: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    from forethought.config import refuse_secrets_on_command_line
    from forethought.errors import run_guarded

    # One rule for credentials, whatever the command: never on its command line (docs/guarantees.md).
    if run_guarded(lambda: refuse_secrets_on_command_line(rest)) != 0:
        return 2
    if command in CONFIGURED:
        try:
            rest, config_dir, config_name = config_flags(rest)
        except ValueError as exc:
            print(f"error: forethought {command}: {exc}", file=sys.stderr)
            return 2
        if "-h" in rest or "--help" in rest:
            sub = next((a for a in rest if not a.startswith("-") and "=" not in a), None)
            return run_guarded(
                lambda: _with_configs(command, config_dir, config_name, lambda: command_help(command, sub))
            )
        flags = [a for a in rest if a.startswith("-")]
        bad = sorted(set(flags) - {"--cfg"} - CONFIGURED[command][1])
        if bad:
            accepted = ", ".join(["--help", "--cfg", *CONFIG_FLAGS, *sorted(CONFIGURED[command][1])])
            print(
                f"error: forethought {command}: unknown flag(s) {', '.join(bad)}; accepted: {accepted}", file=sys.stderr
            )
            return 2
        return run_guarded(lambda: _with_configs(command, config_dir, config_name, lambda: resolve(command)(rest)))
    return run_guarded(lambda: resolve(command)(rest))


# Hydra's own flags for a run config of the user's: --config-dir DIR (also -cd) adds DIR to the search path after the
# shipped configs; --config-name NAME (also -cn) composes NAME.yaml instead of conf/<command>.yaml.
CONFIG_FLAGS = ("--config-dir", "--config-name")
_CONFIG_FLAG_ALIASES = {
    "--config-dir": "--config-dir",
    "-cd": "--config-dir",
    "--config-name": "--config-name",
    "-cn": "--config-name",
}


def config_flags(args: list[str]) -> tuple[list[str], str | None, str | None]:
    """``args`` without ``--config-dir DIR`` and ``--config-name NAME`` (or ``-cd``/``-cn``, or ``--flag=VALUE``), and
    their values."""
    rest: list[str] = []
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        if flag in _CONFIG_FLAG_ALIASES:
            name = _CONFIG_FLAG_ALIASES[flag]
            if not eq:
                if i + 1 >= len(args) or args[i + 1].startswith("-"):
                    raise ValueError(
                        f"{flag} needs a value ({'a folder' if name == '--config-dir' else 'a config name'})"
                    )
                i += 1
                value = args[i]
            if name in found:
                raise ValueError(f"{name} given twice")
            found[name] = value
        else:
            rest.append(arg)
        i += 1
    return rest, found.get("--config-dir"), found.get("--config-name")


def _with_configs(command: str, config_dir: str | None, config_name: str | None, body: Callable[[], object]) -> int:
    from forethought.config import user_configs

    with user_configs(command, config_dir, config_name):
        out = body()
    if isinstance(out, str):  # --help's text
        print(out)
        return 0
    return int(out or 0)  # type: ignore[call-overload]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
