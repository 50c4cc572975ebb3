"""kill -9 at every relay/purge/durable/recover crash point, then recovery and a restart.

Each case runs relay_driver.py with ``BINLAKE_CRASH_POINT=name:n``; it must die there (SIGKILL),
and in ``cut`` mode the power is then cut under it (everything not fsynced dropped, the newest
unsynced write torn at 512 bytes: tests/cut_modes.py). Recovery must then leave a valid
index and whole files (check_recovered_log) holding every transaction the driver saw synced; a
restarted driver must finish the stream with every transaction exactly once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from driver_runs import DriverRun, assert_nothing_synced_lost, run_cli, run_driver

from binlake.crashpoints import POINTS
from binlake.storage.index import LogIndex
from binlake.storage.recovery import recover_log
from binlake.storage.tail_scan import scan_file
from cut_modes import CUT_MODES, Ground
from relay_testing import check_recovered_log, gtid_seqs

COVERED_PREFIXES = ("relay_", "purge_", "durable_", "recover_")
TRANSACTIONS = 60

#: crash point -> which pass through it dies (chosen so that the crash lands mid-run, after
#: some syncs, rotations and purges: 60 transactions, sync every 3, ~7 per file, purge every 20).
PASS_THAT_DIES: dict[str, int] = {
    "relay_before_append": 37,
    "relay_mid_event": 53,
    "relay_after_append": 61,
    "relay_before_fsync": 5,
    "relay_after_fsync": 6,
    "relay_rotate_before_index": 3,
    "relay_rotate_after_index": 3,
    "relay_close_before_flag": 2,
    "purge_before_index": 2,
    "purge_after_index": 2,
    "purge_before_delete": 3,
    "durable_after_temp_write": 9,
    "durable_after_temp_fsync": 9,
    "durable_after_rename": 9,
    "recover_after_truncate": 1,
}


def test_every_relay_purge_durable_and_recover_crash_point_has_a_case() -> None:
    registered = {name for name in POINTS if name.startswith(COVERED_PREFIXES)}
    assert set(PASS_THAT_DIES) == registered


def crash_recovery(folder: Path, ground: Ground) -> DriverRun:
    """A torn tail (relay_mid_event, killed: the torn half stays), then `binlake binlog recover`
    killed after its truncate (and the power cut there: the truncate was fsynced)."""
    first = run_driver(folder, crash_point="relay_mid_event:53")
    assert first.killed, first.describe()
    cli = run_cli("binlog", "recover", str(folder), crash_point="recover_after_truncate:1")
    assert cli.returncode == -9, cli.stderr
    ground.crash()
    newest = LogIndex(folder / "relay-bin.index").names()[-1]
    state = scan_file(folder / newest)
    assert state.in_use and state.clean, "truncated, flag not yet cleared"
    return first


@pytest.mark.parametrize("ground", CUT_MODES, indirect=True)
@pytest.mark.parametrize("point", sorted(PASS_THAT_DIES))
def test_crash_at_point_then_recovery_loses_nothing_synced(ground: Ground, point: str) -> None:
    folder = ground.folder("relay")
    if point == "recover_after_truncate":
        run = crash_recovery(folder, ground)
    else:
        run = run_driver(folder, crash_point=f"{point}:{PASS_THAT_DIES[point]}")
        assert run.killed, f"{point} was never reached\n{run.describe()}"
        assert run.synced, f"crashed before any sync: the case tests too little\n{run.describe()}"
        ground.crash()
    recover_log(folder)
    check_recovered_log(folder)
    assert_nothing_synced_lost(folder, run)
    again = run_driver(folder, "--resume")
    assert again.returncode == 0, again.describe()
    check_recovered_log(folder)
    seqs = gtid_seqs(folder)
    assert seqs[-1] == TRANSACTIONS
    assert seqs == list(range(seqs[0], TRANSACTIONS + 1)), "a transaction lost or doubled"
