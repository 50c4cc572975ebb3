"""Properties of the shadow-page state file under simulated power loss and under bit rot.

Power loss is simulated by cutting the file back to what the disk may hold after a crash in any
fsync window of an operation: the writes made since the last fsync may each have reached the
disk or not, sector by sector, and a sector may be torn (a prefix of the new bytes, or garbage).
The windows follow the protocol in ``binlake.storage.shadow``: prepare writes the spare page
(window 1) and, after an fsync, the header (window 2); commit and rollback write the header.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.errors import StateFileError
from binlake.storage.shadow import HEADER_SIZE, REGION, ShadowStateFile, page_offset

SECTOR = 512
PAYLOADS = st.binary(max_size=600) | st.binary(min_size=REGION - 100, max_size=REGION - 24)


@dataclass(frozen=True)
class Update:
    payload: bytes
    commit: bool


UPDATES = st.lists(st.builds(Update, PAYLOADS, st.booleans()), min_size=1, max_size=5)
#: A sector after a crash: old, new, torn (a prefix of the new bytes), or garbage.
SECTOR_FATES = st.one_of(
    st.just(("old", 0)),
    st.just(("new", 0)),
    st.tuples(st.just("torn"), st.integers(min_value=1, max_value=SECTOR - 1)),
    st.tuples(st.just("garbage"), st.integers(min_value=0, max_value=255)),
)


def crash_image(old: bytes, new: bytes, region: tuple[int, int], data: st.DataObject) -> bytes:
    """``old`` with the sectors of ``region`` that changed in ``new`` at a drawn fate each."""
    image = bytearray(old)
    start, end = region
    for sector in range(start, end, SECTOR):
        stop = min(sector + SECTOR, end)
        if old[sector:stop] == new[sector:stop]:
            continue
        fate, k = data.draw(SECTOR_FATES)
        if fate == "new":
            image[sector:stop] = new[sector:stop]
        elif fate == "torn":
            image[sector : sector + k] = new[sector : sector + k]
        elif fate == "garbage":
            image[sector:stop] = bytes([k]) * (stop - sector)
    return bytes(image)


def header_region() -> tuple[int, int]:
    return (0, SECTOR)


def page_region(index: int) -> tuple[int, int]:
    return (page_offset(index, REGION), page_offset(index, REGION) + REGION)


def reopen(path: Path, image: bytes) -> ShadowStateFile:
    path.write_bytes(image)
    return ShadowStateFile.open(path)


@dataclass(frozen=True)
class CrashedUpdate:
    """The update a crash interrupts, with the file's bytes around its fsync windows."""

    xid: int
    update: Update
    committed_before: bytes
    before: bytes  # durable when the update starts
    prepared: bytes  # after prepare returned
    after: bytes  # after commit or rollback returned

    @property
    def spare(self) -> int:
        return 1 - self.before[10]


def run_until_crash(path: Path, updates: list[Update], crash_at: int) -> CrashedUpdate:
    """Run updates in full up to and including the crashed one, keeping its snapshots."""
    committed = b"initial"
    with ShadowStateFile.create(path, initial=committed) as state:
        for xid, update in enumerate(updates[: crash_at + 1], start=1):
            before = path.read_bytes()
            state.prepare(xid, update.payload)
            prepared = path.read_bytes()
            (state.commit if update.commit else state.rollback)(xid)
            snapshots = CrashedUpdate(xid, update, committed, before, prepared, path.read_bytes())
            committed = update.payload if update.commit else committed
    return snapshots


def image_after_crash(
    crashed: CrashedUpdate, window: str, data: st.DataObject
) -> tuple[bytes, set[tuple[bytes, int | None]]]:
    """What the disk may hold after a crash in ``window``, and the (read, recover) allowed."""
    old, xid = crashed.committed_before, crashed.xid
    if window == "spare page":
        region = page_region(crashed.spare)
        return crash_image(crashed.before, crashed.prepared, region, data), {(old, None)}
    if window == "prepare header":
        spare_durable = crashed.before[:SECTOR] + crashed.prepared[SECTOR:]
        image = crash_image(spare_durable, crashed.prepared, header_region(), data)
        return image, {(old, None), (old, xid)}
    resolved = crashed.update.payload if crashed.update.commit else old
    image = crash_image(crashed.prepared, crashed.after, header_region(), data)
    return image, {(old, xid), (resolved, None)}


@settings(max_examples=300, deadline=None)
@given(
    updates=UPDATES,
    crash_at=st.integers(min_value=0, max_value=4),
    window=st.sampled_from(["spare page", "prepare header", "commit or rollback header"]),
    data=st.data(),
)
def test_a_crash_in_any_write_window_leaves_a_committed_state(
    updates: list[Update], crash_at: int, window: str, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "state"
        crashed = run_until_crash(path, updates, min(crash_at, len(updates) - 1))
        image, allowed = image_after_crash(crashed, window, data)
        with reopen(path, image) as state:
            committed, prepared = state.read(), state.recover()
            assert (committed, prepared) in allowed
            if prepared is not None and crashed.update.commit and window.startswith("commit"):
                state.commit(prepared)  # the coordinator had decided to commit: commit_by_xid
                committed = crashed.update.payload
            elif prepared is not None:
                state.rollback(prepared)  # prepare never returned, or rollback was decided
            assert (state.read(), state.recover()) == (committed, None)
            state.prepare(1000, b"after the crash")
            state.commit(1000)
        with ShadowStateFile.open(path) as state:
            assert (state.read(), state.recover()) == (b"after the crash", None)
            assert not state.header_recovered


@settings(max_examples=300, deadline=None)
@given(
    updates=UPDATES,
    stop_prepared=st.booleans(),
    position=st.integers(min_value=0, max_value=3 * REGION - 1),
    bit=st.integers(min_value=0, max_value=7),
)
def test_a_flipped_bit_never_yields_a_state_that_was_not_committed(
    updates: list[Update], stop_prepared: bool, position: int, bit: int
) -> None:
    """Bit rot is refused with a typed error, or harmless, or reported: when an older committed
    state is read, ``recover()`` names the XID of the newer page (the torn-header rule)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "state"
        history = [b"initial"]
        with ShadowStateFile.create(path, initial=history[0]) as state:
            for xid, update in enumerate(updates, start=1):
                state.prepare(xid, update.payload)
                if update.commit:
                    state.commit(xid)
                    history.append(update.payload)
                else:
                    state.rollback(xid)
            if stop_prepared:
                state.prepare(len(updates) + 1, b"prepared only")
        raw = bytearray(path.read_bytes())
        raw[position] ^= 1 << bit
        path.write_bytes(bytes(raw))
        try:
            state = ShadowStateFile.open(path)
        except StateFileError as error:
            assert error.hint and error.file == str(path)
            return
        with state:
            pending = len(updates) + 1 if stop_prepared else None
            if state.read() == history[-1] and state.recover() == pending:
                return  # the flip hit bytes outside every CRC, or an unused page
            # Otherwise only the torn-header fallback may answer, and it must say so.
            assert position < HEADER_SIZE
            assert state.header_recovered
            assert state.read() in history
            assert state.recover() is not None
