"""Hydra composition plus up-front validation that reports every error at once.

Each command has a primary config ``conf/<command>.yaml`` and a pydantic
schema (``extra="forbid"``). Loading a config:

1. checks every ``key=value`` override against the composed config and
   collects all unknown keys (with suggestions), instead of Hydra's
   first-error-only behaviour;
2. composes with Hydra (struct mode: nothing can be added silently);
3. validates the resolved config against the schema, collecting all type
   and value errors.

Any error raises :class:`ConfigError` listing all of them.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

# The subpackages whose folders ship with the package (setup.py maps the repository's top-level folders in).
SUBPACKAGES = ("primitives", "kernel", "data_gen", "training")


# One default per artefact path, shared by the standalone commands and the pipeline: every command reads and writes,
# by default, where `forethought pipeline` (run_dir: runs/pipeline) puts the stage's output, so the chain run by hand
# (generate, train, validate, package, then run/agent/evaluate/bench) and the pipeline meet in the same folders. The
# conf/*.yaml defaults and the schemas' defaults are these (tests/test_paths.py checks every one).
RUN_DIR = "runs/pipeline"
LAYOUT = {stage: f"{RUN_DIR}/{stage}" for stage in ("data", "train", "validate", "bundle", "evaluate")}


def _shipped_conf_dir() -> Path:
    """The shipped configs: ``forethought/conf/`` in an installed wheel (package data), the repository's ``conf/``
    beside the package in a source checkout (an editable install maps the folders in place)."""
    here = Path(__file__).resolve().parent
    packaged = here / "conf"
    return packaged if packaged.is_dir() else here.parent / "conf"


CONF_DIR = _shipped_conf_dir()


def shipped_path(rel: str) -> Path:
    """A file or folder that ships with the package, named as in the source tree (``data_gen/solutions``,
    ``conf/profile``), found through the installed package, never through the current directory. The configs
    name them as ``${shipped:data_gen/solutions}``; user paths (data, runs, domains) stay relative to the
    current directory."""
    top, _, rest = str(rel).strip("/").partition("/")
    if top == "conf":
        base = CONF_DIR
    elif top in SUBPACKAGES or top == "forethought":
        import importlib.util

        name = "forethought" if top == "forethought" else f"forethought.{top}"
        spec = importlib.util.find_spec(name)  # the package's folder, without importing the subpackage
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"${{shipped:{rel}}}: package {name} is not installed")
        base = Path(next(iter(spec.submodule_search_locations)))
    else:
        raise ValueError(
            f"${{shipped:{rel}}}: not a shipped folder; it must start with conf/, forethought/ or one of "
            + ", ".join(f"{s}/" for s in SUBPACKAGES)
        )
    return base / rest if rest else base


OmegaConf.register_new_resolver("shipped", lambda rel: str(shipped_path(rel)), replace=True)


class ConfigError(ValueError):
    def __init__(self, source: str, errors: list[str]):
        self.source = source
        self.errors = errors
        super().__init__(
            f"invalid config {source} ({len(errors)} error{'s' if len(errors) != 1 else ''}):\n"
            + "\n".join(f"  - {e}" for e in errors)
        )


# ``--config-dir DIR`` / ``--config-name NAME`` (Hydra's own flags), set by the CLI for one command: DIR joins the
# search path after the shipped configs (as Hydra's --config-dir does), and NAME (a file in DIR or a shipped config)
# replaces the command's primary config ``conf/<command>.yaml``.
_user_config: dict[str, Any] = {"dir": None, "name": None, "command": None}


@contextlib.contextmanager
def user_configs(command: str, config_dir: str | Path | None, config_name: str | None) -> Iterator[None]:
    """Compose ``command``'s config from the user's ``config_name`` with ``config_dir`` on the search path, for the
    duration of the block (every composition in it sees ``config_dir``: a pipeline's stages find its groups too)."""
    saved = dict(_user_config)
    errors = []
    if config_dir is not None:
        folder = Path(config_dir).expanduser().resolve()
        if not folder.is_dir():
            errors.append(f"--config-dir {config_dir}: no such folder")
        config_dir = folder
    if config_name is not None:
        config_name = str(config_name).removesuffix(".yaml")
        where = [Path(config_dir)] if config_dir is not None else []
        if not errors and not any((x / f"{config_name}.yaml").is_file() for x in [*where, CONF_DIR]):
            errors.append(
                f"--config-name {config_name}: no {config_name}.yaml in "
                + (f"{config_dir} or " if config_dir is not None else "")
                + "the shipped configs"
                + ("" if config_dir is not None else " (--config-dir DIR names the folder of your own)")
            )
    if errors:
        raise ConfigError("command line", errors)
    _user_config.update(dir=config_dir, name=config_name, command=command)
    try:
        yield
    finally:
        _user_config.clear()
        _user_config.update(saved)


def _search_dirs(conf_dir: Path) -> list[Path]:
    return [conf_dir] + ([Path(_user_config["dir"])] if _user_config["dir"] is not None else [])


def _primary(command: str) -> str:
    """The config ``command`` composes: the user's ``--config-name`` for the command it was given to."""
    return _user_config["name"] if _user_config["name"] and _user_config["command"] == command else command


def config_file(command: str, conf_dir: Path | None = None) -> Path:
    """The file of ``command``'s primary config (the first on the search path)."""
    name = _primary(command)
    dirs = _search_dirs(conf_dir or CONF_DIR)
    return next((d / f"{name}.yaml" for d in dirs if (d / f"{name}.yaml").is_file()), dirs[0] / f"{name}.yaml")


def config_source(command: str, conf_dir: Path | None = None) -> str:
    """How errors name ``command``'s config: ``conf/<command>.yaml``, or the user's file."""
    path = config_file(command, conf_dir)
    return f"conf/{command}.yaml" if path == (conf_dir or CONF_DIR) / f"{command}.yaml" else str(path)


def hydra_config_flags(command: str) -> list[str]:
    """The ``--config-dir`` / ``--config-name`` in force for ``command``, as Hydra's own command line takes them (a
    multirun hands over to ``hydra.main``)."""
    flags = ["--config-dir", str(_user_config["dir"])] if _user_config["dir"] is not None else []
    return flags + (["--config-name", _primary(command)] if _primary(command) != command else [])


def config_groups(conf_dir: Path = CONF_DIR) -> set[str]:
    groups = set()
    for top in _search_dirs(conf_dir):
        for root, dirs, _ in os.walk(top):
            for subdir in dirs:
                groups.add(str(Path(root, subdir).relative_to(top)).replace(os.sep, "/"))
    return groups


def group_options(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    """The options of a config group: its files in the shipped configs and in ``--config-dir``."""
    return sorted({f.stem for d in _search_dirs(conf_dir) for f in (d / group).glob("*.yaml")})


def _all_keys(cfg: Any, prefix: str = "") -> list[str]:
    out = []
    if isinstance(cfg, DictConfig):
        for k in cfg.keys():
            key = f"{prefix}.{k}" if prefix else str(k)
            out.append(key)
            try:
                out.extend(_all_keys(cfg._get_node(k), key))  # type: ignore[arg-type]
            except Exception:
                pass
    return out


def _compose(command: str, overrides: list[str], conf_dir: Path, return_hydra_config: bool = False) -> DictConfig:
    from hydra import compose, version
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    # initialize_config_dir(conf_dir), with --config-dir added where Hydra's own --config-dir goes: after the shipped
    # configs (so a user's file extends them by name), before the structured configs.
    backup = get_gh_backup()
    version.setbase("1.3")
    csp = create_config_search_path(search_path_dir=str(conf_dir))
    if _user_config["dir"] is not None:
        csp.prepend(
            provider="command-line", path=f"file://{_user_config['dir']}", anchor=SearchPathQuery(provider="schema")
        )
    Hydra.create_main_hydra2(task_name=command, config_search_path=csp)
    try:
        return compose(config_name=_primary(command), overrides=overrides, return_hydra_config=return_hydra_config)
    finally:
        restore_gh_from_backup(backup)


# Per-primitive tables in conf/, per command: (files, key in them). Their keys must be registered
# primitives (kernel/specs/); a registered primitive a table does not name takes its spec's default.
PRIMITIVE_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "generate": (("data/*.yaml", "sizes"),),
    "validate": (("validate.yaml", "thresholds"),),
    "evaluate": (("evaluate.yaml", "noise.rates"),),
}


# The registered primitives' names, for checking those tables. The primitive registry
# (forethought.kernel.specs) is a layer above this module, so it hands its live view down when it is
# imported (every command with such a table imports it) instead of this module importing it.
_registered_primitives: Callable[[], Sequence[str]] | None = None


def use_primitive_registry(names: Callable[[], Sequence[str]]) -> None:
    """Called by forethought.kernel.specs: where conf tables find the registered primitives."""
    global _registered_primitives
    _registered_primitives = names


def primitive_table_errors(command: str, conf_dir: Path = CONF_DIR) -> list[str]:
    """Every key of ``command``'s per-primitive conf tables that is not a registered primitive, located
    by file and key (the schema would report it too, but not which file to fix)."""
    if command not in PRIMITIVE_TABLES:
        return []
    if _registered_primitives is None:  # fail closed: a table nobody can check is not taken as checked
        raise RuntimeError(
            f"composing {command!r} before the primitive registry (forethought.kernel.specs) was imported"
        )
    SPECS = list(_registered_primitives())
    errors = []
    for pattern, key in PRIMITIVE_TABLES.get(command, ()):
        for path in sorted(conf_dir.glob(pattern)):
            where = f"conf/{path.relative_to(conf_dir).as_posix()}"
            try:
                node = OmegaConf.select(OmegaConf.load(path), key, default=None)
            except Exception as exc:  # a file Hydra cannot read either: reported by the composition
                errors.append(f"{where}: cannot read it: {str(exc).splitlines()[0]}")
                continue
            if node is None:
                continue
            if not isinstance(node, DictConfig):
                got = OmegaConf.to_container(node) if not isinstance(node, (str, int, float)) else repr(node)
                errors.append(f"{where}: {key}: must map primitive names to values, got {got}")
                continue
            for name in node.keys():
                if name not in SPECS:
                    hint = difflib.get_close_matches(str(name), list(SPECS), n=1)
                    errors.append(
                        f"{where}: {key}.{name}: not a registered primitive"
                        + (f" (did you mean {hint[0]!r}?)" if hint else "")
                        + f"; registered: {', '.join(SPECS)}"
                    )
    return errors


# Tables keyed by primitive whose entries a preset lists only where it differs (``train.per_primitive.match_func:
# {epochs: 10}``): setting another of an entry's documented fields, or an entry the preset leaves out, is a plain
# override, as for any documented key, not an addition the user must spell ``+key``. The schema still refuses an
# unknown primitive or field, with its location.
OPEN_TABLES = ("train.per_primitive",)


def _in_open_table(base: DictConfig, key: str) -> bool:
    return any(
        key.startswith(table + ".") and isinstance(OmegaConf.select(base, table, default=None), DictConfig)
        for table in OPEN_TABLES
    )


def _unknown_overrides(command: str, overrides: list[str], conf_dir: Path) -> tuple[list[str], list[str]]:
    """Check every ``key=value`` override against the composed config, and the conf's per-primitive tables
    against the registry.

    Returns ``(errors, kept)``: one error per unknown key (with a suggestion) and
    the overrides that remain once the unknown ones are left out.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    source = config_source(command, conf_dir)
    if not config_file(command, conf_dir).is_file():
        raise ConfigError(source, [f"no config named {_primary(command)!r} in {conf_dir}"])
    errors: list[str] = []
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as exc:  # malformed override syntax
        raise ConfigError(source, [f"cannot parse overrides: {exc}"]) from None
    errors += primitive_table_errors(command, conf_dir)
    groups = config_groups(conf_dir)
    # A group option that does not exist is reported with the available ones, and left out so
    # that the rest still composes and every other error is listed too (Hydra stops at it).
    bad: set[str] = set()
    for override in parsed:
        if (
            override.key_or_group in groups
            and not (override.is_sweep_override() or override.is_delete())
            and isinstance(override.value(), str)
        ):
            options = group_options(override.key_or_group, conf_dir)
            if override.value() not in options:
                hint = difflib.get_close_matches(override.value(), options, n=1)
                errors.append(
                    f"{override.key_or_group}={override.value()}: no such option"
                    + (f" (did you mean {hint[0]!r}?)" if hint else "")
                    + f"; available: {', '.join(options)}"
                )
                bad.add(override.input_line)
    group_ovr = [
        o.input_line
        for o in parsed
        if (o.key_or_group in groups or o.key_or_group.startswith("hydra")) and o.input_line not in bad
    ]
    try:
        base = _compose(command, group_ovr, conf_dir)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(source, [str(exc).splitlines()[0]]) from None
    known = _all_keys(base)
    kept: list[str] = []
    for override in parsed:
        if override.input_line in bad:
            continue
        if (
            override.key_or_group in groups
            or override.key_or_group.startswith("hydra")
            or override.is_add()
            or override.is_force_add()
        ):
            kept.append(override.input_line)
            continue
        key = override.key_or_group
        missing = OmegaConf.select(base, key, default=_MISSING) is _MISSING
        if missing and not override.is_delete() and _in_open_table(base, key):
            # a primitive's setting the preset does not list (the schema checks the name and the field)
            kept.append("+" + override.input_line)
        elif missing:
            hint = difflib.get_close_matches(key, known, n=1)
            errors.append(f"{key}: unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        elif _in_open_table(base, key) and not override.is_delete():
            # a table the preset lists, given fields it does not (lookup={steps: 3000, none_share: 0.2} where the
            # preset has lookup={steps: 2000}): merged as Hydra merges a table, the schema checking every field
            kept.append("++" + override.input_line)
        else:
            kept.append(override.input_line)
    return errors, kept


def compose_config(
    command: str, overrides: list[str] | None = None, *, conf_dir: Path = CONF_DIR, return_hydra_config: bool = False
) -> DictConfig:
    """Compose ``conf/<command>.yaml`` with overrides, reporting all unknown keys at once."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides or [])
    source = config_source(command, conf_dir)
    errors, kept = _unknown_overrides(command, overrides, conf_dir)
    if errors:
        raise ConfigError(source, errors)
    try:
        return _compose(command, kept, conf_dir, return_hydra_config=return_hydra_config)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(source, [str(exc).splitlines()[0]]) from None


def compose_and_validate(
    command: str, overrides: list[str] | None, schema: type[T], *, conf_dir: Path = CONF_DIR
) -> tuple[DictConfig, T]:
    """Compose and validate in one go, listing unknown keys *and* type/value errors together.

    Unknown overrides are left out to compose the rest, so ``a.typo=1 a.n=abc``
    reports both the unknown key and the bad value in one :class:`ConfigError`.
    """
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides or [])
    source = f"{config_source(command, conf_dir)} + overrides"
    errors, kept = _unknown_overrides(command, overrides, conf_dir)
    try:
        cfg = _compose(command, kept, conf_dir)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(source, errors + [str(exc).splitlines()[0]]) from None
    try:
        model = validate(cfg, schema, source)
    except ConfigError as exc:
        raise ConfigError(source, errors + exc.errors) from None
    if errors:
        raise ConfigError(source, errors)
    return cfg, model


_MISSING = object()

# Config keys whose value is a credential. Printing a config (``--cfg``) shows them as MASK, as pydantic's
# SecretStr (the schemas' type for them) shows them in every dump and file.
SECRET_KEYS = frozenset({"api_key"})
MASK = "**********"
# Fields a credential is pasted into by mistake (the variable's or the file's name asked for, the key given): an error
# about one never shows its value.
_NEVER_ECHOED = SECRET_KEYS | {"api_key_env", "api_key_file"}


def mask_secrets(value: Any) -> Any:
    """``value`` (a plain container: a config as dicts and lists, or override strings) with every credential
    replaced by MASK: the values of SECRET_KEYS, and ``...api_key=VALUE`` in an override string."""
    if isinstance(value, dict):
        return {k: (MASK if k in SECRET_KEYS and v not in (None, "") else mask_secrets(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str) and secrets_on_command_line([value]):
        return _SECRET_ON_COMMAND_LINE.sub(
            lambda m: (
                m.group(0)
                if m.group("value").lower() in _NO_VALUE
                else m.group(0)[: m.start("value") - m.start()] + MASK
            ),
            value,
        )
    return value


# ``<path>.api_key=VALUE`` (or ``api_key: VALUE`` inside a dict or list override, as pipeline's overrides.<stage> hold
# them): a secret written on the command line. An empty or null value sets no secret.
_SECRET_ON_COMMAND_LINE = re.compile(
    r"(?P<field>(?<![\w.])[\w.]*(?<![\w])(?:" + "|".join(sorted(SECRET_KEYS)) + r"))\s*[=:]\s*(?P<value>[^\s,\]}]*)"
)
_NO_VALUE = {"", "null", "~", "none", "''", '""'}


def secrets_on_command_line(args: Sequence[str]) -> list[str]:
    """The secret fields that ``args`` (a command's arguments) set to a value, as written (``backend.api_key``)."""
    found = []
    for arg in args:
        for match in _SECRET_ON_COMMAND_LINE.finditer(arg):
            if match.group("value").lower() not in _NO_VALUE:
                found.append(match.group("field").lstrip("+~"))
    return found


def refuse_secrets_on_command_line(args: Sequence[str]) -> None:
    """The one rule for credentials on every command: a key on the command line is refused before anything runs. It
    would stay in the shell's history and the process list, and a recorded command line (a bench report, the pipeline's
    report) would carry it into files; the value itself is never echoed."""
    fields = secrets_on_command_line(args)
    if fields:
        field = fields[0]
        section = field.rsplit(".", 1)[0] if "." in field else "backend"
        raise ConfigError(
            "command line",
            [
                f"{field}: a key is not accepted on the command line (it would stay in the shell history and the process list, and "
                f"a recorded command line would carry it into reports); put it in the environment variable $OPENAI_API_KEY "
                f"({section}.api_key_env=NAME names another variable) or in a file whose first line is the key "
                f"({section}.api_key_file=PATH) (docs/serving.md, Credentials)"
            ],
        )


def recorded_command(words: Sequence[str]) -> str:
    """A command line as reports record it: every secret masked (the CLI refuses one; a caller from Python may pass one)."""
    return " ".join(mask_secrets([str(w) for w in words]))


def reject_duplicates(values: list[str], what: str) -> list[str]:
    """For a list-valued setting whose items must be distinct (a pydantic field validator body)."""
    dup = sorted({x for x in values if values.count(x) > 1})
    if dup:
        raise ValueError(f"{what} listed more than once: {', '.join(dup)}")
    return values


def validate(cfg: DictConfig | dict[str, Any], schema: type[T], source: str = "config") -> T:
    """Validate a composed config against its schema, listing every error."""
    if isinstance(cfg, DictConfig) and "hydra" in cfg:
        cfg = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"])
    data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    if isinstance(data, dict):
        data.pop("hydra", None)
    try:
        # Strict JSON-mode validation, for every command alike: no '16' -> 16 or 'yes' -> True
        # coercion (a quoted number or a word for a flag is a mistake worth reporting), while
        # strings still become paths and enums, and whole numbers still fit float fields.
        return schema.model_validate_json(json.dumps(data), strict=True)
    except (TypeError, ValueError) as exc:
        if not isinstance(exc, ValidationError):  # not JSON-serialisable: a config cannot hold it
            raise ConfigError(source, [f"<root>: {exc}"]) from None
        errs = []
        for error in exc.errors():
            loc = ".".join(str(p) for p in _user_loc(error["loc"], data)) or "<root>"
            msg = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
            if error["type"] != "extra_forbidden" and "input" in error and not isinstance(error["input"], (dict, list)):
                if loc.rsplit(".", 1)[-1] in _NEVER_ECHOED or "user:key@host" in msg:  # a URL with a key in it
                    msg += (
                        " (the value is not shown: a key pasted here by mistake must not reach the terminal or a log)"
                    )
                else:
                    msg += f" (got {error['input']!r})"
            errs.append(f"{loc}: {msg}")
        raise ConfigError(source, errs) from None


def _user_loc(loc: tuple[Any, ...], data: Any) -> list[Any]:
    """The error's location as the user wrote it: without the tags pydantic inserts for a
    discriminated union (``backend.hf.device`` is ``backend.device`` in the config)."""
    out: list[Any] = []
    cur = data
    for i, part in enumerate(loc):
        if isinstance(cur, dict):
            if part in cur:
                out.append(part)
                cur = cur[part]
                continue
            if i + 1 < len(loc) and loc[i + 1] in cur:
                continue  # a union tag between two levels of the user's config
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
            continue
        out.append(part)
        cur = None
    return out
