"""Wide and busy: many tables, many one-row transactions, `binlake replicate` as a user runs it.

Each figure is one `binlake replicate --until-caught-up` (or a live `binlake replicate`) run as
a command, Spark's start included, on a sandbox MariaDB whose commits do not flush (the
workload is written fast; binlake's side is what is timed). For each table count of
``--tables`` (the first is the reference, 1 by default), in a database of its own:

1. ``copy``: ``N`` tables of ``--rows`` rows each (``id`` key, an int, a short text), the
   initial copy of a new state folder: seconds, and seconds per table;
2. ``start``: the same command again with nothing to do: seconds (against the reference's);
3. ``oltp``: ``--transactions`` one-row transactions uniform over the ``N`` tables (half
   updates, a quarter inserts, a quarter deletes, each writing one row), written before the run,
   then the catch-up: seconds, transactions/s, and the ratio to the reference;
4. ``live`` (``--live-seconds`` > 0, for the counts of ``--live-tables``): ``binlake replicate``
   running while ``--live-rate`` one-row transactions/s go to the ``N`` tables: per
   transaction, the seconds from its commit on the source to the first commit of its table at
   or past it (p50, p95, max); the lake's commits per second; and how long binlake takes to
   catch up once the workload stops (a backlog that grew shows there).

5. ``commits`` (``--commit-threads 1,2,4,8``, the widest table count): where the catalog
   saturates: ``--commit-rounds`` rounds of one one-row update per table, caught up in batches
   of one round (a commit per table per batch), once per ``[applier] commit_threads`` value:
   commits per second past the start.

``--verify`` runs `binlake verify` after each table count (its time is printed, not counted).

    .venv/bin/python bench/wide.py [--tables 1,200,500] [--transactions 100000] [--live-seconds 600]

Not a test: figures go to docs/benchmarks.md ("Wide and busy").
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
from pymysql.constants import CLIENT

from _common import write_config
from _scale import load_average, p95
from binlake.lake.catalog.metadata import read_table
from binlake_dev.sandbox import MariaDBSandbox

BINLAKE = str(Path(sys.executable).with_name("binlake"))
#: Source commits that do not wait for the disk: the workload is not what is measured.
FAST_SOURCE = ("--innodb-flush-log-at-trx-commit=0", "--sync-binlog=0")
#: One-row statements sent in one round trip (each its own autocommit transaction).
PER_TRIP = 50


def say(line: str) -> None:
    print(f"{line}  [load {load_average():.2f}]", flush=True)


@dataclass
class Tables:
    """The ``N`` tables of one run and the keys each holds, as the workload writes them."""

    database: str
    count: int
    rows: int
    keys: list[list[int]] = field(default_factory=list)
    next_key: list[int] = field(default_factory=list)

    def names(self) -> list[str]:
        return [f"t{i:04d}" for i in range(self.count)]

    def create(self, sandbox: MariaDBSandbox) -> None:
        with sandbox.connect(autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {self.database}")
            for name in self.names():
                cur.execute(
                    f"CREATE TABLE {self.database}.{name} (id INT PRIMARY KEY, v INT NOT NULL, "
                    "note VARCHAR(32) NOT NULL)"
                )
                cur.execute(
                    f"INSERT INTO {self.database}.{name} SELECT seq, seq % 97, "
                    f"CONCAT('row ', seq) FROM {self.database}.seq_1_to_{self.rows}"
                )
        self.keys = [list(range(1, self.rows + 1)) for _ in range(self.count)]
        self.next_key = [self.rows + 1] * self.count

    def statement(self, rng: random.Random) -> tuple[int, str]:
        """One one-row statement on a table chosen uniformly: half updates, a quarter inserts,
        a quarter deletes (of keys the table holds)."""
        i = rng.randrange(self.count)
        table = f"{self.database}.t{i:04d}"
        keys = self.keys[i]
        roll = rng.random()
        if roll < 0.25 or not keys:
            key = self.next_key[i]
            self.next_key[i] += 1
            keys.append(key)
            return i, f"INSERT INTO {table} VALUES ({key}, {key % 97}, 'new {key}')"
        at = rng.randrange(len(keys))
        if roll < 0.5:
            key = keys[at]
            keys[at] = keys[-1]
            keys.pop()
            return i, f"DELETE FROM {table} WHERE id = {key}"
        return i, f"UPDATE {table} SET v = v + 1 WHERE id = {keys[at]}"


#: ``--profile DIR``: each timed command runs under py-spy (raw samples in DIR).
PROFILE: list[Path] = []


def run(command: list[str], log: Path) -> float:
    if PROFILE:
        count = len(list(PROFILE[0].glob("*.txt")))
        samples = PROFILE[0] / f"{count:02d}-{log.parent.name}-{command[1]}.txt"
        spy = str(Path(sys.executable).with_name("py-spy"))
        recorder = [spy, "record", "--idle", "--format", "raw", "-r", "50", "-o", str(samples)]
        command = [*recorder, "--", *command]
    started = time.monotonic()
    with log.open("a") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}); see {log}")
    return seconds


def last_run(log: Path) -> str:
    """What the last `binlake replicate` of ``log`` said it did (transactions, batches)."""
    lines = [line for line in log.read_text().splitlines() if line.startswith("replicate: ")]
    return lines[-1].removeprefix("replicate: ") if lines else "no summary line"


def replicate(config: Path, log: Path) -> float:
    return run([BINLAKE, "replicate", "--config", str(config), "--until-caught-up"], log)


def write_workload(
    sandbox: MariaDBSandbox, tables: Tables, transactions: int, rng: random.Random
) -> float:
    """``transactions`` one-row transactions, ``PER_TRIP`` a round trip; returns seconds."""
    started = time.monotonic()
    with multi_statements(sandbox) as conn, conn.cursor() as cur:
        left = transactions
        while left:
            trip = [tables.statement(rng)[1] for _ in range(min(PER_TRIP, left))]
            _send(cur, trip)
            left -= len(trip)
    return time.monotonic() - started


def multi_statements(sandbox: MariaDBSandbox) -> pymysql.Connection[Any]:
    """An autocommit connection that sends several statements in one round trip."""
    return sandbox.connect(client_flag=CLIENT.MULTI_STATEMENTS)


def _send(cur: object, statements: list[str]) -> None:
    cur.execute(";".join(statements))  # type: ignore[attr-defined]
    while cur.nextset():  # type: ignore[attr-defined]
        pass


@dataclass
class Reference:
    copy_s: float = 0.0
    start_s: float = 0.0
    oltp_s: float = 0.0


def section_copy_start_oltp(
    args: argparse.Namespace, sandbox: MariaDBSandbox, folder: Path, count: int, ref: Reference
) -> None:
    tables = Tables(f"wide_{count}", count, args.rows)
    tables.create(sandbox)
    config = write_config(folder, sandbox, database=tables.database, extra=args.config_extra)
    log = folder / "replicate.log"
    copy_s = replicate(config, log)
    ratio = f", {copy_s / ref.copy_s:.2f}x the reference" if ref.copy_s else ""
    say(
        f"copy  {count} tables x {args.rows:,} rows: {copy_s:.1f} s "
        f"({copy_s / count:.3f} s a table{ratio})"
    )
    start_s = min(replicate(config, log) for _ in range(args.start_repeat))
    ratio = f", {start_s / ref.start_s:.2f}x the reference" if ref.start_s else ""
    say(
        f"start {count} tables, nothing to do: {start_s:.1f} s (best of {args.start_repeat}{ratio})"
    )
    if not ref.copy_s:
        ref.copy_s, ref.start_s = copy_s, start_s
    if args.transactions:
        rng = random.Random(args.seed)
        written = write_workload(sandbox, tables, args.transactions, rng)
        oltp_s = replicate(config, log)
        ratio = f", {oltp_s / ref.oltp_s:.2f}x the reference" if ref.oltp_s else ""
        say(
            f"oltp  {args.transactions:,} one-row transactions over {count} tables "
            f"(written in {written:.1f} s): caught up in {oltp_s:.1f} s "
            f"({args.transactions / oltp_s:,.0f} transactions/s{ratio}; {last_run(log)})"
        )
        if not ref.oltp_s:
            ref.oltp_s = oltp_s
    if args.live_seconds and count in args.live_tables:
        section_live(args, sandbox, folder, config, tables)
    if args.commit_threads and count == args.widest:
        section_commits(args, sandbox, folder, tables, start_s)
    if args.verify:
        seconds = run([BINLAKE, "verify", "--config", str(config)], log)
        say(f"verify {count} tables: OK in {seconds:.1f} s")


def section_commits(
    args: argparse.Namespace, sandbox: MariaDBSandbox, folder: Path, tables: Tables, start_s: float
) -> None:
    """Where the catalog saturates: ``--commit-rounds`` rounds of one one-row update per table,
    caught up with batches of one round each (``max_transactions`` = the table count: a commit
    per table per batch), once per ``commit_threads`` of ``--commit-threads``; commits per
    second over the run less the start with nothing to do (``start_s``)."""
    log = folder / "commits.log"
    for threads in args.commit_threads:
        applier = f"max_transactions = {tables.count}\ncommit_threads = {threads}\n"
        config = write_config(
            folder, sandbox, database=tables.database, applier=applier, extra=args.config_extra
        )
        with multi_statements(sandbox) as conn, conn.cursor() as cur:
            for _ in range(args.commit_rounds):
                for i, name in enumerate(tables.names()):
                    key = tables.keys[i][0]
                    _send(cur, [f"UPDATE {tables.database}.{name} SET v = v + 1 WHERE id = {key}"])
        seconds = replicate(config, log)
        commits = args.commit_rounds * tables.count
        say(
            f"commits {commits:,} over {tables.count} tables, commit_threads {threads}: "
            f"{seconds:.1f} s ({commits / max(seconds - start_s, 0.1):.1f} commits/s past the "
            f"start's {start_s:.1f} s; {last_run(log)})"
        )


@dataclass
class Sent:
    """When each round trip of the live workload was committed, where the binlog ended after
    it, and which tables it wrote."""

    at: list[float] = field(default_factory=list)
    position: list[tuple[int, int]] = field(default_factory=list)
    tables: list[set[int]] = field(default_factory=list)


def live_workload(
    sandbox: MariaDBSandbox, tables: Tables, rate: float, seconds: float, sent: Sent
) -> None:
    """``rate`` one-row transactions a second for ``seconds``, ``PER_TRIP`` a round trip."""
    rng = random.Random(7)
    trips = rate / PER_TRIP
    with multi_statements(sandbox) as conn, conn.cursor() as cur:
        started = time.monotonic()
        n = 0
        while (now := time.monotonic()) - started < seconds:
            due = started + n / trips
            if now < due:
                time.sleep(due - now)
            picked = [tables.statement(rng) for _ in range(PER_TRIP)]
            _send(cur, [s for _, s in picked])
            cur.execute("SHOW MASTER STATUS")
            file, offset = cur.fetchone()[:2]
            sent.at.append(time.time())
            sent.position.append((int(str(file).rsplit(".", 1)[1]), int(offset)))
            sent.tables.append({i for i, _ in picked})
            n += 1


def lake_commits_by_table(
    warehouse: Path, tables: Tables
) -> dict[int, list[tuple[tuple[int, int], float]]]:
    out = {}
    for i, name in enumerate(tables.names()):
        table = read_table(warehouse, (tables.database, name))
        commits = []
        if table is not None:
            for snapshot in table.binlake_snapshots:
                if snapshot.position is not None:
                    number = int(snapshot.position.file.rsplit(".", 1)[1])
                    commits.append(
                        ((number, snapshot.position.offset), snapshot.timestamp_ms / 1000)
                    )
        commits.sort()
        out[i] = commits
    return out


def live_lags(sent: Sent, commits: dict[int, list[tuple[tuple[int, int], float]]]) -> list[float]:
    """Per (round trip, table it wrote): seconds to the first commit of that table holding it."""
    earliest: dict[int, list[float]] = {}
    for i, found in commits.items():  # the earliest time any commit at or past each position
        times = [when for _, when in found]
        earliest[i] = [min(times[j:]) for j in range(len(times))] if times else []
    out = []
    for at, position, touched in zip(sent.at, sent.position, sent.tables, strict=True):
        for i in touched:
            positions = [p for p, _ in commits[i]]
            j = bisect_left(positions, position)
            if j < len(positions):
                out.append(max(0.0, earliest[i][j] - at))
    return out


def section_live(
    args: argparse.Namespace, sandbox: MariaDBSandbox, folder: Path, config: Path, tables: Tables
) -> None:
    log = folder / "live.log"
    process = subprocess.Popen(
        [BINLAKE, "replicate", "--config", str(config)],
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(args.live_warmup_s)  # Spark's start and the first batches
        sent = Sent()
        started = time.time()
        live_workload(sandbox, tables, args.live_rate, args.live_seconds, sent)
        ended = time.time()
        end = sent.position[-1]
        catch_up = wait_caught_up(folder / "warehouse", tables, end, timeout_s=600)
    finally:
        process.terminate()
        process.wait(timeout=120)
    commits = lake_commits_by_table(folder / "warehouse", tables)
    lags = live_lags(sent, commits)
    in_window = sum(
        1 for found in commits.values() for _, when in found if started <= when <= ended
    )
    transactions = len(sent.at) * PER_TRIP
    say(
        f"live  {transactions / (ended - started):,.0f} transactions/s over {tables.count} tables "
        f"for {ended - started:.0f} s: lag p50 {statistics.median(lags):.2f} s, p95 "
        f"{p95(lags):.2f} s, max {max(lags):.2f} s; {in_window / (ended - started):.1f} commits/s; "
        f"caught up {catch_up:.1f} s after the workload stopped"
    )


def wait_caught_up(
    warehouse: Path, tables: Tables, end: tuple[int, int], timeout_s: float
) -> float:
    """Seconds until every table that the workload wrote holds ``end`` (or is not behind it)."""
    started = time.time()
    while time.time() - started < timeout_s:
        commits = lake_commits_by_table(warehouse, tables)
        if all(found and found[-1][0] >= end for found in commits.values() if found):
            return time.time() - started
        time.sleep(1.0)
    return float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tables", default="1,200", help="table counts, the reference first")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--start-repeat", type=int, default=2)
    parser.add_argument("--live-seconds", type=float, default=0.0)
    parser.add_argument(
        "--live-tables",
        type=lambda s: {int(n) for n in s.split(",")},
        default={500},
        help="the table counts the live section runs for",
    )
    parser.add_argument("--live-rate", type=float, default=2000.0)
    parser.add_argument("--live-warmup-s", type=float, default=30.0)
    parser.add_argument(
        "--commit-threads",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[],
        help="commit_threads values for the commits section (the widest table count), e.g. 1,2,4,8",
    )
    parser.add_argument("--commit-rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verify", action="store_true")
    parser.add_argument(
        "--config-extra", default="", help="more [applier] lines, then sections (TOML)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--profile", type=Path, help="run each command under py-spy, into DIR")
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        PROFILE.append(args.profile)
    counts = [int(n) for n in args.tables.split(",")]
    args.widest = max(counts)
    work = Path(tempfile.mkdtemp(prefix="binlake-wide-"))
    say(f"work folder {work}; cores {os.cpu_count()}")
    reference = Reference()
    for count in counts:  # a source of its own each: no run reads another's binlog
        folder = work / f"n{count}"
        folder.mkdir()
        with MariaDBSandbox(folder / "mariadb", extra_args=FAST_SOURCE) as sandbox:
            section_copy_start_oltp(args, sandbox, folder, count, reference)
    if not args.keep:
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
