"""binlake demo: a real MariaDB writes a binlog, binlake reads it back.

Starts a throwaway MariaDB in a temp dir, runs a small shop workload (inserts, updates and
deletes in transactions over several column types), rotates the binlog, then runs
``binlake binlog dump --rows`` on the first binlog file and ``binlake binlog verify`` on the
binlog folder. Then it kills the server with SIGKILL in the middle of a load, copies its binlog
folder, cuts the newest file mid-event as a lost page-cache tail would, and shows ``verify``
finding the torn tail, ``recover`` trimming it to the last complete transaction, and ``verify``
passing. Run it with ``make demo``; it leaves nothing running.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from binlake.sandbox import MariaDBSandbox

DUMP_LINES = 40
BINLAKE = Path(sys.executable).with_name("binlake")

SCHEMA = (
    "CREATE DATABASE shop",
    """CREATE TABLE shop.customer (
        id INT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
        name VARCHAR(100) NOT NULL,
        email VARCHAR(200) CHARACTER SET ascii,
        born DATE,
        vip BOOLEAN NOT NULL DEFAULT FALSE
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
        updated_at TIMESTAMP(3) NULL
    )""",
)

TRANSACTIONS = (
    (
        "INSERT INTO customer (name, email, born, vip) VALUES"
        " ('Ada Lovelace', 'ada@example.org', '1815-12-10', TRUE),"
        " ('Jürgen Größe', NULL, '1970-01-01', FALSE),"
        " ('李小龙', 'bruce@example.org', NULL, FALSE)",
        "INSERT INTO purchase (customer_id, amount, weight_kg, note, receipt, created_at) VALUES"
        " (1, 19.99, 0.25, 'first order', X'00FF10', '2024-02-29 12:34:56.123456'),"
        " (2, 1234.50, NULL, NULL, NULL, '2024-03-01 00:00:00'),"
        " (3, -5.00, 1.5e3, 'refund ☕', '', NOW(6))",
    ),
    (
        "UPDATE purchase SET status = 'paid', updated_at = '2024-03-02 10:00:00.5'"
        " WHERE customer_id IN (1, 2)",
        "UPDATE customer SET vip = TRUE, email = 'jg@example.org' WHERE id = 2",
    ),
    (
        "DELETE FROM purchase WHERE amount < 0",
        "DELETE FROM customer WHERE id = 3",
        "UPDATE purchase SET status = 'shipped' WHERE id = 1",
    ),
)


def run_workload(sandbox: MariaDBSandbox) -> None:
    for statement in SCHEMA:
        sandbox.execute(statement)
    with sandbox.connect("shop", autocommit=False) as connection:
        for transaction in TRANSACTIONS:
            with connection.cursor() as cursor:
                for statement in transaction:
                    cursor.execute(statement)
            connection.commit()


def run_binlake(*args: str, head: int | None = None) -> int:
    command = [str(BINLAKE), *args]
    print(f"\n$ {' '.join(command)}", flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    lines = done.stdout.splitlines()
    shown = lines if head is None else lines[:head]
    print("\n".join(shown))
    if len(shown) < len(lines):
        print(f"... ({len(lines) - len(shown)} more lines)")
    if done.stderr:
        print(done.stderr, end="", file=sys.stderr)
    print(f"[exit code {done.returncode}]")
    return done.returncode


def load_until_killed(sandbox: MariaDBSandbox) -> None:
    """Insert purchases in small transactions until the server dies under us."""
    try:
        with sandbox.connect("shop", autocommit=False) as connection, connection.cursor() as cur:
            while True:
                cur.execute(
                    "INSERT INTO purchase (customer_id, amount, created_at) VALUES"
                    " (1, 1.00, NOW(6)), (2, 2.00, NOW(6))"
                )
                connection.commit()
    except Exception:  # the connection dies with the server, as intended
        return


def crash_and_recover(sandbox: MariaDBSandbox, base_dir: Path) -> bool:
    """Kill -9 mid-load, lose the tail of a copy, and show verify/recover on it."""
    loader = threading.Thread(target=load_until_killed, args=(sandbox,))
    loader.start()
    time.sleep(1.0)
    sandbox.kill()
    loader.join()
    copy = base_dir / "crashed-binlogs"
    copy.mkdir()
    for path in [*sandbox.binlog_files(), sandbox.binlog_index_path]:
        shutil.copy2(path, copy / path.name)
    newest = sorted(copy.glob("mariadb-bin.[0-9]*"))[-1]
    with newest.open("r+b") as f:
        f.truncate(newest.stat().st_size - 10)
    print(
        f"\nkilled the server with SIGKILL mid-load; copied its binlogs to {copy} and cut "
        f"10 bytes off {newest.name}, as a lost page-cache tail would leave it"
    )
    return (
        run_binlake("binlog", "verify", str(copy)) == 1
        and run_binlake("binlog", "recover", str(copy)) == 0
        and run_binlake("binlog", "verify", str(copy)) == 0
    )


def main() -> int:
    base_dir = Path(tempfile.mkdtemp(prefix="binlake-demo-"))
    sandbox = MariaDBSandbox(base_dir)
    try:
        sandbox.start()
        print(f"MariaDB sandbox on 127.0.0.1:{sandbox.port}, binlogs in {sandbox.binlog_dir}")
        run_workload(sandbox)
        binlogs = sandbox.flush_logs()
        print("binlog files:", ", ".join(path.name for path in binlogs))
        dump_code = run_binlake("binlog", "dump", "--rows", str(binlogs[0]), head=DUMP_LINES)
        verify_code = run_binlake("binlog", "verify", str(sandbox.binlog_dir))
        recovered = crash_and_recover(sandbox, base_dir)
        return 0 if dump_code == verify_code == 0 and recovered else 1
    finally:
        if sandbox.is_running:
            sandbox.stop()
        shutil.rmtree(base_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
