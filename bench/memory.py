"""Applier memory: the RSS of `binlake replicate` while it applies one big source transaction.

On a sandbox MariaDB, ``bench.t`` (the issue's table: BIGINT key, INT, DECIMAL(10,2),
VARCHAR(64), DATETIME(6)) gets one transaction of each size in ``--sizes`` (``INSERT ... SELECT``
from the SEQUENCE engine, then, with ``--updates``, an ``UPDATE`` of every row in the same
transaction: twice the row changes, one net change per key). Per size, a fresh ``binlake
replicate --until-caught-up`` (its own process) applies it while this script samples, every
``--interval`` s, the resident set size (``VmRSS``, /proc) of the binlake process and,
separately, of the JVM it starts (Spark's driver). Prints the peak of each, the binlake
process's RSS before the transaction was read (its baseline: Spark started, tables loaded), and
the growth per million row changes; a bounded applier grows by far less than the transaction's
size and the same at every size. Not a test.

    .venv/bin/python bench/memory.py [--sizes 100000,1000000] [--updates]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from _common import write_config
from binlake_dev.sandbox import MariaDBSandbox

MB = 1 << 20
DDL = (
    "CREATE TABLE bench.t (id BIGINT PRIMARY KEY, a INT NOT NULL, d DECIMAL(10,2) NOT NULL, "
    "s VARCHAR(64), ts DATETIME(6) NOT NULL)"
)


@dataclass
class Peak:
    binlake: int = 0
    jvm: int = 0
    #: The binlake process's RSS once the JVM runs (Spark started), before the peak.
    baseline: int = 0


def rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def jvm_of(pid: int) -> int | None:
    """The java process under ``pid`` (spark-submit's launcher starts it)."""
    todo = children(pid)
    while todo:
        child = todo.pop()
        try:
            name = Path(f"/proc/{child}/comm").read_text().strip()
        except OSError:
            continue
        if name == "java":
            return child
        todo += children(child)
    return None


def sample(process: subprocess.Popen[bytes], peak: Peak, interval: float) -> None:
    while process.poll() is None:
        mine = rss(process.pid)
        jvm = jvm_of(process.pid)
        if jvm is not None and not peak.baseline:
            peak.baseline = mine
        peak.binlake = max(peak.binlake, mine)
        if jvm is not None:
            peak.jvm = max(peak.jvm, rss(jvm))
        time.sleep(interval)


def transaction(sandbox: MariaDBSandbox, first: int, rows: int, updates: bool) -> int:
    last = first + rows - 1
    with sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
        changed = cursor.execute(
            "INSERT INTO bench.t SELECT seq, seq % 1000, (seq % 10000000) / 100, "
            f"CONCAT('row-', seq), NOW(6) FROM bench.seq_{first}_to_{last}"
        )
        if updates:
            changed += cursor.execute(
                f"UPDATE bench.t SET a = a + 1, s = 'updated' WHERE id BETWEEN {first} AND {last}"
            )
        conn.commit()
    return int(changed)


def replicate(config: Path, interval: float) -> tuple[Peak, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    command = [sys.executable, "-m", "binlake.cli.main", "replicate", "--config", str(config)]
    started = time.monotonic()
    process = subprocess.Popen(
        [*command, "--until-caught-up"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    peak = Peak()
    sampler = threading.Thread(target=sample, args=(process, peak, interval))
    sampler.start()
    _out, err = process.communicate()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"replicate failed ({process.returncode}):\n{err.decode()[-3000:]}")
    return peak, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="rows per transaction")
    parser.add_argument("--updates", action="store_true", help="update every row as well")
    parser.add_argument("--interval", type=float, default=0.1)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="binlake-bench-") as tmp:
        folder = Path(tmp)
        with MariaDBSandbox(folder / "mariadb") as sandbox:
            sandbox.execute("CREATE DATABASE bench")
            sandbox.execute(DDL)
            sandbox.execute("INSERT INTO bench.t VALUES (0, 0, 0, 'first', NOW(6))")
            config = write_config(folder, sandbox, applier="max_seconds = 1\n")
            replicate(config, args.interval)  # the state folder and the lake table exist
            first = 1
            for rows in sizes:
                changed = transaction(sandbox, first, rows, args.updates)
                first += rows
                peak, seconds = replicate(config, args.interval)
                growth = peak.binlake - peak.baseline
                print(
                    f"one transaction of {changed:,} row changes ({rows:,} rows): applied in "
                    f"{seconds:.1f} s; binlake RSS baseline {peak.baseline / MB:,.0f} MiB, peak "
                    f"{peak.binlake / MB:,.0f} MiB (+{growth / MB:,.0f} MiB, "
                    f"{growth / MB / changed * 1e6:,.0f} MiB per million changes); "
                    f"JVM peak {peak.jvm / MB:,.0f} MiB  [load {os.getloadavg()[0]:.2f}]",
                    flush=True,
                )


if __name__ == "__main__":
    main()
