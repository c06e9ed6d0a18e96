"""Shared argument handling for the CLI commands.

A command receives its raw arguments: ``key=value`` Hydra overrides,
positional arguments (paths), and flags (``--cfg`` prints the resolved config
and exits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

T = TypeVar("T", bound=BaseModel)


@dataclass
class Args:
    overrides: list[str] = field(default_factory=list)
    positional: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)


def split_args(args: list[str]) -> Args:
    out = Args()
    for arg in args:
        if arg.startswith("-"):
            out.flags.add(arg)
        elif "=" in arg:
            out.overrides.append(arg)
        else:
            out.positional.append(arg)
    return out


def load(command: str, args: Args, schema: type[T]) -> T | None:
    """Compose and validate ``conf/<command>.yaml``; with ``--cfg`` print it and return None."""
    from omegaconf import OmegaConf

    from forethought.config import compose_and_validate, mask_secrets

    cfg, model = compose_and_validate(command, args.overrides, schema)
    if "--cfg" in args.flags:
        # Credentials are masked: a printed config ends up in logs, issues and screenshots.
        print(OmegaConf.to_yaml(OmegaConf.create(mask_secrets(OmegaConf.to_container(cfg, resolve=False)))))
        return None
    return model


def fetch_or_convert(
    argv: list[str] | None,
    *,
    description: str,
    fetch_help: str,
    convert_help: str,
    fetch: Callable[[Path], int],
    convert: Callable[[Path, Path], int],
) -> int:
    """The command line of the set-up scripts that write a file users keep (``scripts/word_vectors.py``,
    ``scripts/pretrained_base.py``): ``fetch OUT`` or ``convert SOURCE OUT``; an existing OUT is refused (exit 2)
    before anything is downloaded, read or written."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help=fetch_help).add_argument("out", type=Path)
    convert_parser = commands.add_parser("convert", help=convert_help)
    convert_parser.add_argument("source", type=Path)
    convert_parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.out.exists():
        print(f"{args.out}: already exists; choose another path or delete it", file=sys.stderr)
        return 2
    return convert(args.source, args.out) if args.command == "convert" else fetch(args.out)
