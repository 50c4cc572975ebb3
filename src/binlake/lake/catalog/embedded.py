"""binlake's embedded catalog: Iceberg's JDBC catalog on an SQLite file in the warehouse folder.

Why not the Hadoop catalog (the embedded default before): its commit writes ``v<N+1>.metadata.json``
after checking that it does not exist, a check-then-rename that two processes can both pass on a
local file system, the later rename silently replacing the earlier commit (docs/spark.md). The
JDBC catalog's commit is one ``UPDATE iceberg_tables SET metadata_location = new WHERE ...
metadata_location = old``: SQLite runs it under its write lock, so of two commits built on the
same metadata one updates the row and the other finds it changed and fails
(``CommitFailedException``: Iceberg and binlake's retry re-plan it on the new metadata).

The database is ``<warehouse>/catalog.sqlite`` (``metadata.CATALOG_FILE``); the tables'
files stay where the Hadoop catalog put them (``<warehouse>/<namespace>/<table>``). binlake
creates its tables itself (``prepare_embedded_catalog``, before Spark starts) and tells Iceberg
not to (``jdbc.init-catalog-tables=false``), in the ``V0`` layout: Iceberg 1.10's check of the
catalog tables (``DatabaseMetaData.getTables``, and ``getColumns`` for the V1 layout's column)
leaves a result set open, which holds an SQLite read transaction on that connection for good;
its commits then fail with ``SQLITE_BUSY_SNAPSHOT`` once another process has written. The V0
layout has no views (binlake writes none). The database is in WAL mode (readers such as ``binlake
status`` never block a commit), with ``synchronous=FULL`` (a commit is durable when it returns)
and a busy timeout: a commit waits for another process's, it does not fail. Iceberg writes the
files a row names without fsyncing them (binlake fsyncs them before its checkpoint moves past
them): a row a power cut left ahead of its files is set back on every start (``lost_commits``).

A warehouse the Hadoop default wrote (table folders with ``v<N>.metadata.json``, no
``catalog.sqlite``) is adopted on first use: every table is registered at its current metadata
file, all in one database file written under a temporary name, fsynced and renamed into place
(``storage.durable.atomic_replace``, with its crash points): a crash leaves either no catalog
(the next start adopts again) or a complete one. From then on the Hadoop catalog must not write
that warehouse (it would not see the JDBC catalog's commits): ``[catalog] type = "hadoop"`` on an
adopted warehouse is refused.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from binlake.errors import CatalogConfigError
from binlake.lake.catalog.lost_commits import set_back_lost_commits
from binlake.lake.catalog.metadata import (
    CATALOG_FILE,
    METADATA_DIR,
    current_metadata_file,
    hadoop_tables,
)
from binlake.lake.catalog.target import ICEBERG_CATALOG
from binlake.storage.durable import atomic_replace, make_folder
from binlake.storage.lock import folder_lock

__all__ = [
    "BUSY_TIMEOUT_MS",
    "embedded_catalog_conf",
    "prepare_embedded_catalog",
    "refuse_hadoop_on_adopted",
]

#: How long a commit waits for another process's to finish (SQLite's busy timeout).
BUSY_TIMEOUT_MS = 60_000
FSYNC_PURPOSE = "catalog"
_LOCK_FILE = ".catalog.lock"
#: Iceberg's JDBC catalog tables, V0 layout (the statements its ``JdbcCatalog`` would run).
_SCHEMA = (
    "CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL,"
    "table_namespace VARCHAR(255) NOT NULL,table_name VARCHAR(255) NOT NULL,"
    "metadata_location VARCHAR(1000),previous_metadata_location VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, table_namespace, table_name))",
    "CREATE TABLE iceberg_namespace_properties(catalog_name VARCHAR(255) NOT NULL,"
    "namespace VARCHAR(255) NOT NULL,property_key VARCHAR(255),property_value VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, namespace, property_key))",
)


def embedded_catalog_conf(name: str, warehouse: Path) -> dict[str, str]:
    """The Spark keys of the embedded catalog ``name`` in ``warehouse`` (absolute)."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: ICEBERG_CATALOG,
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": f"jdbc:sqlite:{warehouse / CATALOG_FILE}",
        f"{prefix}.warehouse": str(warehouse),
        f"{prefix}.jdbc.init-catalog-tables": "false",
        f"{prefix}.jdbc.schema-version": "V0",
        f"{prefix}.jdbc.busy_timeout": str(BUSY_TIMEOUT_MS),
        f"{prefix}.jdbc.synchronous": "FULL",
        # Other processes write these tables too (`binlake snapshot`, maintenance jobs, the
        # run before a crash): every statement loads the table's current metadata, so a MERGE
        # never starts from a cached, stale snapshot (a needless commit conflict).
        f"{prefix}.cache-enabled": "false",
    }


def prepare_embedded_catalog(warehouse: Path, catalog: str) -> list[tuple[str, ...]]:
    """Make ``warehouse/catalog.sqlite`` ready for Spark: created when missing, with the
    tables of a Hadoop-layout warehouse registered (their identifiers are returned); put in
    WAL mode; its rows a power cut left ahead of their files set back (``lost_commits``)."""
    make_folder(warehouse, "warehouse")
    path = warehouse / CATALOG_FILE
    adopted: list[tuple[str, ...]] = []
    # Two processes starting on one warehouse: one creates the catalog, the other sees it.
    with folder_lock(warehouse, _LOCK_FILE):
        if not path.is_file():
            adopted = hadoop_tables(warehouse)
            atomic_replace(path, _new_database(warehouse, catalog, adopted), FSYNC_PURPOSE)
        db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            set_back_lost_commits(db, catalog)
        finally:
            db.close()
    return adopted


def _new_database(warehouse: Path, catalog: str, tables: list[tuple[str, ...]]) -> bytes:
    """The bytes of a catalog database holding ``tables`` at their current metadata files."""
    db = sqlite3.connect(":memory:")
    try:
        for statement in _SCHEMA:
            db.execute(statement)
        for identifier in tables:
            location = current_metadata_file(warehouse.joinpath(*identifier) / METADATA_DIR)
            assert location is not None  # hadoop_tables lists folders holding one
            db.execute(
                "INSERT INTO iceberg_tables VALUES (?, ?, ?, ?, NULL)",
                (catalog, ".".join(identifier[:-1]), identifier[-1], str(location.absolute())),
            )
        db.commit()
        return db.serialize()
    finally:
        db.close()


def refuse_hadoop_on_adopted(warehouse: Path, catalog: str) -> None:
    """``[catalog] type = "hadoop"`` on a warehouse the embedded catalog holds: refused."""
    if (warehouse / CATALOG_FILE).is_file():
        raise CatalogConfigError(
            f"[catalog] type is hadoop but the warehouse {warehouse} is held by the embedded "
            f"catalog ({CATALOG_FILE}): the Hadoop catalog would not see its commits",
            hint='remove type = "hadoop" from [catalog] (the embedded catalog is the default)',
            catalog=catalog,
            uri=str(warehouse / CATALOG_FILE),
        )
