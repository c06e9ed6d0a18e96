"""Shared argument handling for the CLI commands.

A command receives its raw arguments: ``key=value`` Hydra overrides,
positional arguments (paths), and flags (``--cfg`` prints the resolved config
and exits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
