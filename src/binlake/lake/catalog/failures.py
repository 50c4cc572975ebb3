"""Catalog and cluster failures, read from a Java cause chain, as typed errors (pure).

The text is what ``binlake.lake.spark.errors`` builds: the Python error's message, then the
``toString()`` of every throwable in its Java cause chain, one a line. Iceberg's JDBC catalog
wraps the JDBC driver's ``SQLException`` in ``UncheckedSQLException`` ("Failed to connect",
"Failed to get table ..."); the driver's own line names what is wrong (host, port, user,
database), so that line is the message, without Java class names. A statement that fails while
the catalog commits (``CommitStateUnknownException``) is "outcome unknown": the table's newest
snapshot tells.

Every pattern below was seen on PostgreSQL 15 with pgjdbc 42.5 and Iceberg 1.10's JDBC catalog,
or on a Spark 3.5 standalone master (docs/spark.md lists the cases).
"""

from __future__ import annotations

import re

from binlake.errors import (
    CatalogAuthError,
    CatalogCommitUnknownError,
    CatalogConfigError,
    CatalogError,
    CatalogUnreachableError,
    SparkMasterError,
    SparkMasterUnreachableError,
)
from binlake.lake.catalog.target import redact_url

__all__ = ["classify_catalog_failure", "classify_master_failure"]

#: (pattern over the cause chain, error class, message), first match wins.
_CATALOG_RULES: tuple[tuple[re.Pattern[str], type[CatalogError], str], ...] = (
    (
        re.compile(r"CommitStateUnknownException"),
        CatalogCommitUnknownError,
        "the catalog lost the connection while committing; the commit may or may not have landed",
    ),
    (
        re.compile(r"password authentication failed|FATAL: role \".*\" does not exist|28P01"),
        CatalogAuthError,
        "the catalog database refused the login",
    ),
    (
        re.compile(r'FATAL: database ".*" does not exist'),
        CatalogConfigError,
        "the catalog database named in the uri does not exist",
    ),
    (
        re.compile(r"No suitable driver found|ClassNotFoundException: org\.postgresql"),
        CatalogConfigError,
        "no JDBC driver for the catalog uri",
    ),
    (
        re.compile(
            r"Connection to .* refused|UnknownHostException|The connection attempt failed|"
            r"Connection attempt timed out|terminating connection due to administrator command|"
            r"An I/O error occurred while sending to the backend|SocketTimeoutException|"
            r"This connection has been closed|the database system is (?:shutting down|"
            r"starting up)|Cannot initialize JDBC catalog"
        ),
        CatalogUnreachableError,
        "the catalog database cannot be reached",
    ),
)

#: Hints more precise than the class's, by a mark in the chain.
_HINTS: tuple[tuple[str, str], ...] = (
    ("UnknownHostException", "the catalog uri's host name does not resolve: fix [catalog] uri"),
    (
        'FATAL: database "',
        "create the database (CREATE DATABASE <db> OWNER <user>) or fix the database in "
        "[catalog] uri",
    ),
    (
        "No suitable driver",
        "add the JDBC driver's jar to [spark] jars (PostgreSQL: `apt-get install "
        "libpostgresql-jdbc-java` gives /usr/share/java/postgresql.jar), and check that the "
        "uri starts with jdbc:postgresql://",
    ),
    (
        "ClassNotFoundException: org.postgresql",
        "add the PostgreSQL JDBC driver's jar to [spark] jars (/usr/share/java/postgresql.jar)",
    ),
)

#: Lines of the chain that say what went wrong in the driver's or the network's words,
#: most telling first, with the prefix shown instead of the Java class.
_DETAIL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("org.postgresql.util.PSQLException: ", ""),
    ("java.sql.SQLException: ", ""),
    ("java.net.UnknownHostException: ", "unknown host "),
    ("java.net.SocketTimeoutException: ", "socket timeout: "),
    ("java.net.ConnectException: ", "connect: "),
)


#: A JDBC catalog's failure: the database's driver or Iceberg's JDBC code is in the chain (a
#: network error of another part, an object store's time-out, is not the catalog's).
_JDBC_CHAIN = re.compile(
    r"org\.apache\.iceberg\.jdbc\.|java\.sql\.|org\.postgresql\.|No suitable driver"
)


def classify_catalog_failure(
    causes: str, *, catalog: str | None = None, uri: str | None = None, table: str | None = None
) -> CatalogError | None:
    """The typed catalog error a cause chain describes, or None when it is not one."""
    jdbc = _JDBC_CHAIN.search(causes) is not None
    for pattern, cls, message in _CATALOG_RULES:
        if pattern.search(causes) is None:
            continue
        if not jdbc and cls is not CatalogCommitUnknownError:
            return None
        detail = _detail(causes)
        hint = next((h for mark, h in _HINTS if mark in causes), None)
        return cls(
            f"{message}: {detail}" if detail else message,
            hint=hint,
            catalog=catalog,
            uri=None if uri is None else redact_url(uri),
            table=table,
        )
    return None


def _detail(causes: str) -> str | None:
    lines = [line.strip() for line in causes.splitlines()]
    for prefix, shown in _DETAIL_PREFIXES:
        for line in reversed(lines):  # the innermost cause is the most precise
            if line.startswith(prefix):
                return redact_url(shown + line.removeprefix(prefix))[:300]
    return None


_MASTER_RULES: tuple[tuple[re.Pattern[str], type[SparkMasterError], str], ...] = (
    (
        re.compile(r"Could not parse Master URL"),
        SparkMasterError,
        "the Spark master URL is not valid",
    ),
    (
        re.compile(
            r"All masters are unresponsive|Master removed our application|"
            r"LiveListenerBus is stopped|Cannot call methods on a stopped SparkContext"
        ),
        SparkMasterUnreachableError,
        "the Spark master did not accept the application (unreachable, or not a Spark master)",
    ),
)


def classify_master_failure(causes: str, *, master: str) -> SparkMasterError | None:
    """The typed master error a cause chain describes, or None when it is not one."""
    for pattern, cls, message in _MASTER_RULES:
        if pattern.search(causes):
            return cls(message, master=master)
    return None
