"""The applier's sections of binlake's configuration: ``[target]``, ``[tables]``, ``[spark]``
and ``[applier]`` (read by ``binlake replicate``; docs/configuration.md lists every key).

Re-exported by ``binlake.config``, which loads and checks the whole file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from binlake.binlog.names import TableGlob, TableName
from binlake.config.layout import TableLayout, layout_value
from binlake.config.values import (
    Key,
    bool_value,
    enum_value,
    float_value,
    globs_value,
    int_value,
    jars_value,
    key_columns_value,
    namespace_map_value,
    path_value,
    spark_conf_value,
    str_value,
)

__all__ = [
    "APPLIER_KEYS",
    "SNAPSHOT_KEYS",
    "SPARK_KEYS",
    "TABLES_KEYS",
    "TARGET_KEYS",
    "ApplierConfig",
    "OnDrop",
    "SnapshotConfig",
    "SparkConfig",
    "TablesConfig",
    "TargetConfig",
]


class OnDrop(StrEnum):
    """What ``binlake replicate`` does to the Iceberg table when the source drops a table."""

    KEEP = "keep"
    DROP = "drop"


@dataclass(frozen=True)
class TargetConfig:
    """``[target]``: where the Iceberg tables go."""

    #: Folder of the embedded catalog (unused when [spark] conf defines the catalog).
    warehouse: Path = Path("warehouse")
    #: The Spark catalog name binlake writes to.
    catalog: str = "lake"
    #: Source database -> Iceberg namespace (one level); unlisted: the same name.
    namespace_map: Mapping[str, str] = field(default_factory=dict)

    def namespace(self, database: str) -> str:
        return self.namespace_map.get(database, database)


@dataclass(frozen=True)
class TablesConfig:
    """``[tables]``: which source tables are replicated, and how."""

    #: Globs over (database, table) (fnmatch, case-sensitive); a table must match one.
    include: tuple[TableGlob, ...] = (TableGlob("*", "*"),)
    #: Globs over (database, table); a table matching one is not replicated.
    exclude: tuple[TableGlob, ...] = ()
    on_drop: OnDrop = OnDrop.KEEP
    #: A table -> the columns used as its key when it has no primary key.
    key_columns: Mapping[TableName, tuple[str, ...]] = field(default_factory=dict)
    #: A table -> its partition spec and sort order, applied when binlake creates it.
    layout: Mapping[TableName, TableLayout] = field(default_factory=dict)


@dataclass(frozen=True)
class SparkConfig:
    """``[spark]``: the master and any Spark/Iceberg configuration, passed through."""

    master: str = "local[2]"
    conf: Mapping[str, str] = field(default_factory=dict)
    #: Jars for ``spark.jars`` beside the Iceberg runtime (JDBC drivers...).
    jars: tuple[str, ...] = ()
    #: The standalone master's web UI (``http://HOST:8080``): lets binlake say why an
    #: application gets no executor.
    master_ui: str | None = None
    #: How long a session on a cluster waits for its first executor.
    executor_wait_s: float = 120.0


@dataclass(frozen=True)
class ApplierConfig:
    """``[applier]``: batch bounds and the metrics endpoint."""

    max_transactions: int = 10_000
    max_bytes: int = 64 * 1024 * 1024
    max_seconds: float = 2.0
    #: Port of the Prometheus endpoint; 0 = none.
    metrics_port: int = 0
    #: How long a batch waits out a failing catalog before binlake stops.
    catalog_give_up_s: float = 300.0
    #: Commits tried again after another writer committed to the table first.
    commit_retries: int = 10


@dataclass(frozen=True)
class SnapshotConfig:
    """``[snapshot]``: copying tables' existing rows (binlake.snapshot.copier)."""

    #: On a new state folder, snapshot every included table the lake holds no position for.
    initial: bool = True
    #: Rows per chunk: one consistent read and one Iceberg commit each.
    chunk_rows: int = 50_000


TARGET_KEYS: tuple[Key, ...] = (
    Key(
        "warehouse",
        "path",
        path_value,
        None,
        "folder of the embedded catalog; default: warehouse/ beside the config file",
    ),
    Key("catalog", "str", str_value(), "lake", "the Spark catalog binlake writes to"),
    Key(
        "namespace_map",
        "table",
        namespace_map_value,
        {},
        "source database -> Iceberg namespace (one level); unlisted: the same name",
    ),
)

TABLES_KEYS: tuple[Key, ...] = (
    Key(
        "include",
        "list",
        globs_value,
        (TableGlob("*", "*"),),
        "globs over db.table (a part with a dot in backticks); a table must match one",
    ),
    Key(
        "exclude", "list", globs_value, (), "globs over db.table; a table matching one is left out"
    ),
    Key(
        "on_drop",
        "keep or drop",
        enum_value(OnDrop),
        OnDrop.KEEP,
        "when the source drops a table: keep its Iceberg table, or drop it too",
    ),
    Key(
        "key_columns",
        "table",
        key_columns_value,
        {},
        '"db.table" = [columns]: the key of a table without a primary key (else a change log)',
    ),
    Key(
        "layout",
        "table",
        layout_value,
        {},
        '"db.table" = { partition = [transforms], sort = [fields] }: applied when binlake '
        "creates the table",
    ),
)

SPARK_KEYS: tuple[Key, ...] = (
    Key("master", "str", str_value(), "local[2]", "the Spark master (local[N], spark://, yarn...)"),
    Key(
        "conf",
        "table",
        spark_conf_value,
        {},
        "any spark.* setting, passed through; wins over binlake's defaults",
    ),
    Key(
        "jars",
        "list",
        jars_value,
        (),
        "jars for spark.jars beside the Iceberg runtime (a JDBC driver: "
        "/usr/share/java/postgresql.jar); paths relative to the config file's folder",
    ),
    Key(
        "master_ui",
        "str",
        str_value(),
        None,
        "a standalone master's web UI (http://HOST:8080): says why an application gets no executor",
    ),
    Key(
        "executor_wait_s",
        "float",
        float_value(0.0, 3600.0),
        120.0,
        "on a cluster: longest wait for the first executor before stopping with a typed error",
    ),
)

APPLIER_KEYS: tuple[Key, ...] = (
    Key(
        "max_transactions",
        "int",
        int_value(1, 10_000_000),
        10_000,
        "a batch ends after this many source transactions",
    ),
    Key(
        "max_bytes",
        "int",
        int_value(1024, 1 << 34),
        64 * 1024 * 1024,
        "a batch ends once its transactions hold this many relay-log bytes",
    ),
    Key(
        "max_seconds",
        "float",
        float_value(0.0, 3600.0),
        2.0,
        "a batch ends this long after its first transaction was read",
    ),
    Key(
        "metrics_port",
        "int",
        int_value(0, 65535),
        0,
        "port of the Prometheus metrics endpoint of binlake replicate; 0 = none",
    ),
    Key(
        "catalog_give_up_s",
        "float",
        float_value(0.0, 86_400.0),
        300.0,
        "a batch the catalog failed is retried (backoff of [receiver] reconnect_*) this long, "
        "then binlake replicate stops",
    ),
    Key(
        "commit_retries",
        "int",
        int_value(0, 10_000),
        10,
        "conflicts in a row with another writer's commit after which binlake replicate stops; "
        "each waits the [receiver] reconnect_* backoff, then the batch is applied again (0: never)",
    ),
)

SNAPSHOT_KEYS: tuple[Key, ...] = (
    Key(
        "initial",
        "bool",
        bool_value,
        True,
        "on a new state folder, copy every included table's existing rows before streaming",
    ),
    Key(
        "chunk_rows",
        "int",
        int_value(1, 10_000_000),
        50_000,
        "rows per snapshot chunk: one consistent read and one Iceberg commit each",
    ),
)
