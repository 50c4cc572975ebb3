"""kill -9 at every shadow-page crash point (and in ``cut`` mode a power cut after it:
tests/cut_modes.py), then reopen: the file reads as the last committed payload or the one
being committed (never a mix, never garbage), and ``recover()`` reports the prepared XID exactly
when the crash fell between prepare and commit or rollback (a power cut undoes a commit or a
rollback whose header write was not fsynced yet: the XID is still prepared)."""

from __future__ import annotations

import signal
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from storage_driver import INITIAL_PAYLOAD, SHADOW_UPDATES, ShadowUpdate, run_driver

from binlake.crashpoints import POINTS
from binlake.storage.shadow import ShadowStateFile
from cut_modes import CUT_MODES, Ground

PREPARE_POINTS = ("shadow_after_spare_write", "shadow_after_prepare")
COMMITS = sum(update.commit for update in SHADOW_UPDATES)
ROLLBACKS = len(SHADOW_UPDATES) - COMMITS
CASES = [
    *[(point, n) for point in PREPARE_POINTS for n in (1, 3, len(SHADOW_UPDATES))],
    *[("shadow_after_flip", n) for n in (1, 2, COMMITS)],
    *[("shadow_after_rollback", n) for n in range(1, ROLLBACKS + 1)],
]


@dataclass(frozen=True)
class Expected:
    committed: bytes
    prepared_xid: int | None
    update: ShadowUpdate


def expected_after_kill(point: str, n: int, cut: bool = False) -> Expected:
    """Walk the driver's schedule, counting passes as crashpoints.py does (``cut``: the power
    cut after the kill drops the header write the point comes after)."""
    passes: Counter[str] = Counter()
    committed = INITIAL_PAYLOAD

    def hit(name: str) -> bool:
        passes[name] += 1
        return name == point and passes[name] == n

    for update in SHADOW_UPDATES:
        if hit("shadow_after_spare_write"):
            return Expected(committed, None, update)
        if hit("shadow_after_prepare"):
            return Expected(committed, update.xid, update)
        if update.commit:
            if hit("shadow_after_flip"):  # flipped in the page cache: kill -9 keeps it
                return (
                    Expected(committed, update.xid, update)
                    if cut
                    else Expected(update.payload, None, update)
                )
            committed = update.payload
        elif hit("shadow_after_rollback"):
            return Expected(committed, update.xid if cut else None, update)
    raise AssertionError(f"{point}:{n} is never reached by the schedule")


def new_state_file(folder: Path) -> Path:
    path = folder / "state"
    ShadowStateFile.create(path, initial=INITIAL_PAYLOAD).close()
    return path


def test_every_shadow_crash_point_has_a_case() -> None:
    registered = {name for name in POINTS if name.startswith("shadow_")}
    assert registered == {point for point, _ in CASES}


def test_the_schedule_without_a_crash_ends_at_the_last_committed_update(tmp_path: Path) -> None:
    path = new_state_file(tmp_path)
    result = run_driver("shadow", path)
    assert result.returncode == 0, result.stderr
    last = [update for update in SHADOW_UPDATES if update.commit][-1]
    with ShadowStateFile.open(path) as state:
        assert (state.read(), state.recover()) == (last.payload, None)


@pytest.mark.parametrize("ground", CUT_MODES, indirect=True)
@pytest.mark.parametrize(("point", "n"), CASES, ids=[f"{p}:{n}" for p, n in CASES])
def test_kill_at_a_shadow_crash_point_leaves_a_committed_state(
    ground: Ground, point: str, n: int
) -> None:
    folder = ground.folder("shadow")
    folder.mkdir()
    path = new_state_file(folder)
    ground.settle()
    result = run_driver("shadow", path, f"{point}:{n}")
    assert result.returncode == -signal.SIGKILL, result.stderr
    ground.crash()
    expected = expected_after_kill(point, n, ground.cutting)

    with ShadowStateFile.open(path) as state:
        assert not state.header_recovered
        assert state.read() == expected.committed
        assert state.recover() == expected.prepared_xid
        final = expected.committed
        if expected.prepared_xid is not None:  # the coordinator resolves it (WL#3970)
            if expected.update.commit:
                state.commit(expected.prepared_xid)
                final = expected.update.payload
            else:
                state.rollback(expected.prepared_xid)
        assert (state.read(), state.recover()) == (final, None)
        state.prepare(99, b"after the crash")
        state.commit(99)

    with ShadowStateFile.open(path) as state:
        assert (state.read(), state.recover()) == (b"after the crash", None)


@pytest.mark.parametrize("ground", CUT_MODES, indirect=True)
@pytest.mark.parametrize(
    "point", ["durable_after_temp_write", "durable_after_temp_fsync", "durable_after_rename"]
)
def test_kill_during_create_leaves_no_file_or_a_whole_one(ground: Ground, point: str) -> None:
    folder = ground.folder("create")
    folder.mkdir()
    ground.settle()
    path = folder / "state"
    result = run_driver("shadow-create", path, f"{point}:1")
    assert result.returncode == -signal.SIGKILL, result.stderr
    ground.crash()
    if point == "durable_after_rename" and not ground.cutting:
        with ShadowStateFile.open(path) as state:
            assert (state.read(), state.recover()) == (INITIAL_PAYLOAD, None)
        return
    assert not path.exists()  # only the temp file; creating again overwrites it
    ShadowStateFile.create(path, initial=b"second try").close()
    with ShadowStateFile.open(path) as state:
        assert state.read() == b"second try"
