"""binlake's configuration: one TOML file plus environment overrides, checked field by field.

Every command takes the same file. Each section is a frozen dataclass; each key has one spec
(``Key``) that says its type, default and limits, and the environment variable that overrides
it: ``BINLAKE_<SECTION>_<KEY>`` in upper case (``BINLAKE_SOURCE_PORT=3307``). A value from the
environment is text and is parsed like the file's value would be; relative paths in the file are
relative to the file's folder, relative paths from the environment to the working directory.

Strictness: an unknown key, an unknown section, a wrong type or an out-of-range value is a
``ConfigError`` whose ``field`` names it (``source.port``); typos never pass silently. An
environment variable that looks like an override (``BINLAKE_SOURCE_...``) but names no key is an
error too. ``[target]``, ``[tables]``, ``[spark]``, ``[applier]``, ``[snapshot]`` and
``[catalog]`` (``binlake.config.catalog``: Iceberg's JDBC catalog) configure ``binlake
replicate`` (the applier), ``[maintenance]`` (``binlake.config.maintenance``) ``binlake
maintain``; lists and tables given through the environment are TOML values
(``BINLAKE_TABLES_INCLUDE='["shop.*"]'``).

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
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from binlake.config.applier import (
    APPLIER_KEYS,
    SNAPSHOT_KEYS,
    SPARK_KEYS,
    TABLES_KEYS,
    TARGET_KEYS,
    ApplierConfig,
    OnDrop,
    SnapshotConfig,
    SparkConfig,
    TablesConfig,
    TargetConfig,
)
from binlake.config.catalog import (
    CATALOG_KEYS,
    CatalogConfig,
    CatalogType,
    catalog_config,
    catalog_password_env,
)
from binlake.config.cuts import CUTS_KEYS, CutsConfig
from binlake.config.maintenance import MAINTENANCE_KEYS, MaintenanceConfig
from binlake.config.secrets import Secret, read_password
from binlake.config.values import (
    ENV_PREFIX,
    REQUIRED,
    Key,
    bool_value,
    enum_value,
    float_value,
    int_value,
    path_value,
    str_value,
    where,
)
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

MAX_SERVER_ID = (1 << 32) - 1
#: The largest heartbeat period MariaDB and MySQL accept (seconds).
MAX_HEARTBEAT_S = 4_294_967.0
MIN_RELAY_FILE_SIZE = 4096
MAX_RELAY_FILE_SIZE = 1 << 30


class ReplicationMode(StrEnum):
    """How the receiver asks the source where to resume: by GTID state or by file and offset."""

    GTID = "gtid"
    FILE = "file"


class SyncPolicy(StrEnum):
    """When the receiver fsyncs the relay log (always at a transaction boundary)."""

    GROUPED = "grouped"
    EVERY_TRANSACTION = "every-transaction"


# ---- sections -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceConfig:
    """``[source]``: the MariaDB/MySQL primary and how to reach it."""

    host: str
    port: int
    user: str
    server_id: int
    mode: ReplicationMode
    heartbeat_period_s: float
    connect_timeout_s: float
    ssl_ca: Path | None
    ssl_cert: Path | None
    ssl_key: Path | None
    ssl_verify: bool
    #: Where the password came from, for messages: "environment variable X", "file F", "none".
    password_origin: str
    password: Secret | None = field(default=None, repr=False)
    #: The environment variable the password is read from (so it is not taken for a typo).
    password_env: str | None = None
    #: The file the password is read from (snapshot chunk tasks read it again on the executors:
    #: the password itself never travels to them).
    password_file: Path | None = None


@dataclass(frozen=True)
class StateConfig:
    """``[state]``: the folder binlake owns (relay log, checkpoint, source state, lock)."""

    dir: Path

    @property
    def relay_dir(self) -> Path:
        return self.dir / "relay"

    @property
    def checkpoint_path(self) -> Path:
        return self.dir / "relay.checkpoint"

    @property
    def source_state_path(self) -> Path:
        return self.dir / "source.state"

    @property
    def snapshot_plan_path(self) -> Path:
        return self.dir / "snapshot.plan"

    @property
    def snapshot_requests_dir(self) -> Path:
        return self.dir / "snapshot-requests"


@dataclass(frozen=True)
class ReceiverConfig:
    """``[receiver]``: fsync grouping, relay file size, reconnect policy."""

    sync: SyncPolicy
    sync_interval_ms: int
    sync_max_transactions: int
    max_relay_file_size: int
    reconnect_initial_s: float
    reconnect_max_s: float
    #: 0 = retry forever (while running without --until-caught-up).
    reconnect_max_attempts: int
    #: With --until-caught-up: give up when the source stays unreachable this long.
    catch_up_give_up_s: float
    progress_interval_s: float


@dataclass(frozen=True)
class Config:
    source: SourceConfig
    state: StateConfig
    receiver: ReceiverConfig
    #: The file it was read from (None when built from a mapping).
    path: Path | None = None
    target: TargetConfig = field(default_factory=TargetConfig)
    tables: TablesConfig = field(default_factory=TablesConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    applier: ApplierConfig = field(default_factory=ApplierConfig)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)
    catalog: CatalogConfig = field(default_factory=CatalogConfig)
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)
    cuts: CutsConfig = field(default_factory=CutsConfig)


# ---- key specs ------------------------------------------------------------------------------

SOURCE_KEYS: tuple[Key, ...] = (
    Key("host", "str", str_value(), doc="host name or address of the primary"),
    Key("port", "int", int_value(1, 65535), 3306, "TCP port"),
    Key("user", "str", str_value(), doc="replication user (REPLICATION SLAVE, REPLICATION CLIENT)"),
    Key(
        "password_env",
        "str",
        str_value(),
        None,
        "name of the environment variable with the password",
    ),
    Key(
        "password_file",
        "path",
        path_value,
        None,
        "file holding the password (its bytes, one trailing newline dropped)",
    ),
    Key(
        "server_id",
        "int",
        int_value(1, MAX_SERVER_ID),
        doc="binlake's server id on the primary: unique among its replicas",
    ),
    Key(
        "mode",
        "gtid or file",
        enum_value(ReplicationMode),
        ReplicationMode.GTID,
        "resume by GTID state (gtid) or by binlog file and offset (file)",
    ),
    Key(
        "heartbeat_period_s",
        "float",
        float_value(0.0, MAX_HEARTBEAT_S),
        5.0,
        "the primary sends a heartbeat after this much silence; 2x without any is a dead link",
    ),
    Key(
        "connect_timeout_s",
        "float",
        float_value(0.0, 3600.0),
        10.0,
        "TCP connect and login timeout",
    ),
    Key(
        "ssl_ca", "path", path_value, None, "CA certificate file; setting any ssl_* key enables TLS"
    ),
    Key("ssl_cert", "path", path_value, None, "client certificate file"),
    Key("ssl_key", "path", path_value, None, "client private key file"),
    Key("ssl_verify", "bool", bool_value, True, "verify the server certificate and host name"),
)

STATE_KEYS: tuple[Key, ...] = (
    Key(
        "dir", "path", path_value, doc="the state folder: relay log, checkpoint, source state, lock"
    ),
)

RECEIVER_KEYS: tuple[Key, ...] = (
    Key(
        "sync",
        "grouped or every-transaction",
        enum_value(SyncPolicy),
        SyncPolicy.GROUPED,
        "grouped: one fsync per sync_interval_ms or sync_max_transactions; every-transaction: "
        "one per transaction",
    ),
    Key(
        "sync_interval_ms", "int", int_value(1, 60_000), 50, "grouped: longest wait before an fsync"
    ),
    Key(
        "sync_max_transactions",
        "int",
        int_value(1, 1_000_000),
        1000,
        "grouped: most transactions per fsync",
    ),
    Key(
        "max_relay_file_size",
        "int",
        int_value(MIN_RELAY_FILE_SIZE, MAX_RELAY_FILE_SIZE),
        128 * 1024 * 1024,
        "a relay file is rotated at the first transaction boundary past this",
    ),
    Key(
        "reconnect_initial_s",
        "float",
        float_value(0.0, 3600.0),
        0.5,
        "first wait before reconnecting; doubles per failed attempt (with jitter)",
    ),
    Key(
        "reconnect_max_s", "float", float_value(0.0, 3600.0), 30.0, "longest wait between attempts"
    ),
    Key(
        "reconnect_max_attempts",
        "int",
        int_value(0, 1_000_000),
        0,
        "give up after this many failed attempts in a row; 0 = never",
    ),
    Key(
        "catch_up_give_up_s",
        "float",
        float_value(0.0, 86_400.0),
        60.0,
        "with --until-caught-up: give up when the source stays unreachable this long",
    ),
    Key(
        "progress_interval_s",
        "float",
        float_value(0.0, 3600.0),
        5.0,
        "seconds between progress log lines (when not on a terminal)",
    ),
)

SECTIONS: dict[str, tuple[Key, ...]] = {
    "source": SOURCE_KEYS,
    "state": STATE_KEYS,
    "receiver": RECEIVER_KEYS,
    "target": TARGET_KEYS,
    "tables": TABLES_KEYS,
    "spark": SPARK_KEYS,
    "applier": APPLIER_KEYS,
    "snapshot": SNAPSHOT_KEYS,
    "catalog": CATALOG_KEYS,
    "maintenance": MAINTENANCE_KEYS,
    "cuts": CUTS_KEYS,
}


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
    """Check parsed TOML ``data``; relative paths resolve against ``base_dir``."""
    env = dict(os.environ if environ is None else environ)
    _check_sections(data)
    values = {
        name: _read_section(data, name, keys, env, base_dir) for name, keys in SECTIONS.items()
    }
    source = _source(values["source"], env)
    _check_env_typos(env, {source.password_env, catalog_password_env(data.get("catalog", {}), env)})
    receiver = _receiver(values["receiver"])
    target = values["target"]
    if target["warehouse"] is None:
        target["warehouse"] = base_dir / "warehouse"
    spark = SparkConfig(**values["spark"])
    catalog = catalog_config(
        values["catalog"], env, target_catalog=target["catalog"], spark_conf=spark.conf
    )
    return Config(
        source,
        StateConfig(**values["state"]),
        receiver,
        target=TargetConfig(**target),
        tables=TablesConfig(**values["tables"]),
        spark=spark,
        applier=ApplierConfig(**values["applier"]),
        snapshot=SnapshotConfig(**values["snapshot"]),
        catalog=catalog,
        maintenance=MaintenanceConfig(**values["maintenance"]),
        cuts=CutsConfig(**values["cuts"]),
    )


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
            out[key.name] = key.default
    return out


def _source(values: dict[str, Any], env: Mapping[str, str]) -> SourceConfig:
    password_env: str | None = values.pop("password_env")
    password_file: Path | None = values.pop("password_file")
    password, origin = read_password("source", password_env, password_file, env)
    tls_paths = [values[k] for k in ("ssl_ca", "ssl_cert", "ssl_key")]
    if (values["ssl_cert"] is None) != (values["ssl_key"] is None):
        missing = "ssl_key" if values["ssl_key"] is None else "ssl_cert"
        raise ConfigError(
            "[source] ssl_cert and ssl_key go together",
            field=f"source.{missing}",
            hint="set both the client certificate and its key, or neither",
        )
    for key, path in zip(("ssl_ca", "ssl_cert", "ssl_key"), tls_paths, strict=True):
        if path is not None and not path.is_file():
            raise ConfigError(f"[source] {key}: {path} is not a file", field=f"source.{key}")
    return SourceConfig(
        **values,
        password_origin=origin,
        password=password,
        password_env=password_env,
        password_file=password_file,
    )


def _receiver(values: dict[str, Any]) -> ReceiverConfig:
    if values["reconnect_max_s"] < values["reconnect_initial_s"]:
        raise ConfigError(
            f"[receiver] reconnect_max_s ({values['reconnect_max_s']:g}) is smaller than "
            f"reconnect_initial_s ({values['reconnect_initial_s']:g})",
            field="receiver.reconnect_max_s",
        )
    return ReceiverConfig(**values)


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
    """(section.key, type, default, environment variable, meaning) for the docs and tests."""
    rows = []
    for section, keys in SECTIONS.items():
        for key in keys:
            default = "required" if key.default is REQUIRED else repr(key.default)
            if isinstance(key.default, StrEnum):
                default = repr(key.default.value)
            rows.append((f"{section}.{key.name}", key.kind, default, key.env_var(section), key.doc))
    return rows
