"""binlake's configuration: one TOML file plus environment overrides, checked field by field.

Every command takes the same file. Each section is a frozen dataclass in a module of its own
(``binlake.config.source``, ``.state``, ``.receiver``, ``.target``, ``.tables``, ``.spark``,
``.applier``, ``.snapshot``, ``.catalog``, ``.maintenance``, ``.cuts``); each key is one of its
fields, stated once with ``setting`` (``binlake.config.section``): its type, parser and limits,
default and meaning. ``Config`` lists the sections once, each field named as its section in the
file; this module reads them all by one loop. A key's environment variable overrides it:
``BINLAKE_<SECTION>_<KEY>`` in upper case (``BINLAKE_SOURCE_PORT=3307``). A value from the
environment is text and is parsed like the file's value would be; relative paths in the file are
relative to the file's folder, relative paths from the environment to the working directory.

Strictness: an unknown key, an unknown section, a wrong type or an out-of-range value is a
``ConfigError`` whose ``field`` names it (``source.port``); typos never pass silently. An
environment variable that looks like an override (``BINLAKE_SOURCE_...``) but names no key is an
error too. ``[target]``, ``[tables]``, ``[spark]``, ``[applier]``, ``[snapshot]``, ``[catalog]``
(Iceberg's JDBC catalog) and ``[cuts]`` configure ``binlake replicate`` (the applier),
``[maintenance]`` ``binlake maintain``; lists and tables given through the environment are TOML
values (``BINLAKE_TABLES_INCLUDE='["shop.*"]'``).

Passwords (``[source]``'s, ``[catalog]``'s) are never in the file: ``password_env`` names an
environment variable holding one (its text is taken as UTF-8 bytes), or ``password_file`` a file
holding it (its bytes as they are, less one trailing newline, ``\n`` or ``\r\n``); never both.
It is kept as bytes in a ``Secret`` (``binlake.config.secrets``), whose ``repr`` and ``str`` are
masked, so it cannot reach a log line, an error message or a traceback's locals by accident.
docs/configuration.md lists every key.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, get_type_hints

from binlake.config.applier import ApplierConfig
from binlake.config.catalog import CatalogConfig, CatalogType
from binlake.config.cuts import CutsConfig
from binlake.config.maintenance import MaintenanceConfig
from binlake.config.receiver import ReceiverConfig, SyncPolicy
from binlake.config.secrets import Secret
from binlake.config.section import ENV_PREFIX, REQUIRED, Key, Loading, Section
from binlake.config.snapshot import SnapshotConfig
from binlake.config.source import ReplicationMode, SourceConfig
from binlake.config.spark import SparkConfig
from binlake.config.state import StateConfig
from binlake.config.tables import OnDrop, TablesConfig
from binlake.config.target import TargetConfig
from binlake.config.values import where
from binlake.errors import ConfigError

__all__ = [
    "ENV_PREFIX",
    "SECTIONS",
    "ApplierConfig",
    "CatalogConfig",
    "CatalogType",
    "Config",
    "CutsConfig",
    "Key",
    "MaintenanceConfig",
    "OnDrop",
    "ReceiverConfig",
    "ReplicationMode",
    "Secret",
    "SnapshotConfig",
    "SourceConfig",
    "SparkConfig",
    "StateConfig",
    "SyncPolicy",
    "TablesConfig",
    "TargetConfig",
    "config_from_mapping",
    "describe_keys",
    "load_config",
]


@dataclass(frozen=True, kw_only=True)
class Config:
    """The whole file: one field per section, named as the section is in the file. They are
    read, built and documented in this order; a section's ``from_values`` may look at those
    before it ([catalog] at [target] and [spark])."""

    source: SourceConfig
    state: StateConfig
    receiver: ReceiverConfig
    target: TargetConfig
    tables: TablesConfig
    spark: SparkConfig
    applier: ApplierConfig
    snapshot: SnapshotConfig
    catalog: CatalogConfig
    maintenance: MaintenanceConfig
    cuts: CutsConfig
    #: The file it was read from (None when built from a mapping).
    path: Path | None = None


def _section_types() -> dict[str, type[Section]]:
    hints = get_type_hints(Config)
    return {
        f.name: hints[f.name]
        for f in fields(Config)
        if isinstance(hints[f.name], type) and issubclass(hints[f.name], Section)
    }


#: Section name -> its dataclass, in ``Config``'s order.
SECTION_TYPES: dict[str, type[Section]] = _section_types()
#: Section name -> its keys.
SECTIONS: dict[str, tuple[Key, ...]] = {name: cls.keys() for name, cls in SECTION_TYPES.items()}


# ---- loading --------------------------------------------------------------------------------


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Config:
    """Read and check the TOML file at ``path`` with overrides from ``environ`` (os.environ)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"config file {path} does not exist", hint="pass the path of a TOML config file"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", hint="fix the TOML syntax") from None
    config = config_from_mapping(data, base_dir=path.absolute().parent, environ=environ)
    return replace(config, path=path)


def config_from_mapping(
    data: Mapping[str, Any], *, base_dir: Path, environ: Mapping[str, str] | None = None
) -> Config:
    """Check parsed TOML ``data``; relative paths resolve against ``base_dir``.

    Every key of every section is parsed first, then the environment's ``BINLAKE_*`` variables
    are checked for typos, then each section is built in ``Config``'s order."""
    env = dict(os.environ if environ is None else environ)
    _check_sections(data)
    values = {
        name: _read_section(data, name, keys, env, base_dir) for name, keys in SECTIONS.items()
    }
    _check_env_typos(env, {section.get("password_env") for section in values.values()})
    loading = Loading(env, base_dir)
    for name, section in SECTION_TYPES.items():
        loading.built[name] = section.from_values(values[name], loading)
    return Config(**loading.built)


def _check_sections(data: Mapping[str, Any]) -> None:
    for name, value in data.items():
        if name not in SECTIONS:
            known = ", ".join(f"[{s}]" for s in SECTIONS)
            raise ConfigError(
                f"unknown section [{name}]", field=name, hint=f"the known sections are {known}"
            )
        if not isinstance(value, dict):
            raise ConfigError(f"{name} must be a section ([{name}])", field=name)
    for name, keys in SECTIONS.items():
        required = [k.name for k in keys if k.default is REQUIRED]
        if name not in data and required:
            raise ConfigError(
                f"section [{name}] is missing",
                field=name,
                hint=f"add [{name}] with at least {', '.join(required)}",
            )


def _read_section(
    data: Mapping[str, Any],
    section: str,
    keys: tuple[Key, ...],
    env: Mapping[str, str],
    base_dir: Path,
) -> dict[str, Any]:
    table: Mapping[str, Any] = data.get(section, {})
    known = {key.name for key in keys}
    for name in table:
        if name not in known:
            raise ConfigError(
                f"unknown key {name!r} in [{section}]",
                field=f"{section}.{name}",
                hint=f"the keys of [{section}] are: {', '.join(sorted(known))}",
            )
    out: dict[str, Any] = {}
    for key in keys:
        field_name = f"{section}.{key.name}"
        env_value = env.get(key.env_var(section))
        if env_value is not None:
            out[key.name] = key.parse(env_value, field_name, Path.cwd())
        elif key.name in table:
            out[key.name] = key.parse(table[key.name], field_name, base_dir)
        elif key.default is REQUIRED:
            raise ConfigError(
                f"{where(field_name)} is missing",
                field=field_name,
                hint=f"set {key.name} in [{section}] (or {key.env_var(section)})",
            )
        else:
            out[key.name] = key.default_in(base_dir)
    return out


def _check_env_typos(env: Mapping[str, str], password_envs: set[str | None]) -> None:
    """``BINLAKE_SOURCE_PROT=...`` must not be ignored: every such variable names a key (or
    holds a password: a ``password_env`` names it)."""
    known = {key.env_var(section) for section, keys in SECTIONS.items() for key in keys}
    prefixes = tuple(f"{ENV_PREFIX}{section}_".upper() for section in SECTIONS)
    for name in sorted(env):
        if name.startswith(prefixes) and name not in known and name not in password_envs:
            section = name[len(ENV_PREFIX) :].split("_", 1)[0].lower()
            raise ConfigError(
                f"environment variable {name} names no key of [{section}]",
                field=section,
                hint=f"unset it or fix the name; see docs/configuration.md for the {section} keys",
            )


def describe_keys() -> list[tuple[str, str, str, str, str]]:
    """(section.key, type, default, environment variable, meaning), the default written as
    docs/configuration.md writes it: for the docs and their test."""
    return [
        (f"{section}.{key.name}", key.kind, _documented(key.default), key.env_var(section), key.doc)
        for section, keys in SECTIONS.items()
        for key in keys
    ]


def _documented(default: Any) -> str:
    if default is REQUIRED:
        return "**required**"
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, str):  # an enum's member too: its value
        return f'"{default}"'
    if isinstance(default, Path):
        return f"`{default}/` beside the config file"
    if isinstance(default, tuple):
        return "[" + ", ".join(f'"{item}"' for item in default) + "]"
    return repr(default)
