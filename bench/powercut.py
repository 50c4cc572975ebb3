"""What the power-cut file system (binlake_dev.powercut) costs: the same file workloads on a
plain folder and through the mount, side by side (docs/benchmarks.md, "The power-cut file
system").

    .venv/bin/python bench/powercut.py [--mib 256] [--appends 5000] [--files 1000] [--commits 1000]

The workloads are the pipeline's patterns: a large file written in 1 MiB writes then fsynced
(a warehouse data file), 4 KiB appends each fsynced (the relay log's grouped fsyncs at their
worst), small files written, fsynced, renamed over their target and the folder fsynced (the
state files), SQLite commits in WAL mode with synchronous=FULL (the embedded catalog), and
stat/read calls. fsync on the mount only marks data durable (the backing folder is never
fsynced), so fsync-bound workloads can run faster there than on the plain disk.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from binlake_dev.powercut import PowerCutMount, unavailable_reason

MiB = 1 << 20


def written(path: Path, size: int, count: int, *, sync_each: bool, flags: int) -> None:
    """``count`` writes of ``size`` bytes to ``path``, fsynced after each or once at the end."""
    block = os.urandom(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    for _ in range(count):
        os.write(fd, block)
        if sync_each:
            os.fsync(fd)
    os.fsync(fd)
    os.close(fd)


def big_file(folder: Path, mib: int) -> float:
    written(folder / "big", MiB, mib, sync_each=False, flags=os.O_TRUNC)
    return float(mib)


def read_big_file(folder: Path, mib: int) -> float:
    fd = os.open(folder / "big", os.O_RDONLY)
    while os.read(fd, MiB):
        pass
    os.close(fd)
    return float(mib)


def appends(folder: Path, count: int) -> float:
    written(folder / "relay", 4096, count, sync_each=True, flags=os.O_APPEND)
    return float(count)


def replaced_files(folder: Path, count: int) -> float:
    payload = os.urandom(1024)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(count):
        temp = folder / f"state.{i % 7}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, payload)
        os.fsync(fd)
        os.close(fd)
        os.replace(temp, folder / f"state.{i % 7}")
        os.fsync(dir_fd)
    os.close(dir_fd)
    return float(count)


def sqlite_commits(folder: Path, count: int) -> float:
    db = sqlite3.connect(folder / "catalog.db", isolation_level=None)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=full")
    db.execute("create table if not exists t (id integer primary key, v text)")
    for i in range(count):
        db.execute("insert into t (v) values (?)", (f"snapshot {i}" * 10,))
    db.close()
    return float(count)


def stats(folder: Path, count: int) -> float:
    names = [folder / f"state.{i % 7}" for i in range(count)]
    for name in names:
        os.stat(name)
    return float(count)


def timed(work: Callable[[Path, int], float], folder: Path, n: int) -> tuple[float, float]:
    """(units per second, seconds)."""
    start = time.perf_counter()
    units = work(folder, n)
    took = time.perf_counter() - start
    return units / took, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--appends", type=int, default=5000)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=1000)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        raise SystemExit(f"bench/powercut.py: {reason}")
    workloads: list[tuple[str, str, Callable[[Path, int], float], int]] = [
        ("write 1 MiB blocks + fsync", "MiB/s", big_file, args.mib),
        ("read 1 MiB blocks", "MiB/s", read_big_file, args.mib),
        ("4 KiB append + fsync", "appends/s", appends, args.appends),
        ("small file: write, fsync, replace, dir fsync", "files/s", replaced_files, args.files),
        ("SQLite WAL commit, synchronous=FULL", "commits/s", sqlite_commits, args.commits),
        ("stat", "stats/s", stats, 20 * args.files),
    ]
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as scratch:
        plain, backing = Path(scratch, "plain"), Path(scratch, "backing")
        plain.mkdir()
        backing.mkdir()
        with PowerCutMount(backing, Path(scratch, "mnt")) as fs:
            print(f"{'workload':<46} {'unit':<10} {'plain':>10} {'mount':>10} {'mount/plain':>12}")
            for name, unit, work, n in workloads:
                on_plain, _ = timed(work, plain, n)
                on_mount, _ = timed(work, fs.mount, n)
                ratio = on_mount / on_plain
                print(
                    f"{name:<46} {unit:<10} {on_plain:>10,.0f} {on_mount:>10,.0f} {ratio:>11.2f}x"
                )
            print(f"unsynced state at the end: {fs.stats()}")
            start = time.perf_counter()
            for _ in range(5):
                fs.power_cut()
            print(f"cut and remount: {(time.perf_counter() - start) / 5:.2f} s")


if __name__ == "__main__":
    main()
