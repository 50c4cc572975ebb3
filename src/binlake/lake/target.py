"""Where the replicated tables live, as `status` and `verify` need it (pure, no pyspark).

``LakeTarget`` holds what the config's ``[target]``, ``[tables]`` and ``[spark]`` sections say:
the warehouse folder and Spark catalog, the source database -> lake namespace map, the
include/exclude globs on ``db.table``, and the Spark settings passed through. ``lake_target``
maps a loaded ``Config`` to it (defaults: the embedded catalog ``lake`` in ``warehouse/``
beside the config file, every table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from binlake.config import Config
from binlake.lake.sql import quote

#: Databases that are never replicated.
SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
DEFAULT_CATALOG = "lake"


@dataclass(frozen=True)
class LakeTarget:
    warehouse: Path
    catalog: str = DEFAULT_CATALOG
    #: Source database -> lake namespace (databases not listed keep their name).
    namespace_map: Mapping[str, str] = field(default_factory=dict)
    #: Globs on ``db.table``; a table is replicated when it matches an include and no exclude.
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    master: str = "local[2]"
    #: Spark/Iceberg configuration passed through (``[spark]``).
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    #: ``db.table`` -> key columns of a table without a primary key (``[tables] key_columns``).
    key_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def embedded(self) -> bool:
        """True when the catalog is binlake's embedded Hadoop catalog in ``warehouse``."""
        return f"spark.sql.catalog.{self.catalog}" not in self.spark_conf

    def namespace(self, database: str) -> str:
        return self.namespace_map.get(database, database)

    def identifier(self, source_table: str) -> tuple[str, ...]:
        """Catalog-relative identifier of the lake table for ``db.table``."""
        database, _, table = source_table.partition(".")
        return (self.namespace(database), table)

    def lake_table(self, source_table: str) -> str:
        """The quoted Spark name ``catalog.namespace.table`` of ``db.table``'s lake table."""
        return ".".join(quote(p) for p in (self.catalog, *self.identifier(source_table)))

    def source_table(self, identifier: tuple[str, ...]) -> str | None:
        """``db.table`` a lake identifier replicates (None when no database maps to it)."""
        if len(identifier) != 2:
            return None
        namespace, table = identifier
        databases = [db for db, ns in self.namespace_map.items() if ns == namespace]
        if not databases and namespace not in self.namespace_map:
            databases = [namespace]
        return f"{databases[0]}.{table}" if databases else None

    def selected(self, source_table: str) -> bool:
        database = source_table.partition(".")[0]
        if database.lower() in SYSTEM_DATABASES:
            return False
        included = any(fnmatchcase(source_table, glob) for glob in self.include)
        return included and not any(fnmatchcase(source_table, glob) for glob in self.exclude)


def lake_target(config: Config) -> LakeTarget:
    """The target ``config``'s ``[target]``, ``[tables]`` and ``[spark]`` sections describe."""
    base = config.path.absolute().parent if config.path is not None else Path.cwd()
    warehouse = config.target.warehouse
    return LakeTarget(
        warehouse=warehouse if warehouse.is_absolute() else base / warehouse,
        catalog=config.target.catalog,
        namespace_map=dict(config.target.namespace_map),
        include=tuple(config.tables.include),
        exclude=tuple(config.tables.exclude),
        master=config.spark.master,
        spark_conf=dict(config.spark.conf),
        key_columns={t: tuple(c) for t, c in config.tables.key_columns.items()},
    )
