"""Where the replicated tables live, as `status` and `verify` need it (pure, no pyspark).

``LakeTarget`` holds what the config's ``[target]``, ``[tables]``, ``[spark]`` and ``[catalog]``
sections say: the warehouse folder and Spark catalog, the source database -> lake namespace
map, the include/exclude globs on (database, table) (``binlog.names.TableGlob``), the Spark
settings passed through, and the catalog keys ``[catalog]`` generates (``jdbc_catalog_conf``:
everything but the password, which ``secret_conf`` holds: it is set on the session after it
starts, never on the command line of the driver's JVM). ``lake_target`` maps a loaded ``Config``
to it (defaults: the embedded catalog ``lake`` in ``warehouse/`` beside the config file, every
table).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from binlake.binlog.names import TableGlob, TableName
from binlake.config import CatalogConfig, CatalogType, Config, Secret
from binlake.config.layout import TableLayout
from binlake.lake.schema.sql import quote

#: Databases that are never replicated.
SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
DEFAULT_CATALOG = "lake"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


@dataclass(frozen=True)
class LakeTarget:
    warehouse: Path
    catalog: str = DEFAULT_CATALOG
    #: Source database -> lake namespace (databases not listed keep their name).
    namespace_map: Mapping[str, str] = field(default_factory=dict)
    #: A table is replicated when it matches an include glob and no exclude glob.
    include: tuple[TableGlob, ...] = (TableGlob("*", "*"),)
    exclude: tuple[TableGlob, ...] = ()
    master: str = "local[2]"
    #: Spark/Iceberg configuration passed through (``[spark]``).
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    #: Key columns of a table without a primary key (``[tables] key_columns``).
    key_columns: Mapping[TableName, tuple[str, ...]] = field(default_factory=dict)
    #: Partition spec and sort order of the tables binlake creates (``[tables.layout]``).
    layouts: Mapping[TableName, TableLayout] = field(default_factory=dict)
    #: Their Iceberg format version (``[tables] format_version``).
    format_version: int = 2
    #: ``[spark] jars``, ``master_ui`` and ``executor_wait_s``.
    jars: tuple[str, ...] = ()
    master_ui: str | None = None
    executor_wait_s: float = 120.0
    #: ``[catalog]`` when it is a JDBC catalog (its keys are in ``spark_conf`` already).
    jdbc: CatalogConfig | None = None
    #: ``[catalog] type = "hadoop"``: the embedded catalog is the Hadoop catalog, not SQLite's.
    hadoop: bool = False
    #: The cuts table (``[cuts] table``: namespace, table): never a replicated table's.
    cuts_table: tuple[str, str] | None = None

    @property
    def embedded(self) -> bool:
        """True when the catalog is binlake's embedded one in ``warehouse`` (the SQLite
        catalog, or the Hadoop catalog by ``[catalog] type``)."""
        return f"spark.sql.catalog.{self.catalog}" not in self.spark_conf

    @property
    def secret_conf(self) -> dict[str, Secret]:
        """Catalog settings that are secrets (the JDBC password), set after the session
        starts."""
        if self.jdbc is None or self.jdbc.password is None:
            return {}
        return {f"spark.sql.catalog.{self.catalog}.jdbc.password": self.jdbc.password}

    @property
    def location(self) -> str:
        """Where the tables are, for people: the catalog's URI and warehouse."""
        prefix = f"spark.sql.catalog.{self.catalog}"
        if self.embedded:
            return str(self.warehouse)
        where = self.spark_conf.get(f"{prefix}.warehouse", "")
        uri = self.spark_conf.get(f"{prefix}.uri")
        kind = self.spark_conf.get(f"{prefix}.type") or self.spark_conf.get(
            f"{prefix}.catalog-impl", "?"
        )
        shown = redact_url(uri) if uri else ""
        return " ".join(part for part in (f"({kind})", shown, where) if part)

    def namespace(self, database: str) -> str:
        return self.namespace_map.get(database, database)

    def identifier(self, source_table: TableName) -> tuple[str, ...]:
        """Catalog-relative identifier of the lake table of ``source_table``."""
        return (self.namespace(source_table.database), source_table.table)

    def lake_table(self, source_table: TableName) -> str:
        """The quoted Spark name ``catalog.namespace.table`` of ``source_table``'s lake table."""
        return ".".join(quote(p) for p in (self.catalog, *self.identifier(source_table)))

    def source_table(self, identifier: tuple[str, ...]) -> TableName | None:
        """The source table a lake identifier replicates (None when no database maps to it)."""
        if len(identifier) != 2 or tuple(identifier) == self.cuts_table:
            return None
        namespace, table = identifier
        databases = [db for db, ns in self.namespace_map.items() if ns == namespace]
        if not databases and namespace not in self.namespace_map:
            databases = [namespace]
        return TableName(databases[0], table) if databases else None

    #: ``selected``'s answers (asked for every rows event).
    _selected: dict[TableName, bool] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def selected(self, source_table: TableName) -> bool:
        answer = self._selected.get(source_table)
        if answer is None:
            answer = self._selected[source_table] = self._matches(source_table)
        return answer

    def _matches(self, source_table: TableName) -> bool:
        if source_table.database.lower() in SYSTEM_DATABASES:
            return False
        included = any(glob.matches(source_table) for glob in self.include)
        return included and not any(glob.matches(source_table) for glob in self.exclude)


def lake_target(config: Config) -> LakeTarget:
    """The target ``config``'s ``[target]``, ``[tables]``, ``[spark]`` and ``[catalog]``
    sections describe."""
    base = config.path.absolute().parent if config.path is not None else Path.cwd()
    warehouse = config.target.warehouse
    jdbc = config.catalog if config.catalog.is_jdbc else None
    spark_conf = dict(config.spark.conf)
    if jdbc is not None:
        spark_conf.update(jdbc_catalog_conf(config.target.catalog, jdbc))
    return LakeTarget(
        warehouse=warehouse if warehouse.is_absolute() else base / warehouse,
        catalog=config.target.catalog,
        namespace_map=dict(config.target.namespace_map),
        include=tuple(config.tables.include),
        exclude=tuple(config.tables.exclude),
        master=config.spark.master,
        spark_conf=spark_conf,
        key_columns={t: tuple(c) for t, c in config.tables.key_columns.items()},
        layouts=dict(config.tables.layout),
        format_version=config.tables.format_version,
        jars=config.spark.jars,
        master_ui=config.spark.master_ui,
        executor_wait_s=config.spark.executor_wait_s,
        jdbc=jdbc,
        hadoop=config.catalog.type is CatalogType.HADOOP,
        cuts_table=config.cuts.identifier,
    )


def hadoop_catalog_conf(name: str, warehouse: Path) -> dict[str, str]:
    """The Spark keys of a Hadoop catalog ``name`` on the folder ``warehouse`` (absolute).

    The table cache is off. Other processes write these tables too (`binlake snapshot`,
    maintenance jobs, the run before a crash): every statement loads the table's current
    metadata, so a MERGE never starts from a cached, stale snapshot (a needless commit
    conflict), and a snapshot already in the metadata files is always found by id (a cached
    table misses it until its own commit finishes: ``VERSION AS OF`` fails)."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: ICEBERG_CATALOG,
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": str(warehouse),
        f"{prefix}.cache-enabled": "false",
    }


def jdbc_catalog_conf(name: str, catalog: CatalogConfig) -> dict[str, str]:
    """The Spark keys of a JDBC catalog named ``name``, the password aside (``secret_conf``).

    Iceberg hands every ``jdbc.*`` key, prefix removed, to the JDBC driver as a connection
    property: that is how the driver's timeouts are set (PostgreSQL's in seconds; MySQL's and
    MariaDB's in milliseconds; other drivers get none: set them in the uri). The table cache
    is off, as for the embedded catalog: other processes commit to these tables too."""
    assert catalog.uri is not None and catalog.warehouse is not None
    prefix = f"spark.sql.catalog.{name}"
    conf = {
        prefix: ICEBERG_CATALOG,
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": catalog.uri,
        f"{prefix}.warehouse": catalog.warehouse,
        f"{prefix}.jdbc.schema-version": catalog.schema_version.value,
        f"{prefix}.cache-enabled": "false",
    }
    if catalog.user is not None:
        conf[f"{prefix}.jdbc.user"] = catalog.user
    connect, socket = catalog.connect_timeout_s, catalog.socket_timeout_s
    if catalog.uri.startswith("jdbc:postgresql:"):
        conf[f"{prefix}.jdbc.connectTimeout"] = str(connect)
        conf[f"{prefix}.jdbc.loginTimeout"] = str(connect)
        conf[f"{prefix}.jdbc.socketTimeout"] = str(socket)
    elif catalog.uri.startswith(("jdbc:mysql:", "jdbc:mariadb:")):
        conf[f"{prefix}.jdbc.connectTimeout"] = str(connect * 1000)
        conf[f"{prefix}.jdbc.socketTimeout"] = str(socket * 1000)
    return conf


_PASSWORD_IN_URL = re.compile(r"(?i)(password=)[^&;]*")


def redact_url(url: str) -> str:
    """``url`` with any ``password=...`` parameter masked (a user may put one there)."""
    return _PASSWORD_IN_URL.sub(r"\1***", url)
