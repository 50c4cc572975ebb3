"""Helpers for the acceptance tests (shared/design.md, "Acceptance scenarios"): `binlake
replicate` as a subprocess (refused, or running in the background; killed at a crash point:
``replicate_testing.run_until_killed``), the lake's positions read from the Iceberg metadata
files (no Spark), the relay log's tail damaged in the four torn shapes of WL#5493, a state
folder's fingerprint, and the checks the scenarios end with.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from binlake.binlog.errors import BinlogFormatError
from binlake.lake.catalog.metadata import read_table
from binlake.position import SourcePosition
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import read_index
from binlake.storage.tail_scan import scan_file
from binlake_dev.sandbox import MariaDBSandbox
from crash.applier_workload import ShopWorkload
from receiver_testing import relay_transactions, source_transactions
from replicate_testing import replicate_command, replicate_env

HEADER_LEN = 19
CHECKSUM_LEN = 4
#: The event_size field of a binlog event header (little-endian uint32 at offset 9).
_SIZE = struct.Struct("<I")
_SIZE_AT = 9
SHOP_TABLES = ("orders", "order_lines", "audit")
#: A line of a Java stack trace ("\tat org.apache.spark...(Utils.scala:1397)").
JAVA_STACK_FRAME = re.compile(r"^\s+at [\w.$]+\(.*\)$", re.MULTILINE)

#: The four torn shapes of WL#5493, in the order the design lists them.
TORN_SHAPES = ("header_partial", "header_garbage", "body_partial", "body_garbage")


# ---- running replicate ------------------------------------------------------------------------


class BackgroundReplicate:
    """`binlake replicate` running until stopped (SIGTERM), its output in files (a pipe nobody
    reads would fill up and block it)."""

    def __init__(self, config: Path, *args: str, name: str = "replicate") -> None:
        self.out = config.parent / f"{name}.out"
        self.err = config.parent / f"{name}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(
                replicate_command(config, *args),
                stdout=out,
                stderr=err,
                env=replicate_env(),
                text=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stderr(self) -> str:
        return self.err.read_text()

    def output(self) -> str:
        return (
            f"rc={self.process.returncode}\n--- stdout\n{self.out.read_text()[-3000:]}\n"
            f"--- stderr\n{self.stderr()[-6000:]}"
        )

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"replicate did not exit within {timeout}s\n{self.output()}"
            ) from None

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM (a clean stop), then the exit code."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()


def assert_refused(
    run: subprocess.CompletedProcess[str], code: int, *words: str
) -> tuple[str, str]:
    """A typed refusal as the CLI prints it: exit ``code``, ``error: ...`` naming ``words``, one
    ``hint: ...`` line, no traceback (Python's, or a Java stack trace Spark logged). Returns the
    error and hint lines."""
    detail = f"rc={run.returncode}\n--- stderr\n{run.stderr[-6000:]}"
    assert run.returncode == code, detail
    assert "Traceback" not in run.stderr, detail
    assert not JAVA_STACK_FRAME.search(run.stderr), detail
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    hints = [line for line in run.stderr.splitlines() if line.startswith("hint: ")]
    assert len(errors) == 1 and len(hints) == 1, detail
    for word in words:
        assert word in errors[0], f"{word!r} not in {errors[0]!r}"
    assert len(hints[0]) > len("hint: ") + 10, detail
    return errors[0], hints[0]


class LiveWorkload:
    """The shop workload committing one transaction every ``pause_s`` in a thread, from the
    ``with`` until its end (a run killed at a crash point that needs a live stream, such as a
    rotation of the relay log, gets one however long it takes to start)."""

    def __init__(self, workload: ShopWorkload, pause_s: float = 0.2) -> None:
        self.workload = workload
        self.pause_s = pause_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="live-workload")

    def _run(self) -> None:
        try:
            while not self.stop.wait(self.pause_s):
                self.workload.run(1)
        except BaseException as error:  # raised by __exit__
            self.workload.errors.append(error)

    def __enter__(self) -> LiveWorkload:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        assert not self.workload.errors, self.workload.errors


# ---- positions --------------------------------------------------------------------------------


def last_source_transaction(source: MariaDBSandbox) -> SourcePosition:
    """Where the source binlog's last complete transaction ends (the server may log control
    events after it, e.g. a BINLOG_CHECKPOINT after a rotation or a restart, which no table's
    position ever reaches)."""
    for path in reversed(source.binlog_files()):
        ends: list[int] = []
        # A BinlogFormatError: the server is writing the tail; what came before is enough.
        with (
            path.open("rb") as f,
            BinlogFileReader(f, path.name) as reader,
            contextlib.suppress(BinlogFormatError),
        ):
            for group in reader.groups():
                if group.is_transaction:
                    ends.append(group.end_offset)
        if ends:
            return SourcePosition(path.name, ends[-1])
    raise AssertionError("the source binlog holds no transaction")


def lake_positions(
    warehouse: Path, namespace: str, tables: Iterable[str] = SHOP_TABLES
) -> dict[str, SourcePosition | None]:
    """Each table's applied position (its newest binlake snapshot's), from the metadata files."""
    out: dict[str, SourcePosition | None] = {}
    for table in tables:
        lake = read_table(warehouse, (namespace, table))
        newest = lake.latest_binlake if lake is not None else None
        out[table] = newest.position if newest is not None else None
    return out


def wait_for_lake(
    warehouse: Path,
    namespace: str,
    target: SourcePosition,
    replicate: BackgroundReplicate | None = None,
    *,
    tables: Sequence[str] = SHOP_TABLES,
    timeout: float = 90.0,
) -> None:
    """Wait until every table's applied position is at or after ``target`` (each transaction of
    the shop workload touches every table)."""
    deadline = time.monotonic() + timeout
    positions: dict[str, SourcePosition | None] = {}
    while time.monotonic() < deadline:
        if replicate is not None and not replicate.alive():
            raise AssertionError(f"replicate exited early\n{replicate.output()}")
        try:
            positions = lake_positions(warehouse, namespace, tables)
        except (OSError, ValueError):
            positions = {}  # a metadata file being written: look again
        if positions and all(p is not None and p.key() >= target.key() for p in positions.values()):
            return
        time.sleep(0.2)
    shown = {t: str(p) for t, p in positions.items()}
    extra = f"\n{replicate.output()}" if replicate is not None else ""
    raise AssertionError(f"the lake is at {shown}, not at {target} after {timeout}s{extra}")


# ---- the relay log ----------------------------------------------------------------------------


def relay_dir(state: Path) -> Path:
    return state / "relay"


def newest_relay_file(state: Path) -> Path:
    return read_index(relay_dir(state) / "relay-bin.index")[-1]


def event_spans(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each event in ``data[start:end]``, by the headers' event_size."""
    spans = []
    at = start
    while at < end:
        (size,) = _SIZE.unpack_from(data, at + _SIZE_AT)
        spans.append((at, at + size))
        at += size
    assert at == end, f"events do not tile {start}..{end}"
    return spans


def transaction_events(path: Path, which: int = -1) -> list[tuple[int, int]]:
    """(start, end) of the events of the ``which``-th complete transaction of ``path`` (a relay
    file, possibly with a torn tail after its last complete one)."""
    facts = scan_file(path)
    assert facts.gtids, f"{path.name} holds no complete transaction: {facts}"
    _gtid, start, end = facts.gtids[which]
    return event_spans(path.read_bytes(), start, end)


def damage_event_body(path: Path, event: tuple[int, int]) -> int:
    """Flip a byte in the middle of the body of ``event`` (its CRC32 no longer matches);
    returns the offset flipped (flip it again to undo)."""
    start, end = event
    offset = (start + HEADER_LEN + end - CHECKSUM_LEN) // 2
    flip_byte(path, offset)
    return offset


def flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x5A]))


def damage_relay_tail(path: Path, shape: str) -> int:
    """Rewrite the tail of ``path`` (the newest relay file, left by a killed writer) so that its
    last complete transaction ends in a torn write of ``shape``; returns the offset recovery
    must trim back to (the start of that transaction).

    What follows the last complete transaction (the kill's partial one) is dropped first. Then:
    ``header_partial``, ``header_garbage`` (19 bytes whose event_size is impossible),
    ``body_partial``, ``body_garbage`` (whole, CRC32 mismatch) replace its closing XID event;
    ``crc_inside_last_transaction`` (scenario 2) keeps every event but damages one inside it,
    followed by the transaction's intact XID.
    """
    events = transaction_events(path)
    start, end = events[0][0], events[-1][1]
    xid_start, xid_end = events[-1]
    data = path.read_bytes()
    xid = data[xid_start:xid_end]
    with path.open("r+b") as f:
        f.truncate(end)
    if shape == "crc_inside_last_transaction":
        damage_event_body(path, events[len(events) // 2])
        return start
    if shape == "header_partial":
        tail = xid[: HEADER_LEN // 2]
    elif shape == "header_garbage":
        garbage = bytearray(b"\xa5" * HEADER_LEN)
        _SIZE.pack_into(garbage, _SIZE_AT, 7)  # shorter than a header: impossible
        tail = bytes(garbage)
    elif shape == "body_partial":
        tail = xid[: len(xid) - CHECKSUM_LEN - 2]
    elif shape == "body_garbage":
        bad = bytearray(xid)
        bad[HEADER_LEN] ^= 0xFF
        tail = bytes(bad)
    else:
        raise ValueError(f"unknown shape {shape!r}")
    with path.open("r+b") as f:
        f.truncate(xid_start)
        f.seek(xid_start)
        f.write(tail)
    return start


def assert_relay_is_a_suffix_of_the_source(state: Path, source: MariaDBSandbox) -> int:
    """The relay log's transactions (older files may have been purged) are the source binlog's
    last ones, byte for byte, each once, none missing in between. Returns how many."""
    relay = relay_transactions(state)
    source_txs = source_transactions(source)
    gtids = [gtid for gtid, _ in relay]
    assert len(set(gtids)) == len(gtids), "a transaction appears twice in the relay log"
    if not relay:
        return 0  # every relay file was applied and purged
    assert relay == source_txs[len(source_txs) - len(relay) :], (
        f"the relay log ({len(relay)} transactions, first {gtids[0]}, last {gtids[-1]}) is not "
        "the tail of the source binlog"
    )
    return len(relay)


# ---- state folders ----------------------------------------------------------------------------


def state_fingerprint(state: Path) -> dict[str, str]:
    """sha256 of every file under ``state`` except the lock file (every run rewrites the
    holder's details in it, by design)."""
    return {
        str(p.relative_to(state)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(state.rglob("*"))
        if p.is_file() and p.name != "lock"
    }


def copy_state(state: Path, to: Path) -> Path:
    shutil.copytree(state, to, ignore=shutil.ignore_patterns("lock"))
    return to


# ---- small disks --------------------------------------------------------------------------------


def mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        check=True,
        capture_output=True,
    )


def remount(where: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)


def unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def fill(disk: Path, leave_pages: int = 0) -> Path:
    """Fill ``disk`` up to its last 4 KiB page, then free ``leave_pages`` pages again."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(bytes(4096))
        except OSError:
            pass
        size = f.tell() // 4096 * 4096 - leave_pages * 4096
        f.truncate(max(size, 0))
    return filler
