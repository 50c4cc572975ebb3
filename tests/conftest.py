"""Shared fixtures: real MariaDB servers (one for the session, private ones on demand) and a
fresh database per test.

Markers are declared in pyproject.toml; here each test gets the marker of its folder
(tests/unit -> unit, tests/integration -> integration, tests/crash -> crash,
tests/property -> property).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from binlake_dev.sandbox import MariaDBSandbox, mariadb_available

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TESTS_DIR = Path(__file__).parent
FOLDER_MARKERS = ("unit", "integration", "crash", "property")


@pytest.hookimpl(tryfirst=True)  # before -m selection deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.relative_to(TESTS_DIR).parts[0]
        except ValueError:
            continue
        if folder in FOLDER_MARKERS:
            item.add_marker(folder)


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
    for the whole run; stopped at the end. pyspark is imported only by tests that use it."""
    from binlake.lake.session import SparkSettings, build_session, stop_session

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = build_session(SparkSettings(app_name="binlake-tests", warehouse=warehouse))
    yield session
    stop_session(session)
