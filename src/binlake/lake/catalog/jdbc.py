"""Table lineages of a JDBC catalog on PostgreSQL, read without Spark (``binlake status`` and
``binlake verify`` use it: a Spark session on a cluster costs 10-30 s to start).

Iceberg's ``JdbcCatalog`` keeps one row per table in the catalog database's ``iceberg_tables``
(``catalog_name``, ``table_namespace``, ``table_name``, ``metadata_location``, and from schema
version V1 ``iceberg_type``: TABLE, VIEW, or NULL for rows a V0 catalog wrote). A commit is one
conditional ``UPDATE ... SET metadata_location = new WHERE metadata_location = old``: the row
names the table's current metadata file, whose snapshots are the lineage
(``metadata.lineage_of``). Positions come from the catalog, never from a folder listing.

Read here (``JdbcCatalogReader.for_target`` gives a reader): a ``jdbc:postgresql://HOST[:PORT]/DB``
uri without TLS or other driver options, and a warehouse on a local path or ``file:`` URI.
Anything else (an ``s3a://`` warehouse, TLS, several hosts) gives None: the caller reads
through Spark instead. Failures of the database are the same typed errors the Spark path gives
(``CatalogUnreachableError``, ``CatalogAuthError``, ``CatalogConfigError``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from binlake.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogError,
    CatalogUnreachableError,
    FileAccessError,
)
from binlake.lake.catalog.metadata import LakeLineage, lineage_of, load_metadata
from binlake.lake.catalog.target import LakeTarget, redact_url
from binlake.storage.warehouse_sync import local_folder

__all__ = ["JdbcCatalogReader", "PostgresAddress", "postgres_address"]

DEFAULT_PORT = 5432
#: SQLSTATEs: invalid password, invalid authorization; unknown database.
_AUTH_STATES = frozenset({"28P01", "28000"})
_NO_DATABASE = "3D000"
#: Driver options that change how to connect (TLS, several hosts, ...): left to Spark.
_PLAIN_PARAMS = frozenset(
    {"user", "password", "connectTimeout", "loginTimeout", "socketTimeout", "ApplicationName"}
)


@dataclass(frozen=True)
class PostgresAddress:
    host: str
    port: int
    database: str
    user: str | None
    password: str | None


def postgres_address(uri: str) -> PostgresAddress | None:
    """Where a ``jdbc:postgresql://`` uri points, when it is one this module reads."""
    if not uri.startswith("jdbc:postgresql://"):
        return None
    parts = urlsplit(uri.removeprefix("jdbc:"))
    params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    if "," in parts.netloc or not parts.hostname or set(params) - _PLAIN_PARAMS:
        return None
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        return None
    database = unquote(parts.path.lstrip("/")) or None
    user = params.get("user")
    password = params.get("password")
    return PostgresAddress(parts.hostname, port, database or user or "", user, password)


class JdbcCatalogReader:
    """The tables of ``target``'s JDBC catalog on PostgreSQL; one connection, opened on first
    use (``close`` ends it)."""

    @classmethod
    def for_target(cls, target: LakeTarget) -> JdbcCatalogReader | None:
        """A reader for ``target``'s catalog, when it is one this module reads."""
        jdbc = target.jdbc
        if jdbc is None or jdbc.uri is None or jdbc.warehouse is None:
            return None
        address = postgres_address(jdbc.uri)
        if address is None or local_folder(jdbc.warehouse) is None:
            return None
        return cls(target, address)

    def __init__(self, target: LakeTarget, address: PostgresAddress) -> None:
        jdbc = target.jdbc
        assert jdbc is not None
        self.target = target
        self.address = address
        self.user = jdbc.user or address.user or ""
        self.password = jdbc.password.reveal_text() if jdbc.password else address.password
        self.uri = redact_url(jdbc.uri or "")
        self.timeout_s = float(jdbc.connect_timeout_s)
        self._connection: Any = None

    def close(self) -> None:
        if self._connection is not None:
            with suppress(Exception):  # already gone: nothing to release
                self._connection.close()
            self._connection = None

    def tables(self) -> list[LakeLineage]:
        """Every table of the catalog, with its lineage."""
        rows = self._rows(None)
        return [self._table(namespace, name, location) for namespace, name, location in rows]

    def table(self, identifier: tuple[str, ...]) -> LakeLineage | None:
        """One table's lineage; None when the catalog has no such table."""
        rows = self._rows(identifier)
        return self._table(*rows[0]) if rows else None

    def _table(self, namespace: str, name: str, location: str) -> LakeLineage:
        path = local_folder(location)
        if path is None:
            raise FileAccessError(
                f"the metadata of {namespace}.{name} is at {location}, outside the local "
                "warehouse: binlake status and verify read it only through Spark",
                file=location,
                hint="keep the tables in [catalog] warehouse (no table LOCATION elsewhere)",
            )
        identifier = (*namespace.split("."), name)
        lineage, cut = lineage_of(load_metadata(Path(path)))
        return LakeLineage(identifier, lineage, cut)

    def _rows(self, identifier: tuple[str, ...] | None) -> list[tuple[str, str, str]]:
        where = "catalog_name = :catalog"
        args: dict[str, str] = {"catalog": self.target.catalog}
        if identifier is not None:
            where += " AND table_namespace = :namespace AND table_name = :name"
            args |= {"namespace": ".".join(identifier[:-1]), "name": identifier[-1]}
        with self._errors():
            connection = self._connect()
            columns = {
                str(row[0])
                for row in connection.run(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = 'iceberg_tables'"
                )
            }
            if not columns:
                return []  # a catalog no table was ever created in
            if "iceberg_type" in columns:
                where += " AND (iceberg_type IS NULL OR iceberg_type = 'TABLE')"
            rows = connection.run(
                "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables "
                f"WHERE {where} ORDER BY table_namespace, table_name",
                **args,
            )
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows if r[2] is not None]

    def _connect(self) -> Any:
        if self._connection is None:
            import pg8000.native

            self._connection = pg8000.native.Connection(
                self.user,
                host=self.address.host,
                port=self.address.port,
                database=self.address.database,
                password=self.password,
                timeout=self.timeout_s,
                application_name="binlake",
            )
        return self._connection

    @contextmanager
    def _errors(self) -> Iterator[None]:
        import pg8000.exceptions

        try:
            yield
        except pg8000.exceptions.DatabaseError as error:
            self.close()
            raise self._database_error(error) from None
        except (pg8000.exceptions.InterfaceError, OSError) as error:
            self.close()
            raise CatalogUnreachableError(
                f"the catalog database cannot be reached: {error}",
                catalog=self.target.catalog,
                uri=self.uri,
            ) from None

    def _database_error(self, error: Exception) -> CatalogError:
        info = error.args[0] if error.args and isinstance(error.args[0], dict) else {}
        state, message = str(info.get("C", "")), str(info.get("M", error))
        catalog, uri = self.target.catalog, self.uri
        if state in _AUTH_STATES:
            return CatalogAuthError(
                f"the catalog database refused the login: {message}", catalog=catalog, uri=uri
            )
        if state == _NO_DATABASE:
            return CatalogConfigError(
                f"the catalog database named in the uri does not exist: {message}",
                hint="create the database (CREATE DATABASE <db> OWNER <user>) or fix the "
                "database in [catalog] uri",
                catalog=catalog,
                uri=uri,
            )
        return CatalogUnreachableError(
            f"the catalog database failed: {message}", catalog=catalog, uri=uri
        )
