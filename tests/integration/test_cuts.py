"""Consistent cuts end to end (issue 16): a workload whose every transaction moves money between
two tables, so that sum(accounts_a) + sum(accounts_b) is the same in every source transaction,
replicated by `binlake replicate` in a subprocess with small batches (a cut after each), read
through the latest cut while batches commit, across a kill -9 and restart of replicate: every
read sees the invariant (each distinct cut's snapshots are scanned once, the plain current
tables in the same query: whether those broke the invariant is printed, not asserted).

Every distinct cut read (at least ``MIN_CUTS``, one at least recorded after the restart) also
equals the source at the source transaction the cut names, row for row: the workload is its
database's only writer and the only one of the module's own server; it reads both tables inside
each transaction, after its updates (the state its commit makes), and records that state with
the transaction's GTID (``@@last_gtid``) and the binlog end after it. A cut's state is the one
recorded for the newest transaction whose GTID is at or before the cut's; the cut's GTID and
position must be exactly that transaction's (a cut ends at a transaction the workload wrote).
Then, the workload stopped, the latest cut equals the source (read directly, and by
`verify --cut`).
"""

from __future__ import annotations

import json
import random
import threading
import time
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.config import load_config
from binlake.cuts import Cut
from binlake.errors import CutError
from binlake.gtid import MariaGtid, MariaGtidState
from binlake.lake.cuts.read import consistent, cut_at
from binlake.position import SourcePosition, parse_position
from binlake.verify.verifier import VerifyOptions, verify_config
from binlake_dev.sandbox import MariaDBSandbox
from replicate_testing import config_for, module_source, run_binlake, start_replicate

source = module_source("cuts-source")

ACCOUNTS = 20
OPENING = 1000
TOTAL = 2 * ACCOUNTS * OPENING
#: Latest-cut reads the test makes while batches commit, and the read after which it kills.
READS = 80
KILL_AT = 45
#: A read of a cut already scanned also reads the plain current tables every this many reads.
PLAIN_EVERY = 20
#: Reads start at most this often. A read of a cut already scanned costs ~0.2 s, a scan of the
#: plain tables ~1.4 s (a Spark job): read back to back, with the plain tables every 5th read,
#: the test's own Spark took so much of 2 loaded cores that replicate committed a batch (so a
#: cut) every 5-7 s while it read, against ~2.7 s once it stopped, and 200 reads saw 6-7 cuts;
#: paced, a cut every 4-5 s, ~15 cuts in about the same time.
READ_EVERY_S = 0.3
#: Distinct cuts the test reads (and compares with the source) at least.
MIN_CUTS = 5
TABLES = ("accounts_a", "accounts_b")
#: The rows through the cut's views (0: accounts_a, 1: accounts_b), and in the plain current
#: tables (2), in one query (one job, one stage).
ROWS_SQL = (
    "SELECT 0, id, balance FROM accounts_a UNION ALL SELECT 1, id, balance FROM accounts_b "
    "UNION ALL SELECT 2, id, balance FROM {a} UNION ALL SELECT 2, id, balance FROM {b}"
)
#: Both tables' (id, balance) rows, sorted: (accounts_a, accounts_b).
Rows = tuple[tuple[tuple[int, int], ...], ...]


@dataclass(frozen=True)
class Committed:
    """The source right after one of its transactions: the transaction's GTID, the binlog's end
    after it, and the rows of both tables it left."""

    gtid: MariaGtid
    position: SourcePosition
    rows: Rows


def _table_rows(cursor: Any) -> Rows:
    """Both tables' rows as the cursor's transaction sees them."""
    rows = []
    for table in TABLES:
        cursor.execute(f"SELECT id, balance FROM {table} ORDER BY id")
        rows.append(tuple((int(i), int(b)) for i, b in cursor.fetchall()))
    return tuple(rows)


def _binlog_end(cursor: Any) -> SourcePosition:
    cursor.execute("SHOW MASTER STATUS")
    file, offset = cursor.fetchone()[:2]
    return SourcePosition(str(file), int(offset))


class Transfers:
    """Transactions that each debit an account of one table and credit one of the other."""

    def __init__(self, source: MariaDBSandbox, database: str) -> None:
        self.source, self.database = source, database
        self.stop = threading.Event()
        self.count = 0
        self.errors: list[BaseException] = []
        #: The source before the first transfer, then after each, in commit order.
        self.committed: list[Committed] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def create(self) -> Transfers:
        db = self.database
        self.source.execute(f"CREATE DATABASE {db}")
        for table in ("accounts_a", "accounts_b"):
            self.source.execute(f"CREATE TABLE {db}.{table} (id INT PRIMARY KEY, balance BIGINT)")
            values = ", ".join(f"({i}, {OPENING})" for i in range(ACCOUNTS))
            self.source.execute(f"INSERT INTO {db}.{table} VALUES {values}")
        with self.source.connect(db) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT @@gtid_binlog_pos")
            (last,) = MariaGtidState.parse(str(cursor.fetchone()[0])).gtids()
            self.committed.append(Committed(last, _binlog_end(cursor), _table_rows(cursor)))
        return self

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self.stop.set()
        self._thread.join()

    def _run(self) -> None:
        rng = random.Random(16)
        try:
            with self.source.connect(self.database, autocommit=False) as conn:
                cursor = conn.cursor()
                while not self.stop.is_set():
                    debit, credit = rng.sample(["accounts_a", "accounts_b"], 2)
                    amount = rng.randint(1, 50)
                    cursor.execute(
                        f"UPDATE {debit} SET balance = balance - {amount} "
                        f"WHERE id = {rng.randrange(ACCOUNTS)}"
                    )
                    cursor.execute(
                        f"UPDATE {credit} SET balance = balance + {amount} "
                        f"WHERE id = {rng.randrange(ACCOUNTS)}"
                    )
                    rows = _table_rows(cursor)  # what this transaction's commit makes
                    conn.commit()
                    cursor.execute("SELECT @@last_gtid")  # this session's commit, exactly
                    gtid = MariaGtid.parse(str(cursor.fetchone()[0]))
                    # The end of this transaction: the server has no other writer (the module's
                    # own; binlake only reads it, and nothing else in the test writes to it).
                    self.committed.append(Committed(gtid, _binlog_end(cursor), rows))
                    self.count += 1
                    time.sleep(0.15)
        except BaseException as error:  # reported by the test
            self.errors.append(error)


def _plain_total(spark: object, a: str, b: str) -> int:
    query = f"SELECT balance FROM {a} UNION ALL SELECT balance FROM {b}"
    return sum(r[0] for r in spark.sql(query).collect())  # type: ignore[attr-defined]


def _cut_rows(spark: object, a: str, b: str) -> tuple[Rows, int]:
    """(both tables' rows through the cut's views, the total of the plain tables)."""
    rows = spark.sql(ROWS_SQL.format(a=a, b=b)).collect()  # type: ignore[attr-defined]
    at_cut = tuple(tuple(sorted((r[1], r[2]) for r in rows if r[0] == t)) for t in (0, 1))
    return at_cut, sum(r[2] for r in rows if r[0] == 2)


def _total(rows: Rows) -> int:
    return sum(balance for table in rows for _, balance in table)


def _source_at(committed: list[Committed], cut: Cut) -> Committed:
    """The source at ``cut``: after the newest recorded transaction at or before its GTID; the
    cut ends exactly there (GTID and binlog position)."""
    (gtid,) = MariaGtidState.parse(cut.gtid).gtids()
    assert committed[0].gtid.seq <= gtid.seq, f"cut {cut.cut_id} before the first transfer"
    at = committed[bisect_right([c.gtid.seq for c in committed], gtid.seq) - 1]
    assert (at.gtid, at.position) == (gtid, cut.position), (cut, at.gtid, at.position)
    return at


def test_reads_through_the_latest_cut_keep_a_cross_table_invariant_across_a_kill(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "cuts_bank"
    transfers = Transfers(source, database).create()
    config_path = config_for(
        tmp_path,
        source,
        spark,
        database,
        receiver="sync_interval_ms = 10\n",
        # Partitioned, with equality deletes: committed by MERGE (copy-on-write), so that each
        # snapshot is one small file per table and a read costs little (a row delta's delete
        # files pile up).
        tables="".join(
            f'[tables.layout."{database}.{t}"]\npartition = ["bucket(1, id)"]\n' for t in TABLES
        ),
        applier='max_transactions = 40\nmax_seconds = 1.0\ndeletes = "equality"\n',
    )
    config_path.write_text(config_path.read_text() + "[cuts]\nevery_s = 0\n")
    config = load_config(config_path)
    plain = tuple(f"lake.{database}.{t}" for t in ("accounts_a", "accounts_b"))
    replicate = start_replicate(config_path, tmp_path / "replicate-1.log")
    transfers.start()
    # A cut's snapshots never change: each distinct pair is scanned once (the plain tables with
    # it, in the same query); every read looks the latest cut up and registers its views.
    scanned: dict[tuple[int, ...], Rows] = {}
    cuts: dict[int, Cut] = {}
    reads, plain_reads, plain_broken, killed_at = 0, 0, 0, 0
    started = last = time.monotonic()
    try:
        while reads < READS or not killed_at or max(cuts) <= killed_at or len(cuts) < MIN_CUTS:
            assert time.monotonic() - started < 600, f"{reads} reads in 600 s"
            time.sleep(max(0.0, last + READ_EVERY_S - time.monotonic()))
            last = time.monotonic()
            assert replicate.poll() is None, "replicate exited"
            try:
                read = consistent(spark, config, tables=[f"{database}.{t}" for t in TABLES])
            except CutError:
                assert reads == 0, "a cut read failed once cuts with both tables existed"
                time.sleep(0.2)  # no cut holding both tables yet
                continue
            pair = tuple(read.cut.tables[f"{database}.{t}"].snapshot for t in TABLES)
            if pair not in scanned:
                scanned[pair], now = _cut_rows(spark, *plain)
                plain_reads, plain_broken = plain_reads + 1, plain_broken + (now != TOTAL)
            elif reads % PLAIN_EVERY == 0:
                now = _plain_total(spark, *plain)
                plain_reads, plain_broken = plain_reads + 1, plain_broken + (now != TOTAL)
            assert _total(scanned[pair]) == TOTAL, read.cut
            cuts[read.cut.cut_id] = read.cut
            reads += 1
            if reads == KILL_AT:
                replicate.kill()  # SIGKILL: no clean stop
                replicate.wait()
                killed_at = read.cut.cut_id
                replicate = start_replicate(config_path, tmp_path / "replicate-2.log")
    except BaseException:
        replicate.kill()
        replicate.wait()
        raise
    finally:
        transfers.join()
    assert not transfers.errors, transfers.errors
    # Every distinct cut read (MIN_CUTS at least, one at least after the restart: the loop's
    # condition), row for row, against the source at the transaction it names.
    for cut in cuts.values():
        pair = tuple(cut.tables[f"{database}.{t}"].snapshot for t in TABLES)
        assert scanned[pair] == _source_at(transfers.committed, cut).rows, cut
    print(
        f"{reads} reads through {len(cuts)} cuts (ids {min(cuts)}-{max(cuts)}; "
        f"{len(scanned)} distinct snapshot pairs scanned) in "
        f"{time.monotonic() - started:.0f} s, killed after cut {killed_at}: "
        f"invariant kept; each cut equal to the source at its GTID "
        f"({sum(c > killed_at for c in cuts)} recorded after the restart); the plain tables "
        f"broke it in {plain_broken} of {plain_reads} reads; {transfers.count} transfers"
    )
    end = parse_position(
        "{}:{}".format(*source.execute("SHOW MASTER STATUS")[0][:2])  # type: ignore[str-format]
    )
    deadline = time.monotonic() + 180
    try:
        while (latest := cut_at(spark, config)).position.key() < end.key():
            assert time.monotonic() < deadline, f"latest cut at {latest.position}, source {end}"
            time.sleep(0.3)
    finally:
        replicate.terminate()
        replicate.wait()
    consistent(spark, config, at=str(latest.position), tables=[f"{database}.{t}" for t in TABLES])
    final, _ = _cut_rows(spark, *plain)
    with source.connect(database) as conn, conn.cursor() as cursor:
        assert final == _table_rows(cursor) == _source_at(transfers.committed, latest).rows
    report = verify_config(config, VerifyOptions(cut="latest", timeout_s=30), spark_session=spark)  # type: ignore[arg-type]
    assert report.ok, [r.status for r in report.results]
    printed = run_binlake("cut", config_path, "--json", timeout=120)
    assert printed.returncode == 0, printed.stderr
    shown = json.loads(printed.stdout)
    assert shown["cut_id"] == latest.cut_id and shown["position"] == str(latest.position)
    assert shown["sql"][f"{database}.accounts_a"].endswith(
        f"VERSION AS OF {latest.tables[f'{database}.accounts_a'].snapshot}"
    )
