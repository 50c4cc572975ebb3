"""Receiver speed: `binlake receive` against `mariadb-binlog --raw` copying the same binlogs.

Writes at least ``--size-mb`` MB of binlog on a sandbox MariaDB (transactions of
``--rows-per-transaction`` rows of ``--row-bytes`` bytes, inserted with the SEQUENCE engine, so
the rows events are the server's usual 8 KB pieces), then in the same run times:

- binlake: ``Receiver(...).run()`` with ``--until-caught-up`` semantics into a fresh state folder:
  the replication protocol, every event's CRC32 checked by the client on receipt (the relay
  log writer checks its framing), appended to the relay log with the default grouped fsync;
  compiled and pure Python (``BINLAKE_PURE_PYTHON=1``), each in a subprocess of its own, timed
  inside it (a build that is absent or stale runs pure Python both times: the mode is printed
  beside each figure);
- ``mariadb-binlog --read-from-remote-server --raw --to-last-log`` copying the same binlogs
  into files (C; no checksum verification, no fsync);
- for the breakdown, the same ``mariadb-binlog`` run followed by an fsync of each file it wrote
  and of their folder, timed together: the bytes made as durable as binlake's relay log makes
  them (not the goal's reference, which stays the plain run);
- for the breakdown, the same run made durable the way binlake's relay log is: while it runs,
  this script starts the disk on each MiB its files grow by (``start_writeback``, polled every
  2 ms), then fsyncs the files and their folder. The C tool's work with binlake's durability,
  and no CRC32 check or framing: about the best any copier that makes the bytes durable can do
  here;
- for the breakdown, binlake's protocol client alone (``SourceConnection.dump_batches``, as the
  receiver reads it, non-blocking, every CRC32 checked, events dropped): what the replication
  protocol costs without the relay log.

Each is run ``--repeat`` times, alternating, each run after an ``os.sync()`` and a second of
rest (so that no run pays for the writeback of the one before); the best time of each counts.
Prints MB/s and events/s for each and the ratio binlake / mariadb-binlog (goal: >= 0.8). Not a
test.

    .venv/bin/python bench/receive.py [--size-mb 500] [--repeat 3] [--rows-per-transaction 1000]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from binlake.compiled import PURE_ENV, describe
from binlake.config import config_from_mapping
from binlake.source.client import DumpStart, SourceConnection
from binlake.source.progress import Progress
from binlake.source.receiver import Outcome, Receiver
from binlake.source.settings import ConnectionSettings
from binlake.storage.durable import start_writeback
from binlake_dev.sandbox import MariaDBSandbox, find_executable

MB = 1_000_000
#: The server does not flush at each commit while the workload is written (one-row
#: transactions would take minutes); the binlog's bytes are the same.
SANDBOX_ARGS = ["--max-binlog-size=256M", "--sync-binlog=0", "--innodb-flush-log-at-trx-commit=0"]
#: How often the follower looks at mariadb-binlog's files, and how much growth starts writeback.
FOLLOW_POLL_S = 0.002
FOLLOW_STEP = 1 << 20


@dataclass
class Timing:
    seconds: float
    nbytes: int
    events: int

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.seconds / MB

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def load(sandbox: MariaDBSandbox, size_mb: int, rows: int, row_bytes: int) -> int:
    """Insert until the binlogs hold ``size_mb`` MB; returns their total size."""
    with sandbox.connect(autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE bench")
        cur.execute(
            "CREATE TABLE bench.t (id BIGINT PRIMARY KEY AUTO_INCREMENT, k INT, "
            "pad VARCHAR(4000)) ENGINE=InnoDB"
        )
        cur.execute("SET SESSION binlog_row_image = 'FULL'")
        insert = (
            "INSERT INTO bench.t (k, pad) "
            f"SELECT seq, REPEAT(CHAR(65 + seq % 26), {row_bytes}) FROM bench.seq_1_to_{rows}"
        )
        between_checks = max(1, 1000 // rows)  # statements between two looks at the size
        while True:
            cur.execute("SHOW BINARY LOGS")
            if sum(int(size) for _name, size in cur.fetchall()) >= size_mb * MB:
                break
            for _ in range(between_checks):
                cur.execute(insert)
    return binlog_bytes(sandbox)


def binlog_bytes(sandbox: MariaDBSandbox) -> int:
    rows = sandbox.execute("SHOW BINARY LOGS")
    return sum(int(size) for _name, size in rows)


def time_binlake(host: str, port: int, work: Path, nbytes: int) -> Timing:
    state = work / "state"
    shutil.rmtree(state, ignore_errors=True)
    config = config_from_mapping(
        {
            "source": {"host": host, "port": port, "user": "root", "server_id": 77},
            "state": {"dir": str(state)},
        },
        base_dir=work,
        environ={},
    )
    progress = Progress(io.StringIO(), live=False)
    receiver = Receiver(config, until_caught_up=True, progress=progress)
    started = time.perf_counter()
    result = receiver.run()
    seconds = time.perf_counter() - started
    assert result.outcome is Outcome.CAUGHT_UP, progress.stream
    return Timing(seconds, nbytes, result.events)


def binlake_in_subprocess(
    sandbox: MariaDBSandbox, work: Path, nbytes: int, *, pure: bool
) -> tuple[Timing, str]:
    """``time_binlake`` in a fresh process, compiled modules or (``pure``) not; its mode."""
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if pure:
        env[PURE_ENV] = "1"
    command = [sys.executable, __file__, "--receive-only", sandbox.host, str(sandbox.port)]
    command += [str(work), str(nbytes)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    seconds, events, mode = out.rstrip("\n").split("\t")
    return Timing(float(seconds), nbytes, int(events)), mode


def time_client(sandbox: MariaDBSandbox, nbytes: int) -> Timing:
    settings = ConnectionSettings(sandbox.host, sandbox.port, "root", b"", server_id=78)
    events = 0
    started = time.perf_counter()
    with SourceConnection.open(settings) as connection:
        first = connection.server.binlog_files[0][0]
        for batch in connection.dump_batches(DumpStart(file=first), non_blocking=True):
            events += len(batch)
    return Timing(time.perf_counter() - started, nbytes, events)


def settle() -> None:
    """The page cache written back, then a second of rest: a run starts with no writeback of
    the run before it under way."""
    os.sync()
    time.sleep(1.0)


def fsync_folder(folder: Path) -> None:
    """Every file in ``folder`` fsynced, then the folder itself."""
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def time_mariadb_binlog(
    sandbox: MariaDBSandbox, work: Path, *, durable: Literal["", "fsync", "follow"] = ""
) -> Timing:
    """Events are counted by binlake's run (the same stream); set by the caller. ``durable``:
    "" for the plain run; "fsync": the files it wrote, and their folder, fsynced before the
    clock stops; "follow": writeback started as the files grow, then the same fsyncs."""
    out = work / "raw"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    first = sandbox.execute("SHOW BINARY LOGS")[0][0]
    command = [
        find_executable("mariadb-binlog"),
        "--read-from-remote-server",
        "--raw",
        "--to-last-log",
        f"--host={sandbox.host}",
        f"--port={sandbox.port}",
        "--user=root",
        f"--result-file={out}/",
        str(first),
    ]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    if durable == "follow":
        follow_writeback(process, out)
    if process.wait() != 0:
        raise SystemExit(f"mariadb-binlog failed with exit code {process.returncode}")
    if durable:
        fsync_folder(out)
    seconds = time.perf_counter() - started
    copied = sum(p.stat().st_size for p in out.iterdir())
    return Timing(seconds, copied, 0)


def follow_writeback(process: subprocess.Popen[bytes], out: Path) -> None:
    """Until ``process`` ends, start the disk on each ``FOLLOW_STEP`` bytes any file in ``out``
    grows by, as binlake's relay log writer does after each of its writes."""
    fds: dict[str, int] = {}
    started_at: dict[str, int] = {}
    try:
        while process.poll() is None:
            for name in os.listdir(out):
                if name not in fds:
                    fds[name] = os.open(out / name, os.O_RDONLY)
                    started_at[name] = 0
                size = os.fstat(fds[name]).st_size
                if size - started_at[name] >= FOLLOW_STEP:
                    start_writeback(fds[name])
                    started_at[name] = size
            time.sleep(FOLLOW_POLL_S)
    finally:
        for fd in fds.values():
            os.close(fd)


def report(name: str, runs: list[Timing]) -> Timing:
    """Print the best of ``runs`` (and every run's time); the best."""
    timing = min(runs, key=lambda t: t.seconds)
    print(
        f"{name:<24} {timing.seconds:7.2f} s  {timing.mb_per_s:8.1f} MB/s  "
        f"{timing.events_per_s:10,.0f} events/s  ({timing.nbytes / MB:,.0f} MB; runs: "
        f"{', '.join(f'{t.seconds:.2f}' for t in runs)} s)"
    )
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=500, help="binlog to write (MB)")
    parser.add_argument("--rows-per-transaction", type=int, default=1000)
    parser.add_argument("--row-bytes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--receive-only", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.receive_only:  # the child of binlake_in_subprocess
        host, port, work, nbytes = args.receive_only
        timing = time_binlake(host, int(port), Path(work), int(nbytes))
        print(f"{timing.seconds}\t{timing.events}\t{describe()}")
        return
    with tempfile.TemporaryDirectory(prefix="binlake-bench-") as tmp:
        work = Path(tmp)
        sandbox = MariaDBSandbox(work / "mariadb", extra_args=SANDBOX_ARGS)
        with sandbox:
            started = time.perf_counter()
            nbytes = load(sandbox, args.size_mb, args.rows_per_transaction, args.row_bytes)
            print(
                f"workload: {nbytes / MB:,.0f} MB of binlog written in "
                f"{time.perf_counter() - started:.1f} s"
            )
            binlake: list[Timing] = []
            pure: list[Timing] = []
            modes: dict[bool, str] = {}
            reference: list[Timing] = []
            durable: list[Timing] = []
            followed: list[Timing] = []
            client: list[Timing] = []
            for _ in range(args.repeat):
                settle()
                reference.append(time_mariadb_binlog(sandbox, work))
                settle()
                for is_pure, runs in ((False, binlake), (True, pure)):
                    timing, modes[is_pure] = binlake_in_subprocess(
                        sandbox, work, nbytes, pure=is_pure
                    )
                    runs.append(timing)
                    settle()
                durable.append(time_mariadb_binlog(sandbox, work, durable="fsync"))
                settle()
                followed.append(time_mariadb_binlog(sandbox, work, durable="follow"))
                settle()
                client.append(time_client(sandbox, nbytes))
            for timing in reference + durable + followed:
                timing.events = binlake[0].events
            best_ref = report("mariadb-binlog", reference)
            best = report("binlake receive", binlake)
            best_pure = report("binlake receive (pure)", pure)
            print(f"  (modes: {modes[False]}; {modes[True]})")
            best_durable = report("(mariadb-binlog + fsync)", durable)
            best_followed = report("(+ writeback, fsync)", followed)
            report("(client alone)", client)
            print(
                f"ratio (binlake / mariadb-binlog, MB/s): {best.mb_per_s / best_ref.mb_per_s:.2f}x"
            )
            print(
                f"  (pure Python: {best_pure.mb_per_s / best_ref.mb_per_s:.2f}x; compiled / pure: "
                f"{best.mb_per_s / best_pure.mb_per_s:.2f}x)"
            )
            print(
                "  (binlake / mariadb-binlog with its files fsynced, not the goal's reference: "
                f"{best.mb_per_s / best_durable.mb_per_s:.2f}x)"
            )
            print(
                "  (mariadb-binlog made durable as binlake's relay log is, against the plain run: "
                f"{best_followed.mb_per_s / best_ref.mb_per_s:.2f}x; binlake against it: "
                f"{best.mb_per_s / best_followed.mb_per_s:.2f}x)"
            )


if __name__ == "__main__":
    main()
