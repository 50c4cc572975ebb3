"""Subprocess driver for the storage crash tests: runs a fixed schedule of durable steps.

Run with ``BINLAKE_CRASH_POINT=name:n`` it SIGKILLs itself at that step; the tests then reopen
what it left and check the invariants against the same schedule, imported from here.

    storage_driver.py shadow PATH          updates of a state file made by the test
    storage_driver.py shadow-create PATH   create a state file
    storage_driver.py checkpoint RECORD    the CHECKPOINT_OPS schedule of a tracker
    storage_driver.py lock-hold DIR        take the lock, print "locked", sleep until killed
    storage_driver.py lock-try DIR         take the lock or exit non-zero naming the holder
    storage_driver.py adopt WAREHOUSE      the embedded catalog's adoption of a Hadoop warehouse
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from binlake.crashpoints import ENV_VAR
from binlake.errors import BinlakeError
from binlake.storage.checkpoint import CheckpointRecord, CheckpointTracker
from binlake.storage.lock import StateLock
from binlake.storage.shadow import ShadowStateFile

DRIVER = Path(__file__)


def run_driver(
    command: str, target: Path, crash_point: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run this driver in a fresh interpreter, armed at ``crash_point`` (``name:n``) if given."""
    env = {key: value for key, value in os.environ.items() if key != ENV_VAR}
    if crash_point is not None:
        env[ENV_VAR] = crash_point
    return subprocess.run(
        [sys.executable, str(DRIVER), command, str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass(frozen=True)
class ShadowUpdate:
    xid: int
    payload: bytes
    commit: bool  # False: rolled back


INITIAL_PAYLOAD = b"initial state"
#: Eight updates; every third is rolled back. Payloads grow to most of a 4 KiB page.
SHADOW_UPDATES = [
    ShadowUpdate(1000 + n, (f"update {n};" * (n * 45)).encode()[:4000], n % 3 != 0)
    for n in range(1, 9)
]

FIRST_RELAY_FILE = "relay.000001"
#: (operation, relay file, count): rotations, appends and out-of-order durability.
CHECKPOINT_OPS: list[tuple[str, str, int]] = [
    ("append", "relay.000001", 3),
    ("rotate", "relay.000002", 0),  # pending in 1: the checkpoint stays
    ("append", "relay.000002", 2),
    ("rotate", "relay.000003", 0),
    ("append", "relay.000003", 1),
    ("durable", "relay.000002", 2),  # N-1 before N-2: no move
    ("durable", "relay.000001", 1),
    ("durable", "relay.000001", 2),  # 1 -> 3 in one step: record write 1
    ("durable", "relay.000003", 1),  # newest file: stays
    ("rotate", "relay.000004", 0),  # nothing pending: record write 2
    ("append", "relay.000004", 1),
    ("rotate", "relay.000005", 0),
    ("durable", "relay.000004", 1),  # record write 3
]


def apply_checkpoint_op(tracker: CheckpointTracker, op: str, file: str, count: int) -> None:
    if op == "append":
        for _ in range(count):
            tracker.on_transaction_appended(file)
    elif op == "rotate":
        tracker.on_file_added(file)
    else:
        tracker.on_transactions_durable(file, count)


def run_shadow(path: Path) -> None:
    with ShadowStateFile.open(path) as state:
        for update in SHADOW_UPDATES:
            state.prepare(update.xid, update.payload)
            if update.commit:
                state.commit(update.xid)
            else:
                state.rollback(update.xid)


def run_checkpoint(record_path: Path) -> None:
    tracker = CheckpointTracker(CheckpointRecord(record_path), [FIRST_RELAY_FILE])
    for op, file, count in CHECKPOINT_OPS:
        apply_checkpoint_op(tracker, op, file, count)


def hold_lock(state_dir: Path) -> None:
    with StateLock.acquire(state_dir):
        print("locked", flush=True)
        while True:
            time.sleep(60)


def try_lock(state_dir: Path) -> None:
    with StateLock.acquire(state_dir) as lock:
        print(f"locked by {lock.holder.pid}", flush=True)


def main(argv: list[str]) -> int:
    command, target = argv[1], Path(argv[2])
    try:
        if command == "shadow":
            run_shadow(target)
        elif command == "shadow-create":
            ShadowStateFile.create(target, initial=INITIAL_PAYLOAD).close()
        elif command == "checkpoint":
            run_checkpoint(target)
        elif command == "lock-hold":
            hold_lock(target)
        elif command == "lock-try":
            try_lock(target)
        elif command == "adopt":
            from binlake.lake.catalog.embedded import prepare_embedded_catalog

            print(len(prepare_embedded_catalog(target, "lake")), flush=True)
        else:
            print(f"unknown command {command}", file=sys.stderr)
            return 64
    except BinlakeError as error:
        print(f"error: {error}\nhint: {error.hint}", file=sys.stderr)
        return type(error).exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
