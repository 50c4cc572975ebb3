"""Fsyncs per source transaction: WL#5125's fsync analysis, measured instead of reasoned.

For each configuration binlake ships, runs ``binlake replicate`` as a subprocess under
``strace -f`` against a sandbox MariaDB and counts, per source transaction:

- binlake's own fsyncs (``binlake.storage.durable.FSYNC_COUNTS`` by purpose, and every
  ``os.fsync``/``os.fdatasync`` of the Python process by thread: the receiver's thread
  ``binlake-receiver``, the applier's ``MainThread``);
- every sync system call of the whole process tree, the JVM that writes Iceberg included
  (``fsync``, ``fdatasync``, ``sync_file_range``, ``msync``, ``sync``, ``syncfs``; and every
  ``open``/``openat`` with ``O_SYNC`` or ``O_DSYNC``, which would make writes synchronous
  without a sync call), each attributed by the file it names (``strace -y``).

Configurations: the receiver's two sync policies (``[receiver] sync = "every-transaction"``,
and ``"grouped"`` with its defaults, 50 ms / 1,000 transactions, with a 1 s interval, and with
64 KiB relay files so that rotations, checkpoint records and purges happen within the run),
each with the applied positions in the Iceberg commit (the shipped design), in two workloads:

- ``backlog``: the workload is on the source first, then ``binlake replicate --until-caught-up``
  catches up (the receiver sees transactions back to back);
- ``live``: ``binlake replicate`` runs while the workload arrives at ``--rate`` transactions/s;
  SIGTERM (a clean stop) once the lake holds the source's end.

Each measured run is a restart: one ``binlake replicate --until-caught-up`` (not traced) runs
first on the fresh sandbox, so the state folder, the relay log and the lake table exist and the
measured run replays the binlog.

The workload is ``--singles`` single-row INSERT transactions and ``--multis`` transactions of one
``--rows-per-multi``-row INSERT, in that order, on one table; per-transaction figures divide by
their number. The seed's fallback, positions in a file repository (the shadow-page file,
``storage/shadow.py``), is not a shipped path for applied positions (the shadow file only holds
the receiver's source identity), so its cost is measured through its own API: ``--updates``
prepare + commit cycles in a child process under the same strace, per update and as it would
be per transaction with one update per applier batch. Not a test: nothing is asserted.

    .venv/bin/python bench/fsyncs.py [--singles 2000] [--multis 200] [--rate 200]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from _common import write_config
from binlake_dev.sandbox import MariaDBSandbox

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

    SyncCall = Callable[[FileDescriptorLike], None]

SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "msync", "syncfs", "sync")
STRACE = shutil.which("strace") or "/usr/bin/strace"
RECEIVER_THREAD = "binlake-receiver"
RUN_TIMEOUT_S = 600.0
_CALL = re.compile(r"^(\d+)\s+(\w+)\((.*)$")
_FD_PATH = re.compile(r"^-?\d+<(.*?)>")
_QUOTED = re.compile(r'"([^"]*)"')


# ---- child processes (run under strace) ---------------------------------------------------------


def child_replicate(out: Path, argv: list[str]) -> int:
    """``binlake replicate`` (``binlake.cli.main.run``) with every os.fsync/os.fdatasync counted
    by thread; writes the counts and FSYNC_COUNTS to ``out`` when it returns."""
    by_thread: Counter[str] = Counter()
    lock = threading.Lock()

    def counted(real: Callable[[FileDescriptorLike], None], name: str) -> SyncCall:
        def call(fd: FileDescriptorLike) -> None:
            with lock:
                by_thread[f"{threading.current_thread().name}:{name}"] += 1
            real(fd)

        return call

    setattr(os, "fsync", counted(os.fsync, "fsync"))  # noqa: B010 (mypy: a module function)
    setattr(os, "fdatasync", counted(os.fdatasync, "fdatasync"))  # noqa: B010
    from binlake.cli.main import run
    from binlake.storage.durable import FSYNC_COUNTS

    out.with_suffix(".pid").write_text(str(os.getpid()))
    rc = 1
    try:
        rc = run(argv)
    finally:
        out.write_text(json.dumps({"rc": rc, "threads": by_thread, "purposes": dict(FSYNC_COUNTS)}))
    return rc


def child_shadow(out: Path, path: Path, updates: int) -> int:
    """``updates`` prepare + commit cycles of a shadow-page file holding an applied position."""
    from binlake.storage.durable import FSYNC_COUNTS
    from binlake.storage.shadow import ShadowStateFile

    state = ShadowStateFile.create(path)
    created = FSYNC_COUNTS["shadow"]
    started = time.perf_counter()
    for xid in range(1, updates + 1):
        state.prepare(xid, f"mariadb-bin.000001:{1000 + xid * 250} batch {xid}".encode())
        state.commit(xid)
    seconds = time.perf_counter() - started
    state.close()
    out.write_text(
        json.dumps(
            {"create": created, "updates": FSYNC_COUNTS["shadow"] - created, "seconds": seconds}
        )
    )
    return 0


# ---- strace -------------------------------------------------------------------------------------


def strace_command(log: Path, command: Sequence[str]) -> list[str]:
    calls = ",".join([*SYNC_CALLS, "open", "openat"])
    options = ["-f", "--seccomp-bpf", "-qq", "-y", "-e", "signal=none", "-e", f"trace={calls}"]
    return [STRACE, *options, "-o", str(log), "--", *command]


@dataclass
class Trace:
    """Sync calls found in an strace log: by call, and by what they were made on."""

    calls: Counter[str] = field(default_factory=Counter)
    targets: Counter[str] = field(default_factory=Counter)
    sync_opens: list[str] = field(default_factory=list)
    #: Files opened with O_CREAT, named like ``targets`` (evidence of what each side wrote).
    created: Counter[str] = field(default_factory=Counter)
    #: Iceberg commits: new table metadata files (``<uuid>.metadata.json``, renamed to
    #: ``v<N>.metadata.json`` by the commit) written in ``metadata`` folders.
    commits: int = 0

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def read_trace(log: Path, name_target: Callable[[str], str]) -> Trace:
    trace = Trace()
    for line in log.read_text(errors="replace").splitlines():
        match = _CALL.match(line)
        if match is None:
            continue  # "<... resumed>" halves; the call was counted at its start
        _tid, call, args = match.groups()
        if call in ("open", "openat"):
            if "O_SYNC" in args or "O_DSYNC" in args:
                trace.sync_opens.append(args[:200])
            quoted = _QUOTED.search(args)
            if "O_CREAT" in args and quoted is not None:
                path = quoted.group(1)
                trace.created[name_target(path)] += 1
                name = path.rsplit("/", 1)[-1]
                if "/metadata/" in path and name.endswith(".metadata.json") and name[0] != ".":
                    trace.commits += 1
            continue
        trace.calls[call] += 1
        fd = _FD_PATH.match(args)
        trace.targets[name_target(fd.group(1)) if fd else f"({call} without a file)"] += 1
    return trace


#: What sync calls on Iceberg's files are named (by file, strace cannot tell who made them).
WAREHOUSE = "Iceberg warehouse"


def target_namer(state: Path, warehouse: Path) -> Callable[[str], str]:
    """Names the file a sync call was made on: binlake's state files by role, else by area."""

    def name(path: str) -> str:
        p = Path(path)
        if p == state:
            return "binlake: state folder"
        if p == state / "relay":
            return "binlake: relay folder"
        if p.parent == state / "relay":
            return "binlake: relay index" if "index" in p.name else "binlake: relay file"
        if p.name.startswith("relay.checkpoint"):
            return "binlake: checkpoint record"
        if p.name.startswith("source.state"):
            return "binlake: source.state (shadow page)"
        if p.is_relative_to(state):
            return f"binlake: {str(p.relative_to(state)).removesuffix('.tmp')}"
        if p.is_relative_to(warehouse):
            return WAREHOUSE  # binlake's own syncs before a checkpoint moves, and any JVM's
        return f"other: {path}"

    return name


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ---- the source and the workload ----------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    singles: int
    multis: int
    rows_per_multi: int

    @property
    def transactions(self) -> int:
        return self.singles + self.multis


def prepare_source(sandbox: MariaDBSandbox) -> None:
    sandbox.execute("CREATE DATABASE bench")
    sandbox.execute(
        "CREATE TABLE bench.t (id BIGINT PRIMARY KEY, v INT NOT NULL, note VARCHAR(64))"
    )
    sandbox.execute("INSERT INTO bench.t VALUES (-1, 0, 'before the measured run')")


def run_workload(sandbox: MariaDBSandbox, workload: Workload, rate: float | None) -> None:
    """The transactions, back to back (``rate`` None) or paced at ``rate`` per second."""
    started = time.monotonic()
    done = 0
    with sandbox.connect(autocommit=True) as conn, conn.cursor() as cur:
        for i in range(workload.singles):
            cur.execute("INSERT INTO bench.t VALUES (%s, %s, 'single')", (i, i))
            done += 1
            pace(started, done, rate)
        base = workload.singles
        n = workload.rows_per_multi
        for m in range(workload.multis):
            first = base + m * n
            cur.execute(
                "INSERT INTO bench.t VALUES " + ",".join(["(%s, %s, 'multi')"] * n),
                [v for i in range(first, first + n) for v in (i, i)],
            )
            done += 1
            pace(started, done, rate)


def pace(started: float, done: int, rate: float | None) -> None:
    if rate is not None:
        wait = started + done / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def source_end(sandbox: MariaDBSandbox) -> tuple[str, int]:
    rows = sandbox.execute("SHOW MASTER STATUS")
    return str(rows[0][0]), int(rows[0][1])


def lake_holds(warehouse: Path, end: tuple[str, int]) -> bool:
    from binlake.lake.catalog.metadata import read_table

    table = read_table(warehouse, ("bench", "t"))
    snapshots = table.binlake_snapshots if table is not None else ()
    position = snapshots[0].position if snapshots else None
    return position is not None and (position.file, position.offset) >= end


# ---- one configuration --------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    name: str
    receiver: str  # TOML lines of [receiver]


SETTINGS = (
    Setting("every-transaction (1 per txn)", 'sync = "every-transaction"\n'),
    Setting("grouped, 50 ms / 1,000 txns (default)", 'sync = "grouped"\n'),
    Setting("grouped, 1 s / 1,000 txns", 'sync = "grouped"\nsync_interval_ms = 1000\n'),
    Setting(
        "grouped (default), 64 KiB relay files",
        'sync = "grouped"\nmax_relay_file_size = 65536\n',
    ),
)


@dataclass
class Run:
    setting: Setting
    mode: str
    transactions: int
    threads: Counter[str]
    purposes: Counter[str]
    trace: Trace
    batches: int
    seconds: float

    def per_txn(self, count: float) -> float:
        return count / self.transactions

    @property
    def receiver(self) -> int:
        return sum(n for k, n in self.threads.items() if k.startswith(RECEIVER_THREAD + ":"))

    @property
    def applier(self) -> int:
        return sum(self.threads.values()) - self.receiver

    @property
    def position_fsyncs(self) -> int:
        """Sync calls made to store applied positions: binlake has no purpose for them (the
        position is a property of the Iceberg commit), so only the JVM's could be: the calls
        on warehouse files minus binlake's own (``FSYNC_COUNTS["warehouse"]``: the lake's new
        files made durable before the checkpoint moves past them)."""
        return max(0, self.trace.targets[WAREHOUSE] - self.purposes["warehouse"])

    @property
    def python(self) -> int:
        return sum(self.threads.values())

    @property
    def outside_python(self) -> int:
        """Sync calls binlake's Python did not make (the JVM's, and any other process's)."""
        return max(0, self.trace.total - self.python)


def measure(folder: Path, setting: Setting, mode: str, workload: Workload, rate: float) -> Run:
    folder.mkdir(parents=True)
    with MariaDBSandbox(folder / "mariadb") as sandbox:
        prepare_source(sandbox)
        config = write_config(folder, sandbox, receiver=setting.receiver)
        prime(config)
        out = folder / "counts.json"
        log = folder / "strace.log"
        args = ["replicate", "--config", str(config)]
        if mode == "backlog":
            run_workload(sandbox, workload, None)
            args.append("--until-caught-up")
        command = strace_command(
            log, [sys.executable, __file__, "--child-replicate", str(out), *args]
        )
        started = time.monotonic()
        console_path = folder / "replicate.out"
        with console_path.open("w") as console:
            process = subprocess.Popen(
                command, stdout=console, stderr=subprocess.STDOUT, env=environment()
            )
            try:
                if mode == "live":
                    warehouse = folder / "warehouse"
                    drive_live(process, sandbox, workload, rate, warehouse, out, console_path)
                rc = process.wait(timeout=RUN_TIMEOUT_S)
            finally:
                if process.poll() is None:
                    process.kill()
        seconds = time.monotonic() - started
    output = (folder / "replicate.out").read_text()
    if rc != 0 or not out.exists():
        raise SystemExit(f"binlake replicate failed (rc={rc}):\n{output[-4000:]}")
    counts = json.loads(out.read_text())
    trace = read_trace(log, target_namer(folder / "state", folder / "warehouse"))
    return Run(
        setting,
        mode,
        workload.transactions,
        Counter(counts["threads"]),
        Counter(counts["purposes"]),
        trace,
        batches_of(output),
        seconds,
    )


def prime(config: Path) -> None:
    """One ``binlake replicate --until-caught-up`` before the measured run (not traced): the
    state folder, the relay log and the lake table exist, as for a replica that ran before, so
    that the measured run replays the binlog (a new state folder may copy tables instead)."""
    command = [sys.executable, "-m", "binlake.cli.main", "replicate", "--config", str(config)]
    run = subprocess.run(
        [*command, "--until-caught-up"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    if run.returncode != 0:
        raise SystemExit(f"priming binlake replicate failed:\n{run.stdout}{run.stderr[-4000:]}")


def drive_live(
    process: subprocess.Popen[bytes],
    sandbox: MariaDBSandbox,
    workload: Workload,
    rate: float,
    warehouse: Path,
    out: Path,
    console: Path,
) -> None:
    """The paced workload while replicate runs; then SIGTERM (clean stop) once the lake has it."""
    deadline = time.monotonic() + 120.0
    while not applier_started(console) and process.poll() is None:
        if time.monotonic() > deadline:
            raise SystemExit("binlake replicate's applier did not start in 120 s")
        time.sleep(0.2)
    run_workload(sandbox, workload, rate)
    end = source_end(sandbox)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not lake_holds(warehouse, end):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("binlake replicate stopped before the lake held the workload")
        time.sleep(0.2)
    os.kill(int(out.with_suffix(".pid").read_text()), signal.SIGTERM)


def applier_started(console: Path) -> bool:
    """Spark is up and the applier reads the relay log (its first console line says so)."""
    return "apply: reading the relay log from" in console.read_text()


def batches_of(output: str) -> int:
    match = re.search(r"in ([\d,]+) batches", output)
    return int(match.group(1).replace(",", "")) if match else 0


# ---- the shadow-page fallback -------------------------------------------------------------------


@dataclass
class ShadowCost:
    per_update_binlake: float
    per_update_syscalls: float
    seconds_per_update: float


def measure_shadow(folder: Path, updates: int) -> ShadowCost:
    """Sync calls per prepare + commit: a run with ``updates`` minus a run with none."""
    results = []
    for n in (0, updates):
        work = folder / f"shadow-{n}"
        work.mkdir(parents=True)
        out, log = work / "counts.json", work / "strace.log"
        command = [sys.executable, __file__, "--child-shadow", str(out), str(work / "x.state")]
        subprocess.run(strace_command(log, [*command, str(n)]), check=True, env=environment())
        counts = json.loads(out.read_text())
        trace = read_trace(log, lambda path: path)
        results.append((counts, trace.total))
    (_, base_calls), (counts, calls) = results
    return ShadowCost(
        counts["updates"] / updates, (calls - base_calls) / updates, counts["seconds"] / updates
    )


# ---- report -------------------------------------------------------------------------------------


def report(runs: list[Run], shadow: ShadowCost, workload: Workload) -> None:
    print(
        f"\nworkload: {workload.singles:,} single-row + {workload.multis:,} "
        f"{workload.rows_per_multi}-row INSERT transactions = {workload.transactions:,}; "
        "figures are per transaction = count / that number (start and stop costs included)\n"
    )
    print(
        "| receiver sync | workload | receiver fsyncs | applier fsyncs | JVM sync calls | "
        "all sync calls (strace) | Iceberg commits (applier batches) | positions in the "
        "Iceberg commit (shipped; WL#5125 case 4 expects 0 extra) | positions in the "
        "shadow-page file (fallback; case 2 expects 3 extra) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        fallback = shadow.per_update_syscalls * run.trace.commits
        print(
            f"| {run.setting.name} | {run.mode} | {run.per_txn(run.receiver):.3f} | "
            f"{run.per_txn(run.applier):.3f} | {run.per_txn(run.outside_python):.3f} | "
            f"{run.per_txn(run.trace.total):.3f} | {run.trace.commits} ({run.batches}) | "
            f"{run.per_txn(run.position_fsyncs):.3f} | {run.per_txn(fallback):.4f} |"
        )
    print(
        f"\nshadow-page file, one prepare + commit of a position: {shadow.per_update_binlake:.2f} "
        f"fsyncs (binlake's counter), {shadow.per_update_syscalls:.2f} sync calls (strace), "
        f"{shadow.seconds_per_update * 1e3:.2f} ms each; the last column counts one per Iceberg "
        "commit, not one per source transaction"
    )
    print("\nwhere the sync calls went (strace -y, whole process tree; binlake's counters):")
    for run in runs:
        targets = ", ".join(f"{k} {n}" for k, n in run.trace.targets.most_common())
        calls = ", ".join(f"{k} {n}" for k, n in sorted(run.trace.calls.items()))
        purposes = ", ".join(f"{k} {n}" for k, n in sorted(run.purposes.items()))
        threads = ", ".join(f"{k} {n}" for k, n in sorted(run.threads.items()))
        created = ", ".join(f"{k} {n}" for k, n in run.trace.created.most_common(4))
        print(f"  {run.setting.name}, {run.mode} ({run.seconds:.0f} s under strace):")
        print(f"    system calls: {calls or 'none'}; opens with O_SYNC/O_DSYNC: ", end="")
        print(len(run.trace.sync_opens))
        print(f"    by file: {targets or 'none'}")
        print(f"    FSYNC_COUNTS by purpose: {purposes}")
        print(f"    os.fsync by thread: {threads}")
        print(f"    files created (O_CREAT), most: {created}")
        if run.python > run.trace.total:
            print(f"    note: Python counted {run.python} fsyncs, strace saw {run.trace.total}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child-replicate":
        rest = sys.argv[3:]
        sys.exit(child_replicate(Path(sys.argv[2]), rest))
    if len(sys.argv) > 2 and sys.argv[1] == "--child-shadow":
        sys.exit(child_shadow(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--singles", type=int, default=2000)
    parser.add_argument("--multis", type=int, default=200)
    parser.add_argument("--rows-per-multi", type=int, default=20)
    parser.add_argument("--rate", type=float, default=200.0, help="live: transactions/s")
    parser.add_argument("--modes", default="backlog,live")
    parser.add_argument("--updates", type=int, default=1000, help="shadow-page updates")
    args = parser.parse_args()
    if not Path(STRACE).exists():
        raise SystemExit(f"{STRACE} is needed (apt-get install strace)")
    workload = Workload(args.singles, args.multis, args.rows_per_multi)
    base = Path(tempfile.mkdtemp(prefix="binlake-bench-fsyncs-"))
    try:
        runs = []
        for mode in args.modes.split(","):
            for i, setting in enumerate(SETTINGS):
                run = measure(base / f"{mode}-{i}", setting, mode, workload, args.rate)
                print(
                    f"{setting.name}, {mode}: receiver {run.receiver}, applier {run.applier}, "
                    f"strace {run.trace.total} sync calls, {run.batches} batches",
                    flush=True,
                )
                runs.append(run)
        shadow = measure_shadow(base, args.updates)
        report(runs, shadow, workload)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
