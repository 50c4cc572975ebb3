"""A throwaway MariaDB server for tests, the demo and benchmarks.

``MariaDBSandbox`` creates a datadir with ``mariadb-install-db`` on its first start and runs
``mariadbd`` on a free port of 127.0.0.1 with the binlog settings binlake relies on: ROW format,
FULL row image, FULL row metadata, CRC32 checksums and utf8mb4. The binlog files and their index
sit in the datadir as ``mariadb-bin.NNNNNN`` and ``mariadb-bin.index``.

Root logs in over TCP with an empty password: ``mariadb-install-db
--auth-root-authentication-method=normal`` creates ``root@localhost``, ``root@127.0.0.1`` and
``root@::1`` without passwords, and with ``--skip-name-resolve`` a TCP client from 127.0.0.1 is
``root@127.0.0.1``.

The server's stderr (its error log) goes to ``<base_dir>/mariadbd.log``. A server still running
when the interpreter exits is killed, so a forgotten ``stop()`` leaves no process behind.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from pymysql.connections import Connection
    from pymysql.cursors import Cursor

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 2.0
LOG_TAIL_LINES = 40
PORT_ATTEMPTS = 3
BINLOG_BASENAME = "mariadb-bin"
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin")
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, NUL included
ER_ACCESS_DENIED = 1045

# Small InnoDB so a server starts in a fraction of a second; later flags in extra_args override.
INNODB_ARGS = (
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=16M",
    "--innodb-buffer-pool-load-at-startup=OFF",
    "--innodb-buffer-pool-dump-at-shutdown=OFF",
)
BINLOG_FORMAT_ARGS = (
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
    "--binlog-checksum=CRC32",
)

_running: set[subprocess.Popen[bytes]] = set()


class SandboxError(RuntimeError):
    """The sandbox server could not be created, started or stopped."""


class PortInUseError(SandboxError):
    """The chosen TCP port was taken between picking it and the server binding it."""


def find_executable(name: str) -> str:
    """The path of a MariaDB program, also looking in the sbin folders (mariadbd lives there)."""
    search_path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN_DIRS])
    found = shutil.which(name, path=search_path)
    if found is None:
        raise SandboxError(f"{name} not found; run `make deps` (or `make test`) to install MariaDB")
    return found


def mariadb_available() -> bool:
    """True when mariadbd and mariadb-install-db are installed."""
    try:
        find_executable("mariadbd")
        find_executable("mariadb-install-db")
    except SandboxError:
        return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _kill_forgotten_servers() -> None:
    for process in list(_running):
        process.kill()
        process.wait()
    _running.clear()


atexit.register(_kill_forgotten_servers)


class MariaDBSandbox:
    """One mariadbd with its own datadir under ``base_dir``; see the module docstring."""

    host = "127.0.0.1"
    user = "root"

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        server_id: int = 1,
        extra_args: Sequence[str] = (),
        log_bin: bool = True,
    ) -> None:
        self.base_dir = Path(base_dir).absolute()
        self.datadir = self.base_dir / "data"
        #: The server's own temp folder: servers sharing /tmp have collided in install-db.
        self.tmpdir = self.base_dir / "tmp"
        self.socket_path = self.base_dir / "mariadbd.sock"
        self.pid_file = self.base_dir / "mariadbd.pid"
        self.log_path = self.base_dir / "mariadbd.log"
        self.server_id = server_id
        self.extra_args = list(extra_args)
        self.log_bin = log_bin
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    # ---- where things are -------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise SandboxError("the sandbox has not been started")
        return self._port

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def binlog_dir(self) -> Path:
        return self.datadir

    @property
    def binlog_index_path(self) -> Path:
        return self.datadir / f"{BINLOG_BASENAME}.index"

    def binlog_files(self) -> list[Path]:
        """The binlog files the index lists, oldest first, as absolute paths."""
        if not self.binlog_index_path.exists():
            return []
        lines = self.binlog_index_path.read_text().splitlines()
        return [self._in_datadir(line.strip()) for line in lines if line.strip()]

    def _in_datadir(self, listed: str) -> Path:
        path = Path(listed)
        return path if path.is_absolute() else (self.datadir / path).resolve()

    def server_args(self, port: int) -> list[str]:
        """The mariadbd command line after the program name."""
        args = ["--no-defaults", *self._user_args(), f"--datadir={self.datadir}"]
        args += [f"--tmpdir={self.tmpdir}"]
        args += [f"--socket={self.socket_path}", f"--pid-file={self.pid_file}"]
        args += [f"--port={port}", f"--bind-address={self.host}", "--skip-name-resolve"]
        args += [f"--server-id={self.server_id}", "--character-set-server=utf8mb4"]
        if self.log_bin:
            args += [f"--log-bin={self.datadir / BINLOG_BASENAME}"]
            args += [f"--log-bin-index={self.binlog_index_path}"]
        args += [*BINLOG_FORMAT_ARGS, *INNODB_ARGS, "--innodb-fast-shutdown=1"]
        return args + self.extra_args

    @staticmethod
    def _user_args() -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    # ---- life cycle -------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Create the datadir if needed, launch mariadbd and wait until root can log in."""
        if self.is_running:
            raise SandboxError(f"mariadbd is already running (pid {self.pid})")
        self._check_socket_path()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.tmpdir.mkdir(exist_ok=True)
        if not (self.datadir / "mysql").is_dir():
            self._install_db()
        for _attempt in range(PORT_ATTEMPTS):
            try:
                self._launch(self._port or free_port(self.host))
                self._wait_until_ready(timeout)
                return self
            except PortInUseError:
                self._port = None
        raise SandboxError(f"no free TCP port after {PORT_ATTEMPTS} attempts")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Shut the server down cleanly (SIGTERM) and wait for it to exit."""
        process = self._process
        if process is None:
            return
        try:
            process.terminate()
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise self._failure(f"mariadbd did not shut down within {timeout}s; killed") from None
        finally:
            self._forget(process)

    def kill(self) -> None:
        """SIGKILL the server (a crash, as far as InnoDB and the binlog know) and reap it."""
        process = self._process
        if process is None:
            return
        process.kill()
        process.wait()
        self._forget(process)

    def restart(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Clean stop, then start on the same port and datadir."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> Self:
        return self if self.is_running else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _check_socket_path(self) -> None:
        if len(os.fsencode(self.socket_path)) > MAX_SOCKET_PATH:
            raise SandboxError(f"base_dir too deep for a unix socket path: {self.socket_path}")

    def _install_db(self) -> None:
        command = [find_executable("mariadb-install-db"), "--no-defaults", *self._user_args()]
        command += [f"--datadir={self.datadir}", "--auth-root-authentication-method=normal"]
        command += [f"--tmpdir={self.tmpdir}"]
        command += ["--skip-test-db", *INNODB_ARGS]
        self._log_offset = self._log_size()
        with self.log_path.open("ab") as log:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        if done.returncode != 0:
            raise self._failure(f"mariadb-install-db exited with code {done.returncode}")

    def _launch(self, port: int) -> None:
        self._log_offset = self._log_size()
        command = [find_executable("mariadbd"), *self.server_args(port)]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a Ctrl-C in the terminal must not reach the server
            )
        self._port = port
        _running.add(self._process)

    def _wait_until_ready(self, timeout: float) -> None:
        import pymysql

        deadline = time.monotonic() + timeout
        while True:
            self._check_still_running()
            try:
                self._probe_connect()
                return
            except pymysql.err.OperationalError as error:
                if error.args[0] == ER_ACCESS_DENIED:
                    self.kill()
                    raise self._failure(f"root cannot log in over TCP: {error}") from error
            if time.monotonic() > deadline:
                self.kill()
                raise self._failure(f"mariadbd did not accept connections within {timeout}s")
            time.sleep(0.02)

    def _probe_connect(self) -> None:
        """Log in and out; the read timeout matters if something else answers on the port."""
        import pymysql

        probe = pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password="",
            connect_timeout=PROBE_TIMEOUT_S,
            read_timeout=PROBE_TIMEOUT_S,
            write_timeout=PROBE_TIMEOUT_S,
        )
        probe.close()

    def _check_still_running(self) -> None:
        process = self._process
        if process is None or process.poll() is None:
            return
        self._forget(process)
        message = f"mariadbd exited with code {process.returncode} while starting"
        if "Address already in use" in self.log_tail():
            raise PortInUseError(message)
        raise self._failure(message)

    def _forget(self, process: subprocess.Popen[bytes]) -> None:
        _running.discard(process)
        if self._process is process:
            self._process = None

    # ---- the server log ---------------------------------------------------------------------

    def _log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines the server (or install-db) wrote since the latest launch."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            text = log.read().decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _failure(self, message: str) -> SandboxError:
        return SandboxError(f"{message}\n--- tail of {self.log_path} ---\n{self.log_tail()}")

    # ---- SQL --------------------------------------------------------------------------------

    def connect(
        self, database: str | None = None, autocommit: bool = True, client_flag: int = 0
    ) -> Connection[Cursor]:
        """A new PyMySQL connection as root over TCP (``client_flag``: PyMySQL's capability
        flags, e.g. ``CLIENT.MULTI_STATEMENTS``); the caller closes it."""
        import pymysql

        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password="",
            database=database,
            autocommit=autocommit,
            charset="utf8mb4",
            connect_timeout=5,
            client_flag=client_flag,
        )

    def execute(
        self, sql: str, args: Sequence[Any] | None = None, database: str | None = None
    ) -> tuple[tuple[Any, ...], ...]:
        """Run one statement on a fresh autocommit connection and return all its rows."""
        with self.connect(database) as connection, connection.cursor() as cursor:
            cursor.execute(sql, args)
            return tuple(cursor.fetchall())

    def flush_logs(self) -> list[Path]:
        """Rotate to a new binlog file; returns the files the index lists afterwards."""
        self.execute("FLUSH BINARY LOGS")
        return self.binlog_files()

    def purge_binlogs(self, timeout_s: float = 30.0) -> Path:
        """Rotate, then purge every binlog file but the new one; returns it. PURGE is retried:
        MariaDB silently keeps a file until its binlog checkpoint is logged (InnoDB flushes
        asynchronously after FLUSH BINARY LOGS) and while a dump thread still reads it.
        ``PURGE ... TO 'name'`` is not used: it matches nothing when the index holds absolute
        paths (as the sandbox's does)."""
        newest = self.flush_logs()[-1]
        deadline = time.monotonic() + timeout_s
        while self.binlog_files() != [newest]:
            if time.monotonic() > deadline:
                raise SandboxError(f"the source kept {self.binlog_files()} after {timeout_s:g}s")
            self.execute("PURGE BINARY LOGS BEFORE NOW() + INTERVAL 1 DAY")
            time.sleep(0.05)
        return newest
