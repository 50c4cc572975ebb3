"""Shared fixtures: real MariaDB servers (one for the session, private ones on demand), a
fresh database per test, the tests' Spark session, and the lake targets (``target``,
parametrised: tests/lake_targets.py) with what they need: one PostgreSQL (the JDBC catalog's
database) and one Spark standalone cluster per session, each started on first use; and
``ground``, where a crash test keeps what it kills (a plain folder, or in ``cut`` mode one on
the power-cut mount of its module: tests/cut_modes.py).

Markers are declared in pyproject.toml; here each test gets the marker of its folder
(tests/unit -> unit, tests/integration -> integration, tests/crash -> crash,
tests/property -> property, tests/powercut -> powercut).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from binlake_dev.jvm_archive import driver_options
from binlake_dev.powercut import PowerCutMount
from binlake_dev.sandbox import MariaDBSandbox, mariadb_available
from cut_modes import CUT, KILL, Ground, skip_without_fuse
from lake_targets import (
    JDBC_CATALOG,
    TEST_JVM_OPTIONS,
    CatalogDatabase,
    TargetSetup,
    catalog_database,
    cluster_target,
    embedded_target,
    jdbc_target,
    register_jdbc_catalog,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from binlake_dev.cluster import SparkCluster
    from binlake_dev.postgres import PostgresServer

TESTS_DIR = Path(__file__).parent
# Before any Spark starts: the JVM options of the tests' Spark drivers (tests/lake_targets.py),
# with the class archive `make test` builds (binlake_dev.jvm_archive) when there is one.
os.environ.setdefault("SPARK_SUBMIT_OPTS", driver_options(TEST_JVM_OPTIONS))
FOLDER_MARKERS = ("unit", "integration", "crash", "property", "powercut")


@pytest.hookimpl(tryfirst=True)  # before -m selection deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.relative_to(TESTS_DIR).parts[0]
        except ValueError:
            continue
        if folder in FOLDER_MARKERS:
            item.add_marker(folder)


#: Test files by folder, in the order ``make test``'s processes take them (``--dist loadfile``):
#: the few long scenario files first, the many short unit files last to fill the tail.
HEAVY_FIRST = ("crash", "acceptance", "integration", "property", "powercut", "unit")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` that hands out the heavy files first (xdist's own order is by test
    count, most first: the unit files, then the long crash lineages on one process at the end)."""
    if config.getoption("dist", "no") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeavyFilesFirst(LoadFileScheduling):  # type: ignore[misc]
        def _assign_work_unit(self, node: object) -> None:
            self.workqueue.move_to_end(min(self.workqueue, key=self._weight), last=False)
            super()._assign_work_unit(node)

        def _weight(self, scope: str) -> tuple[int, int]:
            folder = Path(scope).parts[1] if len(Path(scope).parts) > 2 else ""
            rank = HEAVY_FIRST.index(folder) if folder in HEAVY_FIRST else len(HEAVY_FIRST)
            return rank, len(self.workqueue[scope])

    return HeavyFilesFirst(config, log)


def require_mariadb() -> None:
    """Fail (not skip) when MariaDB is missing: a skipped integration suite hides breakage."""
    if not mariadb_available():
        pytest.fail(
            "mariadbd / mariadb-install-db not found. Run `make test` (its `deps` step installs "
            "mariadb-server and mariadb-client), or `make deps` before running pytest directly.",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def mariadb(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[MariaDBSandbox]:
    """One MariaDB server for the whole session (ROW / FULL / FULL / CRC32, root over TCP)."""
    require_mariadb()
    sandbox = MariaDBSandbox(tmp_path_factory.mktemp("mariadb"))
    request.addfinalizer(sandbox.kill)  # even if start() fails half-way; no-op after stop()
    yield sandbox.start()
    sandbox.stop()


@pytest.fixture
def sandbox_factory(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[..., MariaDBSandbox]:
    """Makes private, unstarted servers for tests that crash, stop or reconfigure one.

    ``sandbox_factory(server_id=2, extra_args=["--max-binlog-size=8192"], log_bin=True)``;
    every server it made is killed after the test if the test left it running.
    """
    require_mariadb()
    made: list[MariaDBSandbox] = []

    def make(
        server_id: int = 1, extra_args: Sequence[str] = (), log_bin: bool = True
    ) -> MariaDBSandbox:
        sandbox = MariaDBSandbox(tmp_path / f"sandbox{len(made)}", server_id, extra_args, log_bin)
        request.addfinalizer(sandbox.kill)
        made.append(sandbox)
        return sandbox

    return make


@pytest.fixture
def fresh_database(mariadb: MariaDBSandbox) -> Iterator[str]:
    """The name of a new, empty database on the session server, dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    mariadb.execute(f"CREATE DATABASE `{name}`")
    yield name
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One local Spark session (embedded Iceberg catalog ``lake``, warehouse in a temp folder)
    for the whole run; stopped at the end. pyspark is imported only by tests that use it. The
    PostgreSQL JDBC driver is on its classpath (``jdbc_catalog`` adds a catalog there)."""
    from binlake.lake.spark.session import SparkSettings, build_session, stop_session
    from binlake_dev.postgres import JDBC_JAR

    warehouse = tmp_path_factory.mktemp("warehouse")
    jars = (str(JDBC_JAR),) if JDBC_JAR.is_file() else ()
    session = build_session(SparkSettings(app_name="binlake-tests", warehouse=warehouse, jars=jars))
    yield session
    stop_session(session)


def require_postgres() -> None:
    """Fail (not skip) when PostgreSQL or its JDBC driver is missing."""
    from binlake_dev.postgres import postgres_available

    if not postgres_available():
        pytest.fail(
            "the PostgreSQL server (postgresql) or its JDBC driver (libpostgresql-jdbc-java) is "
            "not installed. Run `make test` (its `deps` step installs them), or `make deps`.",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session: the database of the JDBC catalogs."""
    from binlake_dev.postgres import PostgresServer

    require_postgres()
    server = PostgresServer()
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture(scope="session")
def catalog_db(
    postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> CatalogDatabase:
    return catalog_database(postgres, tmp_path_factory.mktemp("catalog"))


@pytest.fixture(scope="session")
def jdbc_warehouse(
    spark: SparkSession, catalog_db: CatalogDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The folder of the session's JDBC catalog ``pglake``, registered in the tests' session."""
    warehouse = tmp_path_factory.mktemp("pglake")
    register_jdbc_catalog(spark, catalog_db, JDBC_CATALOG, warehouse)
    return warehouse


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    """A Spark standalone master and worker (2 cores) for the session."""
    from binlake_dev.cluster import SparkCluster

    with SparkCluster() as cluster:
        yield cluster


@pytest.fixture(params=["embedded"])
def target(request: pytest.FixtureRequest) -> TargetSetup:
    """The lake target of a replication test (tests/lake_targets.py); tests parametrise it
    indirectly: ``@pytest.mark.parametrize("target", ["embedded", "jdbc"], indirect=True)``."""
    kind = request.param
    if kind == "embedded":
        return embedded_target()
    database: CatalogDatabase = request.getfixturevalue("catalog_db")
    warehouse: Path = request.getfixturevalue("jdbc_warehouse")
    if kind == "jdbc":
        return jdbc_target(database, warehouse)
    assert kind == "cluster-jdbc", kind
    return cluster_target(database, warehouse, request.getfixturevalue("spark_cluster"))


@pytest.fixture(scope="module")
def power_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PowerCutMount]:
    """One power-cut mount for a test module (started on first use: tests/cut_modes.py)."""
    skip_without_fuse()
    base = tmp_path_factory.mktemp("powercut")
    (base / "backing").mkdir()
    with PowerCutMount(base / "backing", base / "mnt") as mount:
        yield mount


@pytest.fixture
def ground(request: pytest.FixtureRequest, tmp_path: Path) -> Ground:
    """Where a crash test keeps what it kills: ``kill`` unless parametrised (indirectly) with
    ``cut`` (tests/cut_modes.py)."""
    mode = getattr(request, "param", KILL)
    mount = request.getfixturevalue("power_mount") if mode == CUT else None
    ground = Ground(mode, tmp_path, mount)
    request.addfinalizer(ground.release)
    return ground
