"""Acceptance scenarios 1-5 (shared/design.md): the relay log damaged or interrupted under a
running `binlake replicate`, through the whole pipeline (real MariaDB, Spark, Iceberg).

1. replicate killed mid-event, its relay tail then torn in each of WL#5493's four shapes;
2. a CRC32 mismatch inside the newest relay file's last transaction;
3. a CRC32 mismatch in an older relay file, and in the newest one before its tail;
4. replicate killed while rotating the relay log, before and after the index update;
5. replicate killed while purging relay files, before and after the index update.

Each ends with `binlake verify` (every table equals the source at one source position), the
exactly-once check of each table's snapshot history, and the relay log equal, byte for byte, to
the tail of the source binlog (each transaction once).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from acceptance_testing import (
    TORN_SHAPES,
    LiveWorkload,
    assert_refused,
    assert_relay_is_a_suffix_of_the_source,
    copy_state,
    damage_event_body,
    damage_relay_tail,
    flip_byte,
    lake_positions,
    newest_relay_file,
    relay_dir,
    state_fingerprint,
    transaction_events,
)

from binlake.config import load_config
from binlake.errors import LogCorruptionError
from binlake.storage.index import read_index
from binlake.storage.recovery import recover_log
from binlake.storage.tail_scan import scan_file
from binlake_dev.sandbox import MariaDBSandbox
from crash.applier_workload import ShopWorkload
from receiver_testing import run_receive
from relay_testing import check_recovered_log
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    lake_warehouse,
    module_source,
    refresh,
    replicate_in_process,
    run_replicate,
    run_until_killed,
)

pytestmark = pytest.mark.acceptance

EXIT_CORRUPTION = LogCorruptionError.exit_code
#: The append that dies half written: past the relay preamble and a few whole transactions of
#: the backlog each run starts with, long before Spark has started.
KILL_MID_EVENT = "relay_mid_event:40"


source = module_source("acceptance-relay-source")


def assert_trimmed(output: str, file: str, offset: int) -> None:
    """The run's relay-log recovery trimmed ``file`` back to ``offset``."""
    wanted = f"from {file} at offset {offset}:"
    lines = [line for line in output.splitlines() if "relay log recovery: trimmed" in line]
    assert any(wanted in line for line in lines), f"no trim {wanted!r} in:\n{output[-4000:]}"


def test_torn_relay_tails_and_a_bad_crc_in_the_last_transaction_are_trimmed_and_refetched(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Scenarios 1 and 2, one after the other on one state folder: each `binlake replicate` is
    killed half-way through writing an event (crash point ``relay_mid_event``); the test then
    reshapes the newest relay file's tail so that its last complete transaction ends in the
    next damage (a torn XID of each WL#5493 shape, then a CRC32 mismatch inside the transaction
    with its XID intact). The next start must trim exactly that transaction (its recovery line
    names the file and offset), refetch it from the source, and go on."""
    database = "acc_torn"
    workload = ShopWorkload(source, database, seed=1).create()
    workload.run(6)
    config = config_for(tmp_path, source, spark, database)
    replicate_in_process(config, spark)  # the lake already holds the first transactions
    state = tmp_path / "state"
    pending: tuple[str, int] | None = None  # (file, offset) the next start must trim back to
    for shape in (*TORN_SHAPES, "crc_inside_last_transaction"):
        workload.run(6)
        killed = run_until_killed(config, KILL_MID_EVENT)
        assert killed.returncode == -9, f"before {shape}: not killed\n{describe(killed)}"
        if pending is not None:
            assert_trimmed(killed.stderr, *pending)
        newest = newest_relay_file(state)
        boundary = damage_relay_tail(newest, shape)
        facts = scan_file(newest)  # the damage is what the shape says: a tail to trim
        assert facts.in_use and facts.error is not None, (shape, facts)
        assert facts.boundary == boundary, (shape, facts)
        assert facts.tail_damage if shape.startswith("crc") else facts.torn, (shape, facts)
        pending = (newest.name, boundary)
    workload.run(3)
    final = replicate_in_process(config, spark)
    assert pending is not None
    assert_trimmed(final.output, *pending)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    assert_relay_is_a_suffix_of_the_source(state, source)


def test_a_bad_crc_before_the_relay_tail_is_refused_naming_file_and_offset_applying_nothing(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Scenario 3. Two relay files are received (`binlake receive`) but not applied; a byte is
    flipped in the first transaction of the older one, then (the first damage undone) of the
    newest one, with whole transactions after it in both. `binlake replicate` must refuse each
    with `LogCorruptionError` (exit 65) naming the file and the damaged event's offset, write
    nothing to the relay log, and apply nothing. With the byte restored it resumes."""
    database = "acc_corrupt"
    workload = ShopWorkload(source, database, seed=3).create()
    workload.run(5)
    config = config_for(tmp_path, source, spark, database)
    replicate_in_process(config, spark)
    state = tmp_path / "state"
    warehouse = lake_warehouse(spark)
    applied = lake_positions(warehouse, database)
    for _ in range(2):  # each run of `receive` writes a new relay file
        workload.run(4)
        received = run_receive(config, "--until-caught-up")
        assert received.returncode == 0, describe(received)
    older, newest = read_index(relay_dir(state) / "relay-bin.index")[-2:]
    for path in (older, newest):
        events = transaction_events(path, 0)
        assert len(scan_file(path).gtids) >= 3  # whole transactions follow the damage
        flipped = damage_event_body(path, events[2])
        before = state_fingerprint(state)
        refused = run_replicate(config, "--until-caught-up")
        assert_refused(refused, EXIT_CORRUPTION, f"{path.name}, offset {events[2][0]}")
        assert state_fingerprint(state) == before, f"{path.name}: the refusal wrote to the state"
        assert lake_positions(warehouse, database) == applied, "applied past the damage"
        flip_byte(path, flipped)  # the operator restores the file: nothing was skipped
    workload.run(3)
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    assert_relay_is_a_suffix_of_the_source(state, source)


#: Crash points of rotation (the receiver: a new relay file every 4 KiB) and of purge (the
#: applier: relay files older than the checkpoint), in the order the runs die at them.
ROTATION_AND_PURGE = (
    "relay_rotate_before_index:3",  # 1: the run's new file, 2: after the backlog, 3: live
    "relay_rotate_after_index:3",
    "purge_before_index:1",
    "purge_after_index:1",  # the index no longer lists the files to purge, none deleted yet
)


def test_replicate_killed_rotating_or_purging_the_relay_log_leaves_a_valid_index_losing_nothing(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Scenarios 4 and 5: one state folder, `binlake replicate` killed at each rotation and
    purge crash point in turn, each run restarting from the previous crash. After each kill the
    index marker shows the protocol was cut; recovery of a copy of the relay folder leaves an
    index that lists exactly the whole files on disk (a new file adopted or removed, a purge
    finished). The last restart applies everything exactly once."""
    database = "acc_rotate"
    workload = ShopWorkload(source, database, seed=5).create()
    small_files = "max_relay_file_size = 4096\nsync_interval_ms = 10\n"
    config = config_for(
        tmp_path,
        source,
        spark,
        database,
        receiver=small_files,
        applier="max_transactions = 20\nmax_seconds = 0.5\n",
    )
    state = tmp_path / "state"
    for point in ROTATION_AND_PURGE:
        workload.run(4)
        if point.startswith("relay_rotate"):
            with LiveWorkload(workload):  # relay files fill and rotate while it runs
                killed = run_until_killed(config, point)
        else:
            killed = run_until_killed(config, point)
        assert killed.returncode == -9, f"{point}: {describe(killed)}"
        relay = relay_dir(state)
        assert (relay / "relay-bin.index.marker").exists(), f"{point}: no protocol was cut"
        name = point.partition(":")[0]
        copy = copy_state(state, tmp_path / f"after-{name}") / "relay"
        recover_log(copy)
        check_recovered_log(copy)
    workload.run(3)
    config_for(tmp_path, source, spark, database, receiver=small_files)  # batches: any size
    if (lake_warehouse(spark) / database).is_dir():  # the killed runs may have committed...
        refresh(spark, load_config(config))  # ...behind this session's back
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    assert_relay_is_a_suffix_of_the_source(state, source)
