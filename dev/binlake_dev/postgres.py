"""A throwaway PostgreSQL server (Debian's ``postgresql``) for Iceberg's JDBC catalog in the
tests, the demo and the benchmarks.

The server refuses to run as root, so under root it runs as the ``postgres`` user
(``Popen(user=)``): its folder is created under /tmp (pytest's temporary folders are ``0700
root``, out of that user's reach) and handed to it. ``initdb`` trusts local (Unix socket)
connections, which is how the role and database of the catalog are created, and asks TCP
clients for a SCRAM password, which is how Iceberg logs in (``jdbc:postgresql://127.0.0.1:
PORT/lake``): a wrong password is a real refusal.

``postgres`` is started directly (no ``pg_ctl``), so the child's PID is the postmaster's.
``stop`` sends SIGINT, PostgreSQL's *fast* shutdown (sessions are ended): SIGTERM is its *smart*
shutdown, which would wait for Spark's pooled catalog connections forever. ``kill`` is a crash
(SIGKILL of the postmaster; its backends end when they notice). Readiness is read from the
status line the postmaster writes into ``postmaster.pid`` ("ready"): no polling connections.
The data folder survives ``stop``: ``start`` again is a restart (0.1 s), on the same port.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from binlake_dev.procs import spawn, stop_child, wait_for
from binlake_dev.sandbox import free_port

HOST = "127.0.0.1"
POSTGRES_ROOT = Path("/usr/lib/postgresql")
JDBC_JAR = Path("/usr/share/java/postgresql.jar")
START_TIMEOUT_S = 60.0
#: Test-only speed settings: the catalog database's own durability is not under test here.
FAST_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


class PostgresMissingError(RuntimeError):
    """The PostgreSQL server or its JDBC driver is not installed."""


def postgres_bin() -> Path:
    """The ``bin`` folder of the newest installed PostgreSQL server."""
    found = sorted(
        (p for p in POSTGRES_ROOT.glob("*/bin") if (p / "postgres").is_file()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not found:
        raise PostgresMissingError(
            f"no PostgreSQL server under {POSTGRES_ROOT}; run `make deps` (installs postgresql)"
        )
    return found[-1]


def postgres_available() -> bool:
    """True when a PostgreSQL server and the JDBC driver's jar are installed."""
    try:
        postgres_bin()
    except PostgresMissingError:
        return False
    return JDBC_JAR.is_file()


def _server_user() -> str | None:
    """The OS user the server runs as: ``postgres`` under root, else ourselves (None)."""
    return "postgres" if os.geteuid() == 0 else None


class PostgresServer:
    """One PostgreSQL server in its own folder, with a login role and a database for the
    catalog (``user``, ``password``, ``database``)."""

    def __init__(
        self,
        *,
        user: str = "binlake",
        password: str = "binlake-catalog-password",
        database: str = "lake",
    ) -> None:
        self.user = user
        self.password = password
        self.database = database
        self.port = 0
        self.base_dir = Path(tempfile.mkdtemp(prefix="binlake-pg-", dir="/tmp"))
        self.process: subprocess.Popen[bytes] | None = None
        self.timings: dict[str, float] = {}
        owner = _server_user()
        if owner is not None:
            entry = pwd.getpwnam(owner)
            os.chown(self.base_dir, entry.pw_uid, entry.pw_gid)
        self.base_dir.chmod(0o700)

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "postgres.log"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{HOST}:{self.port}/{self.database}"

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.remove()

    def start(self) -> Self:
        """Create the server's data on first start, then start it and wait until ready."""
        begun = time.monotonic()
        fresh = not (self.data_dir / "PG_VERSION").exists()
        if fresh:
            self._initdb()
        self.port = self.port or free_port(HOST)
        self._launch()
        if fresh:
            quoted = self.password.replace("'", "''")
            self.admin_sql(
                f"CREATE ROLE \"{self.user}\" LOGIN PASSWORD '{quoted}'",
                f'CREATE DATABASE "{self.database}" OWNER "{self.user}"',
            )
        self.timings["start_s" if not fresh else "create_s"] = time.monotonic() - begun
        return self

    def stop(self) -> None:
        """Fast shutdown (SIGINT): open sessions are ended, the data folder is kept."""
        if self.process is not None:
            stop_child(self.process, signal.SIGINT)
            self.process = None

    def kill(self) -> None:
        """SIGKILL of the postmaster: a crash."""
        if self.process is not None:
            stop_child(self.process, signal.SIGKILL)
            self.process = None

    def remove(self) -> None:
        """Stop the server and delete its folder."""
        self.stop()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def _initdb(self) -> None:
        argv = [str(postgres_bin() / "initdb"), "-D", str(self.data_dir), "-U", "postgres"]
        argv += ["--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=UTF8"]
        argv += ["--locale=C", "--no-sync"]
        done = subprocess.run(
            argv, capture_output=True, text=True, user=_server_user(), cwd=self.base_dir
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-2000:]}")

    def _launch(self) -> None:
        argv = [str(postgres_bin() / "postgres"), "-D", str(self.data_dir)]
        argv += ["-k", str(self.base_dir), "-h", HOST, "-p", str(self.port)]
        for setting in FAST_SETTINGS:
            argv += ["-c", setting]
        self.process = spawn(argv, log=self.log_path, user=_server_user(), cwd=self.base_dir)
        process = self.process
        wait_for(
            lambda: True if self._status() == "ready" else None,
            timeout_s=START_TIMEOUT_S,
            what=f"PostgreSQL on {HOST}:{self.port}",
            alive=lambda: process.poll() is None,
            interval_s=0.02,
            log=self.log_path,
        )

    def _status(self) -> str | None:
        """Line 8 of postmaster.pid: "starting", "ready", "stopping" (None before it)."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None
        return lines[7].strip() if len(lines) > 7 else None

    def admin_sql(self, *statements: str, database: str = "postgres") -> list[Any]:
        """Statements run as the superuser over the Unix socket (trusted); the last's rows."""
        import pg8000.native

        connection = pg8000.native.Connection(
            "postgres",
            unix_sock=str(self.base_dir / f".s.PGSQL.{self.port}"),
            database=database,
        )
        try:
            rows: list[Any] = []
            for statement in statements:
                rows = connection.run(statement) or []
            return rows
        finally:
            connection.close()
