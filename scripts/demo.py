"""binlake demo: a live MariaDB replicated into Iceberg exactly once, through a kill -9.

1. Starts a throwaway MariaDB and loads a small shop schema covering many column types
   (UUID, INET6, SET, ENUM, JSON, DECIMAL, DATETIME(6), TIMESTAMP(3), TIME, BIT, YEAR, BLOB, a
   table without a primary key) with 22,000 existing rows, then purges the binlog that wrote
   them: only the initial snapshot can bring those rows.
2. Starts a live workload (orders placed, paid, shipped, deleted; customers renamed; a DDL
   adding a column and another renaming one) and `binlake replicate` beside it, which first
   copies the existing rows (chunked, each chunk consistent with a binlog position), then
   streams.
3. Kills the replicator with SIGKILL mid-way, while it applies.
4. Restarts it with `--until-caught-up` once the workload is done: it recovers the relay log,
   reads each table's position from its own Iceberg snapshots and applies only what is missing.
5. Runs `binlake verify` (every table compared with the source at one source position), prints
   the tables and a one-line Spark SQL query to look at them.

Run it with ``make demo``. It leaves nothing running; the warehouse stays in a temp folder for
the query it prints.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from binlake.lake.catalog.metadata import find_tables, read_table
from binlake_dev.sandbox import MariaDBSandbox

BINLAKE = Path(sys.executable).with_name("binlake")

SCHEMA = (
    "CREATE DATABASE shop",
    """CREATE TABLE shop.customer (
        id INT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
        uid UUID NOT NULL,
        name VARCHAR(100) NOT NULL,
        email VARCHAR(200) CHARACTER SET ascii,
        born DATE,
        vip BOOLEAN NOT NULL DEFAULT FALSE,
        last_ip INET6,
        tags SET('new', 'gold', 'eu') NOT NULL DEFAULT 'new',
        profile JSON
    )""",
    """CREATE TABLE shop.purchase (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        customer_id INT UNSIGNED NOT NULL,
        amount DECIMAL(10, 2) NOT NULL,
        weight_kg DOUBLE,
        status ENUM('new', 'paid', 'shipped') NOT NULL DEFAULT 'new',
        note TEXT,
        receipt BLOB,
        created_at DATETIME(6) NOT NULL,
        updated_at TIMESTAMP(3) NULL,
        delivery_window TIME,
        flags BIT(8) NOT NULL DEFAULT b'0',
        model_year YEAR
    )""",
    """CREATE TABLE shop.event_log (
        at DATETIME(6) NOT NULL,
        kind VARCHAR(20) NOT NULL,
        detail TEXT
    )""",
)
#: Rows the shop had before binlake was installed; the binlog that wrote them is then purged,
#: so only the initial snapshot can bring them into the lake.
PRELOAD = (
    "INSERT INTO shop.customer (uid, name, email, born, tags) SELECT UUID(), "
    "CONCAT('customer ', seq), CONCAT('c', seq, '@example.org'), '1970-01-01' + INTERVAL seq DAY, "
    "IF(seq % 3 = 0, 'gold', 'new') FROM shop.seq_1_to_2000",
    "INSERT INTO shop.purchase (customer_id, amount, weight_kg, status, created_at, flags, "
    "model_year) SELECT 1 + seq % 2000, seq % 997 + 0.99, seq / 10, 'shipped', "
    "'2020-01-01' + INTERVAL seq MINUTE, seq % 256, 1990 + seq % 40 FROM shop.seq_1_to_20000",
)
NAMES = ("Ada Lovelace", "Jürgen Größe", "李小龙", "Zoë O'Brien", "Grace Hopper", "Émile")
#: After this many workload transactions, the DDL; the applier evolves the Iceberg schemas.
DDL_AT = {
    400: "ALTER TABLE shop.purchase ADD COLUMN coupon VARCHAR(20)",
    650: "ALTER TABLE shop.customer RENAME COLUMN born TO birthday",
}
#: Transactions of the live workload, and the pause after each: long enough (about a minute)
#: that the replicator is killed while streaming it, after the initial snapshot.
TRANSACTIONS = 900
PAUSE_S = 0.05


class Workload:
    """The shop's live traffic, in a thread; ``birthday`` replaces ``born`` after the DDL."""

    def __init__(self, sandbox: MariaDBSandbox, transactions: int) -> None:
        self.sandbox = sandbox
        self.transactions = transactions
        self.random = random.Random(42)
        self.done = 0
        self.born = "born"
        self.thread = threading.Thread(target=self.run, name="shop-workload")

    def run(self) -> None:
        with self.sandbox.connect("shop", autocommit=False) as conn, conn.cursor() as cursor:
            for n in range(self.transactions):
                if n in DDL_AT:
                    cursor.execute(DDL_AT[n])
                    self.born = "birthday" if "birthday" in DDL_AT[n] else self.born
                self.transaction(cursor, n)
                conn.commit()
                self.done += 1
                time.sleep(PAUSE_S)

    def transaction(self, cursor: object, n: int) -> None:
        execute = cursor.execute  # type: ignore[attr-defined]
        pick = self.random.random()
        if n % 10 == 0:
            execute(
                f"INSERT INTO customer (uid, name, email, {self.born}, last_ip, tags, profile)"
                " VALUES (UUID(), %s, %s, %s, %s, %s, %s)",
                (
                    self.random.choice(NAMES),
                    f"user{n}@example.org",
                    f"19{self.random.randint(40, 99)}-0{self.random.randint(1, 9)}-1{n % 9}",
                    f"2001:db8::{n:x}",
                    self.random.choice(["new", "gold,eu", "eu"]),
                    f'{{"visits": {n}, "lang": "de"}}',
                ),
            )
        execute(
            "INSERT INTO purchase (customer_id, amount, weight_kg, note, receipt, created_at,"
            " delivery_window, flags, model_year) VALUES"
            " (1 + %s, %s, %s, %s, %s, NOW(6), %s, %s, %s)",
            (
                n % 5,
                f"{self.random.randint(1, 99999) / 100:.2f}",
                self.random.random() * 20,
                "gift ☕" if n % 3 else None,
                bytes([n % 256, 0, 255]),
                f"{n % 24}:30:00",
                n % 256,
                1990 + n % 40,
            ),
        )
        execute("INSERT INTO event_log VALUES (NOW(6), 'purchase', %s)", (f"n={n}",))
        if pick < 0.4:
            execute(
                "UPDATE purchase SET status = 'paid', updated_at = NOW(3) WHERE status = 'new'"
                " ORDER BY id LIMIT 2"
            )
        elif pick < 0.6:
            execute("UPDATE purchase SET status = 'shipped' WHERE status = 'paid' LIMIT 1")
        elif pick < 0.7:
            execute("DELETE FROM purchase WHERE status = 'shipped' ORDER BY id LIMIT 1")
        elif pick < 0.75:
            execute("UPDATE customer SET vip = NOT vip, tags = 'gold' ORDER BY RAND() LIMIT 1")


def write_config(base: Path, sandbox: MariaDBSandbox) -> Path:
    path = base / "binlake.toml"
    path.write_text(
        "[source]\n"
        f'host = "127.0.0.1"\nport = {sandbox.port}\nuser = "root"\nserver_id = 4242\n'
        f'[state]\ndir = "{base / "state"}"\n'
        "[receiver]\nprogress_interval_s = 2\n"
        f'[target]\nwarehouse = "{base / "warehouse"}"\n'
        '[tables]\ninclude = ["shop.*"]\n'
        "[applier]\nmax_seconds = 1.0\n"
    )
    return path


def binlake(*args: str) -> list[str]:
    return [str(BINLAKE), *args]


def show(command: list[str]) -> int:
    """Run a binlake command, its output shown as it comes."""
    print(f"\n$ {' '.join(command)}", flush=True)
    done = subprocess.run(command, check=False)
    print(f"[exit code {done.returncode}]", flush=True)
    return done.returncode


def committed_batches(warehouse: Path) -> int:
    if not warehouse.is_dir():
        return 0
    tables = (read_table(warehouse, ident) for ident in find_tables(warehouse))
    return sum(len(t.binlake_snapshots) for t in tables if t is not None)


def kill_mid_way(config: Path, warehouse: Path) -> None:
    """Start `binlake replicate`, wait until it has committed a few batches, SIGKILL it."""
    command = binlake("replicate", "--config", str(config))
    print(f"\n$ {' '.join(command)} &", flush=True)
    process = subprocess.Popen(command)
    deadline = time.monotonic() + 120
    while committed_batches(warehouse) < 12 and time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"binlake replicate exited early (code {process.returncode})")
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    print(
        f"\n*** killed binlake replicate with SIGKILL after {committed_batches(warehouse)} "
        "table commits, in the middle of the live workload ***",
        flush=True,
    )


def print_tables(warehouse: Path) -> None:
    from binlake.lake.spark.session import SparkSettings, build_session, stop_session

    spark = build_session(SparkSettings(app_name="binlake-demo", warehouse=warehouse))
    try:
        for table in ("customer", "purchase", "event_log"):
            frame = spark.table(f"lake.shop.{table}")
            print(f"\nlake.shop.{table}: {frame.count()} rows", flush=True)
            frame.show(5, truncate=28)
    finally:
        stop_session(spark)


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="binlake-demo-"))
    sandbox = MariaDBSandbox(base / "mariadb")
    warehouse = base / "warehouse"
    try:
        sandbox.start()
        print(f"MariaDB sandbox on 127.0.0.1:{sandbox.port}")
        for statement in (*SCHEMA, *PRELOAD):
            sandbox.execute(statement)
        sandbox.purge_binlogs()
        print("loaded 2,000 customers and 20,000 purchases, then purged the binlog that wrote them")
        config = write_config(base, sandbox)
        print(f"config: {config}\n{config.read_text()}")
        workload = Workload(sandbox, transactions=TRANSACTIONS)
        workload.thread.start()
        kill_mid_way(config, warehouse)
        workload.thread.join()
        print(f"\nthe workload committed {workload.done} transactions (and 2 DDL statements)")
        replicated = show(binlake("replicate", "--config", str(config), "--until-caught-up"))
        verified = show(binlake("verify", "--config", str(config)))
        print_tables(warehouse)
    finally:
        if sandbox.is_running:
            sandbox.stop()
        shutil.rmtree(base / "mariadb", ignore_errors=True)
    print(
        "\nlook at the tables with one line of Spark SQL:\n"
        f'  {sys.executable} -c "from pathlib import Path; from binlake.lake.spark.session import '
        f"SparkSettings, build_session; build_session(SparkSettings(warehouse=Path('{warehouse}')))"
        ".sql('SELECT status, count(*), sum(amount) FROM lake.shop.purchase GROUP BY status')"
        '.show()"\n'
        f"(the warehouse stays in {warehouse}; remove {base} when done)"
    )
    return 0 if replicated == verified == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
