"""``[catalog]``: the Iceberg catalog binlake writes to, when it is not the embedded one.

Absent (or ``type = "embedded"``): binlake's embedded catalog, Iceberg's JDBC catalog on an
SQLite file in ``[target] warehouse`` (``binlake.lake.catalog.embedded``: its commit is an
atomic compare-and-swap across processes). ``type = "hadoop"``: the Hadoop catalog in ``[target]
warehouse`` that was the embedded default before (a commit is a check-then-rename: two writers
in two processes can lose one's commit; docs/spark.md). ``type = "jdbc"``: Iceberg's JDBC
catalog (``org.apache.iceberg.jdbc.JdbcCatalog``) in a database, PostgreSQL tested
(docs/spark.md), at ``uri``, its tables' files in ``warehouse`` (a URI every Spark executor
reaches: ``s3a://bucket/lake``, or ``file:/srv/lake`` on storage every host mounts). The
password follows the rules of ``[source]``'s (never in the file: ``password_env`` or
``password_file``). Other catalogs (REST, Hive, Glue, Nessie) stay ``[spark.conf]`` passthrough.

``CatalogConfig.from_values`` checks the section against the rest: a ``[spark.conf]`` that also
defines the catalog named ``[target] catalog`` is an error (two definitions, no silent winner),
and so is any JDBC key under an embedded catalog.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

from binlake.config.secrets import Secret, read_password
from binlake.config.section import Loading, Section, setting
from binlake.config.spark import SparkConfig
from binlake.config.target import TargetConfig
from binlake.config.values import enum_value, int_value, path_value, str_value, where
from binlake.errors import ConfigError

__all__ = ["CatalogConfig", "CatalogType", "SchemaVersion", "location_value"]

#: A URI scheme (``s3a:``, ``file:``, ``hdfs:``...), as opposed to a path.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

#: Keys that mean something only for a JDBC catalog (the embedded catalogs refuse them).
_JDBC_ONLY = ("uri", "user", "password_env", "password_file", "warehouse")


class CatalogType(StrEnum):
    EMBEDDED = "embedded"
    HADOOP = "hadoop"
    JDBC = "jdbc"


class SchemaVersion(StrEnum):
    """The JDBC catalog's table layout: V1 adds views (and migrates a V0 database in place)."""

    V0 = "V0"
    V1 = "V1"


def location_value(value: object, name: str, base: Path) -> str:
    """A warehouse location: a URI (``s3a://b/lake``, ``file:/srv/lake``) as it is, or a path
    (relative to the config file's folder) as a ``file:`` URI."""
    text = str_value()(value, name, base)
    if _SCHEME.match(text) and not re.match(r"^[A-Za-z]:[\\/]", text):
        return text
    return path_value(text, name, base).absolute().as_uri()


def _jdbc_uri(value: object, name: str, base: Path) -> str:
    text = str_value()(value, name, base)
    if not text.startswith("jdbc:"):
        raise ConfigError(
            f"{where(name)} = {text!r} is not a JDBC URL",
            field=name,
            hint='e.g. uri = "jdbc:postgresql://db.internal:5432/lake"',
        )
    return text


@dataclass(frozen=True, kw_only=True)
class CatalogConfig(Section):
    """``[catalog]``; the default is the embedded SQLite catalog (every other field unset)."""

    type: CatalogType = setting(
        "embedded, hadoop or jdbc",
        enum_value(CatalogType),
        CatalogType.EMBEDDED,
        "embedded: Iceberg's JDBC catalog on an SQLite file in [target] warehouse; hadoop: "
        "the Hadoop catalog there (one writer at a time); jdbc: a JDBC catalog of yours",
    )
    uri: str | None = setting(
        "str", _jdbc_uri, None, "jdbc: the catalog database, jdbc:postgresql://HOST:PORT/DB"
    )
    user: str | None = setting("str", str_value(), None, "jdbc: the catalog database's user")
    password_env: str | None = setting(
        "str",
        str_value(),
        None,
        "jdbc: name of the environment variable with the catalog user's password",
    )
    password_file: Path | None = setting(
        "path",
        path_value,
        None,
        "jdbc: file holding the catalog user's password (one trailing newline is dropped)",
    )
    warehouse: str | None = setting(
        "URI or path",
        location_value,
        None,
        "jdbc: where the tables' files go, a URI every executor reaches (a path: file: URI)",
    )
    schema_version: SchemaVersion = setting(
        "V0 or V1",
        enum_value(SchemaVersion),
        SchemaVersion.V1,
        "jdbc: the catalog database's table layout (V1 migrates a V0 database in place)",
    )
    connect_timeout_s: int = setting(
        "int",
        int_value(1, 3600),
        10,
        "jdbc: TCP connect and login timeout of the catalog database driver",
    )
    socket_timeout_s: int = setting(
        "int",
        int_value(1, 86_400),
        60,
        "jdbc: longest wait for the catalog database's answer (never 0: a hung database "
        "would block binlake forever)",
    )
    password_origin: str = "none"
    password: Secret | None = field(default=None, repr=False)

    @property
    def is_jdbc(self) -> bool:
        return self.type is CatalogType.JDBC

    @classmethod
    def from_values(cls, values: dict[str, Any], loading: Loading) -> Self:
        """``[catalog]``'s parsed ``values`` checked against ``[target] catalog`` and
        ``[spark.conf]``; an embedded catalog keeps its type only."""
        kind: CatalogType = values["type"]
        if kind is not CatalogType.JDBC:
            _refuse_jdbc_keys(values, kind)
            return cls(type=kind)
        for name in ("uri", "warehouse"):
            if values[name] is None:
                raise ConfigError(
                    f"[catalog] {name} is missing: a JDBC catalog needs it",
                    field=f"catalog.{name}",
                    hint='uri = "jdbc:postgresql://HOST:5432/DB", warehouse = "s3a://bucket/lake"',
                )
        target_catalog = loading.section(TargetConfig).catalog
        _refuse_a_second_definition(target_catalog, loading.section(SparkConfig).conf)
        password, origin = read_password(
            "catalog",
            values["password_env"],
            values["password_file"],
            loading.env,
            whose="the catalog user's",
        )
        return cls(**values, password_origin=origin, password=password)


def _refuse_jdbc_keys(values: Mapping[str, Any], kind: CatalogType) -> None:
    for name in _JDBC_ONLY:
        if values[name] is not None:
            raise ConfigError(
                f"[catalog] {name} is set but type is {kind.value} (an embedded catalog)",
                field=f"catalog.{name}",
                hint='set type = "jdbc" for a JDBC catalog, or remove the key',
            )


def _refuse_a_second_definition(target_catalog: str, spark_conf: Mapping[str, str]) -> None:
    prefix = f"spark.sql.catalog.{target_catalog}"
    clash = sorted(k for k in spark_conf if k == prefix or k.startswith(f"{prefix}."))
    if clash:
        raise ConfigError(
            f"[spark.conf] {clash[0]} defines the catalog {target_catalog!r} that [catalog] "
            "defines too",
            field="spark.conf",
            hint=f"remove the {prefix}.* keys from [spark.conf], or the [catalog] section",
        )
