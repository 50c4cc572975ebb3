"""Recovery cost: process start to the first applied batch after a crash, by relay-log size, with
the relay-log checkpoint (MDEV-181) far back and near the tail.

For each size in ``--sizes`` (default 100M,1G), on a sandbox MariaDB:

1. ``bench.t`` (replicated) gets a few rows and ``binlake replicate --until-caught-up`` runs
   once: the state folder and the lake table exist.
2. A bulk workload writes the size in binlog to ``bench.bulk`` (``[tables] exclude``d, so the
   lake does not have to take a gigabyte; the applier reads and skips its transactions exactly
   as it skips transactions a table already holds: the batch applier checks the position
   before it decodes a row): transactions of ``--rows-per-transaction`` rows of
   ``--row-bytes`` bytes (the server's usual ~8 KB rows events).
3. ``--tail`` one-row transactions of ``bench.t``: the work the restart must apply.
4. ``binlake receive --until-caught-up`` copies it all into the relay log (files of
   ``--relay-file-mb`` MiB).
5. ``binlake replicate`` is started with ``BINLAKE_CRASH_POINT=checkpoint_before_record`` and
   dies by SIGKILL the first time its applier would record a new checkpoint: nothing purged,
   the newest relay file still IN_USE, the tail not applied. The state folder and the
   warehouse are kept as the crash left them.

Then, ``--repeat`` times, alternating: the crashed state is restored, the checkpoint record is
written -- *far back*: the oldest relay file (what an applier that never advanced it would
leave; recovery must scan everything), or *near the tail*: the relay file holding the first
tail transaction (what the applier records by itself: every transaction before it touches no
replicated table) -- and ``binlake replicate --until-caught-up`` is timed from its start:

- *recovered*: its ``receive: streaming from`` line (relay log recovered from the checkpoint,
  restart point derived, a new relay file made, connected to the source);
- *applier ready*: its ``apply: reading the relay log from`` line (Spark started, the tables'
  positions read; Spark starts only once the receiver has recovered);
- *first batch*: the commit time of the first new Iceberg snapshot of ``bench.t``;
- *exit*.

The reference, run in the same script: ``mariadb-binlog --verify-binlog-checksum`` reading every
relay file to /dev/null (a full scan in C). Ratios printed: the time a far-back checkpoint adds
to the first batch, in full C scans; and the first batch near the tail, largest size over
smallest (1.0 = flat). The relay files are in the page cache (just written and copied). Not a
test: nothing is asserted.

    .venv/bin/python bench/recovery.py [--sizes 100M,1G] [--repeat 2] [--relay-file-mb 16]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from _common import write_config
from binlake.binlog.tablemap import TableMap
from binlake.crashpoints import ENV_VAR
from binlake.lake.catalog.metadata import read_table
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.checkpoint import CheckpointRecord
from binlake.storage.index import LogIndex
from binlake_dev.sandbox import MariaDBSandbox, find_executable

MB = 1_000_000
MIB = 1 << 20
RUN_TIMEOUT_S = 1800.0
TABLE = ("bench", "t")
RECOVERED = "receive: streaming from"
APPLIER_READY = "apply: reading the relay log from"
SCANNED = "receive: relay log recovery: "
SERVER_ARGS = (
    "--innodb-buffer-pool-size=256M",
    "--innodb-log-file-size=256M",
    "--innodb-flush-log-at-trx-commit=2",
    "--max-binlog-size=256M",
)


def parse_size(text: str) -> int:
    text = text.strip().upper()
    for suffix, unit in (("G", 1000 * MB), ("M", MB)):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * unit)
    return int(text)


def environment(crash_point: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    env["PYTHONUNBUFFERED"] = "1"
    if crash_point is not None:
        env[ENV_VAR] = crash_point
    return env


def binlake(*args: str) -> list[str]:
    return [sys.executable, "-m", "binlake.cli.main", *args]


def run_binlake(
    args: list[str], crash_point: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        binlake(*args),
        capture_output=True,
        text=True,
        env=environment(crash_point),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def require(run: subprocess.CompletedProcess[str], what: str, rc: int = 0) -> None:
    if run.returncode != rc:
        raise SystemExit(
            f"{what}: exit {run.returncode}, expected {rc}\n{run.stdout[-2000:]}"
            f"{run.stderr[-4000:]}"
        )


# ---- building the crashed state -----------------------------------------------------------------


@dataclass
class Built:
    folder: Path
    config: Path
    relay_bytes: int
    relay_files: int
    near: str
    oldest: str
    build_s: float
    snapshots: int
    #: Relay file name -> size, in index order.
    sizes: dict[str, int] = field(default_factory=dict)

    def bytes_from(self, checkpoint: str) -> int:
        """Relay bytes from the start of ``checkpoint`` to the end: what a restart reads."""
        names = list(self.sizes)
        return sum(self.sizes[name] for name in names[names.index(checkpoint) :])


def binlog_bytes(sandbox: MariaDBSandbox) -> int:
    return sum(int(size) for _name, size in sandbox.execute("SHOW BINARY LOGS"))


def bulk(sandbox: MariaDBSandbox, nbytes: int, rows: int, row_bytes: int) -> None:
    """Insert into bench.bulk until the binlog has grown by ``nbytes``."""
    target = binlog_bytes(sandbox) + nbytes
    with sandbox.connect(autocommit=True) as conn, conn.cursor() as cur:
        while binlog_bytes(sandbox) < target:
            for _ in range(10):
                cur.execute(
                    "INSERT INTO bench.bulk (k, pad) "
                    f"SELECT seq, REPEAT(CHAR(65 + seq % 26), {row_bytes}) "
                    f"FROM bench.seq_1_to_{rows}"
                )


def build(folder: Path, sandbox: MariaDBSandbox, size: int, args: argparse.Namespace) -> Built:
    started = time.monotonic()
    config = write_config(
        folder,
        sandbox,
        receiver=f"max_relay_file_size = {args.relay_file_mb * MIB}\n",
        tables='exclude = ["bench.bulk"]\n',
    )
    sandbox.execute("CREATE DATABASE bench")
    sandbox.execute("CREATE TABLE bench.t (id INT PRIMARY KEY, v INT NOT NULL)")
    sandbox.execute(
        "CREATE TABLE bench.bulk (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, pad TEXT)"
    )
    for i in range(10):
        sandbox.execute("INSERT INTO bench.t VALUES (%s, %s)", (i, i))
    require(run_binlake(["replicate", "--config", str(config), "--until-caught-up"]), "replicate")
    bulk(sandbox, size, args.rows_per_transaction, args.row_bytes)
    for i in range(args.tail):
        sandbox.execute("INSERT INTO bench.t VALUES (%s, %s)", (1000 + i, i))
    require(run_binlake(["receive", "--config", str(config), "--until-caught-up"]), "receive")
    snapshots = len(lake_snapshots(folder / "warehouse"))
    crashed = run_binlake(["replicate", "--config", str(config)], "checkpoint_before_record")
    require(crashed, "replicate armed at checkpoint_before_record", rc=-9)
    if len(lake_snapshots(folder / "warehouse")) != snapshots:
        raise SystemExit("the crashed run applied the tail already; use a larger size")
    relay = folder / "state" / "relay"
    names = LogIndex(relay / "relay-bin.index").names()
    return Built(
        folder,
        config,
        sum((relay / name).stat().st_size for name in names),
        len(names),
        first_file_with(relay, names, ".".join(TABLE)),
        names[0],
        time.monotonic() - started,
        snapshots,
        {name: (relay / name).stat().st_size for name in names},
    )


def first_file_with(relay: Path, names: list[str], table: str) -> str:
    """The oldest relay file of the newest run of files holding rows of ``table``."""
    found: str | None = None
    for name in reversed(names):
        if holds_table(relay / name, table):
            found = name
        elif found is not None:
            break
    if found is None:
        raise SystemExit(f"no relay file holds rows of {table}")
    return found


def holds_table(path: Path, table: str) -> bool:
    with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
        return any(
            isinstance(e.payload, TableMap) and e.payload.qualified_name == table
            for e in reader.events()
        )


def lake_snapshots(warehouse: Path) -> list[int]:
    """Commit times (ms) of bench.t's binlake snapshots."""
    table = read_table(warehouse, TABLE)
    return [s.timestamp_ms for s in table.binlake_snapshots] if table is not None else []


# ---- one restart --------------------------------------------------------------------------------


@dataclass
class Restart:
    checkpoint: str
    recovered: float
    ready: float
    first_batch: float
    exit: float
    scanned: int
    lines: list[str] = field(default_factory=list)


def restore(golden: Path, work: Path) -> None:
    for name in ("state", "warehouse"):
        shutil.rmtree(work / name, ignore_errors=True)
        subprocess.run(["cp", "-a", str(golden / name), str(work / name)], check=True)


def restart(built: Built, golden: Path, checkpoint: str) -> Restart:
    restore(golden, built.folder)
    CheckpointRecord(built.folder / "state" / "relay.checkpoint").write(checkpoint)
    lines: list[tuple[float, str]] = []
    wall = time.time()
    started = time.monotonic()
    process = subprocess.Popen(
        binlake("replicate", "--config", str(built.config), "--until-caught-up"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment(),
    )
    assert process.stdout is not None
    stream = process.stdout

    def read() -> None:
        for line in stream:
            lines.append((time.monotonic() - started, line.rstrip("\n")))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        rc = process.wait(timeout=RUN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    exited = time.monotonic() - started
    reader.join()
    text = [line for _t, line in lines]
    if rc != 0:
        raise SystemExit(f"binlake replicate after the crash: exit {rc}\n" + "\n".join(text))
    new = [t for t in lake_snapshots(built.folder / "warehouse") if t >= wall * 1000 - 1000]
    if not new:
        raise SystemExit("the restart applied nothing to bench.t\n" + "\n".join(text))
    return Restart(
        checkpoint,
        first_time(lines, RECOVERED),
        first_time(lines, APPLIER_READY),
        min(new) / 1000 - wall,
        exited,
        sum(1 for line in text if line.startswith(SCANNED) and ": clean" in line),
        text,
    )


def first_time(lines: list[tuple[float, str]], prefix: str) -> float:
    for seconds, line in lines:
        if line.startswith(prefix):
            return seconds
    raise SystemExit(f"no line starting {prefix!r} in:\n" + "\n".join(line for _t, line in lines))


def reference_scan(relay: Path) -> float:
    """``mariadb-binlog --verify-binlog-checksum`` over every relay file, to /dev/null."""
    files = [str(relay / name) for name in LogIndex(relay / "relay-bin.index").names()]
    command = [find_executable("mariadb-binlog"), "--verify-binlog-checksum", *files]
    started = time.perf_counter()
    run = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(
            f"mariadb-binlog failed (exit {run.returncode}): "
            f"{run.stderr.decode(errors='replace')[-2000:]}"
        )
    return seconds


# ---- the run ------------------------------------------------------------------------------------


@dataclass
class SizeResult:
    label: str
    built: Built
    far: list[Restart]
    near: list[Restart]
    reference: list[float]


def measure_size(base: Path, label: str, size: int, args: argparse.Namespace) -> SizeResult:
    folder = base / label
    folder.mkdir(parents=True)
    golden = base / f"{label}-crashed"
    with MariaDBSandbox(folder / "mariadb", extra_args=list(SERVER_ARGS)) as sandbox:
        built = build(folder, sandbox, size, args)
        print(
            f"{label}: relay log {built.relay_bytes / MB:,.0f} MB in {built.relay_files} files, "
            f"built and crashed in {built.build_s:.0f} s; checkpoint far back {built.oldest}, "
            f"near the tail {built.near}",
            flush=True,
        )
        golden.mkdir()
        for name in ("state", "warehouse"):
            subprocess.run(["cp", "-a", str(folder / name), str(golden / name)], check=True)
        result = SizeResult(label, built, [], [], [])
        for i in range(args.repeat):
            cases = [("far", built.oldest), ("near", built.near)]
            for case, checkpoint in cases if i % 2 == 0 else cases[::-1]:
                run = restart(built, golden, checkpoint)
                (result.far if case == "far" else result.near).append(run)
                print(
                    f"  {case:4} ({checkpoint}): recovered {run.recovered:6.2f} s, applier ready "
                    f"{run.ready:6.2f} s, first batch {run.first_batch:6.2f} s, exit "
                    f"{run.exit:6.2f} s; recovery scanned {run.scanned} files",
                    flush=True,
                )
            result.reference.append(reference_scan(golden / "state" / "relay"))
            print(f"  mariadb-binlog full scan: {result.reference[-1]:.2f} s", flush=True)
    shutil.rmtree(golden, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)
    return result


def best(runs: list[Restart]) -> Restart:
    return min(runs, key=lambda r: r.first_batch)


def report(results: list[SizeResult], args: argparse.Namespace) -> None:
    print(
        f"\nrelay files of {args.relay_file_mb} MiB; bulk transactions of "
        f"{args.rows_per_transaction:,} rows of {args.row_bytes:,} bytes; {args.tail} tail "
        f"transactions to apply; best of {args.repeat} (by first batch)\n"
    )
    print(
        "| relay log | checkpoint | read from the checkpoint | files recovery scanned | "
        "recovered | applier ready | ready to first batch | first applied batch | exit | "
        "mariadb-binlog full scan |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        size = f"{result.built.relay_bytes / MB:,.0f} MB ({result.built.relay_files} files)"
        ref = min(result.reference)
        for name, runs in (("far back (oldest file)", result.far), ("near the tail", result.near)):
            run = best(runs)
            read = result.built.bytes_from(run.checkpoint) / MB
            print(
                f"| {size} | {name} | {read:,.0f} MB | {run.scanned} | {run.recovered:.2f} s | "
                f"{run.ready:.2f} s | "
                f"{run.first_batch - run.ready:.2f} s | {run.first_batch:.2f} s | "
                f"{run.exit:.2f} s | {ref:.2f} s |"
            )
    print()
    for result in results:
        extra = best(result.far).first_batch - best(result.near).first_batch
        ref = min(result.reference)
        print(
            f"{result.label}: a far-back checkpoint adds {extra:.2f} s to the first batch = "
            f"{extra / ref:.2f}x a full mariadb-binlog scan ({ref:.2f} s)"
        )
    if len(results) > 1:
        small, large = results[0], results[-1]
        ratio = best(large.near).first_batch / best(small.near).first_batch
        far = best(large.far).first_batch / best(small.far).first_batch
        grown = large.built.relay_bytes / small.built.relay_bytes
        print(
            f"first batch near the tail, {large.label} / {small.label}: {ratio:.2f}x "
            f"(far back: {far:.2f}x; relay log {grown:.1f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100M,1G", help="relay-log sizes, e.g. 100M,1G")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--relay-file-mb", type=int, default=16, help="relay file size (MiB)")
    parser.add_argument("--rows-per-transaction", type=int, default=1000)
    parser.add_argument("--row-bytes", type=int, default=1000)
    parser.add_argument("--tail", type=int, default=10, help="transactions to apply")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="binlake-bench-recovery-"))
    try:
        results = [
            measure_size(base, label.strip(), parse_size(label), args)
            for label in args.sizes.split(",")
        ]
        report(results, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
