"""recover_log on relay folders: WL#5493's four torn tails are trimmed, everything else refused."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from binlake.binlog.constants import HEADER_LEN
from binlake.binlog.errors import OrphanEventError
from binlake.errors import DuplicateTransactionError, IndexFileError, LogCorruptionError
from binlake.storage.index import LogIndex
from binlake.storage.recovery import recover_log
from relay_testing import (
    check_recovered_log,
    crash_leftover,
    folder_hashes,
    gtid_seqs,
    source_log,
    split_events,
    write_relay,
)

HEADER_EVENTS = 2  # the source's FORMAT_DESCRIPTION and Gtid_list
TX_EVENTS = 4  # GTID, two statements, XID


@dataclass
class Relay:
    folder: Path
    path: Path
    clean: bytes  # the file after a clean close with the complete transactions
    tail_tx: list[bytes]  # the events of one more transaction, for tails
    events: list[bytes]

    @property
    def name(self) -> str:
        return self.path.name


def make_relay(folder: Path, complete: int = 3) -> Relay:
    events = split_events(source_log(complete + 1))
    cut = HEADER_EVENTS + complete * TX_EVENTS
    write_relay(folder, events[:cut])
    path = folder / "relay-bin.000001"
    return Relay(folder, path, path.read_bytes(), events[cut:], events)


@pytest.fixture
def relay(tmp_path: Path) -> Relay:
    return make_relay(tmp_path / "relay")


def assert_trimmed_to_clean(relay: Relay, line: str, events: int) -> None:
    assert relay.path.read_bytes() == relay.clean
    expected = (
        rf"^trimmed \d+ bytes \({events} events\) from {relay.name} "
        rf"at offset {len(relay.clean)}: .*IN_USE flag cleared$"
    )
    assert re.match(expected, line), line
    check_recovered_log(relay.folder)


def test_torn_header_at_tail_is_trimmed(relay: Relay) -> None:
    gtid, first, second, _xid = relay.tail_tx
    crash_leftover(relay.path, gtid + first + second[:10])
    report = recover_log(relay.folder)
    assert_trimmed_to_clean(relay, report.lines[0], events=3)
    assert report.trims[0].removed_bytes == len(gtid + first) + 10


def test_garbage_header_at_tail_is_trimmed(relay: Relay) -> None:
    gtid = relay.tail_tx[0]
    crash_leftover(relay.path, gtid + b"\x33" * 40)
    report = recover_log(relay.folder)
    assert_trimmed_to_clean(relay, report.lines[0], events=2)


def test_header_with_impossible_length_at_tail_is_trimmed(relay: Relay) -> None:
    gtid, first = relay.tail_tx[:2]
    bad = bytearray(first)
    bad[9:13] = (5).to_bytes(4, "little")  # event_size smaller than a header
    crash_leftover(relay.path, gtid + bytes(bad))
    report = recover_log(relay.folder)
    assert_trimmed_to_clean(relay, report.lines[0], events=2)


def test_torn_body_at_tail_is_trimmed(relay: Relay) -> None:
    gtid, first = relay.tail_tx[:2]
    crash_leftover(relay.path, gtid + first[: HEADER_LEN + 7])
    report = recover_log(relay.folder)
    assert_trimmed_to_clean(relay, report.lines[0], events=2)


def test_garbage_body_at_tail_is_trimmed(relay: Relay) -> None:
    gtid, first = relay.tail_tx[:2]
    garbage = first[:HEADER_LEN] + b"\x33" * (len(first) - HEADER_LEN)
    crash_leftover(relay.path, gtid + garbage)
    report = recover_log(relay.folder)
    assert_trimmed_to_clean(relay, report.lines[0], events=2)


def test_crc_mismatch_inside_the_last_transaction_is_trimmed(relay: Relay) -> None:
    gtid, first, second, xid = relay.tail_tx
    damaged = bytearray(first)
    damaged[HEADER_LEN + 20] ^= 0x10
    crash_leftover(relay.path, gtid + bytes(damaged) + second + xid)
    report = recover_log(relay.folder)
    assert_trimmed_to_clean(relay, report.lines[0], events=4)
    assert "inside the last transaction" in report.lines[0]


def test_damaged_gtid_of_the_last_transaction_is_trimmed(relay: Relay) -> None:
    gtid, first, second, xid = relay.tail_tx
    damaged = bytearray(gtid)
    damaged[HEADER_LEN + 2] ^= 0x01
    crash_leftover(relay.path, bytes(damaged) + first + second + xid)
    assert_trimmed_to_clean(relay, recover_log(relay.folder).lines[0], events=4)


def test_file_ending_inside_a_transaction_is_trimmed(relay: Relay) -> None:
    gtid, first, second, _xid = relay.tail_tx
    crash_leftover(relay.path, gtid + first + second)
    assert_trimmed_to_clean(relay, recover_log(relay.folder).lines[0], events=3)


def test_clean_file_with_in_use_set_only_gets_the_flag_cleared(relay: Relay) -> None:
    crash_leftover(relay.path)
    report = recover_log(relay.folder)
    assert report.lines == [f"{relay.name}: clean; IN_USE flag cleared"]
    assert relay.path.read_bytes() == relay.clean


def test_cleanly_closed_log_needs_nothing(relay: Relay) -> None:
    before = folder_hashes(relay.folder)
    report = recover_log(relay.folder)
    assert report.lines == [f"{relay.name}: clean"]
    assert not report.changed
    assert folder_hashes(relay.folder) == before


def test_recovery_is_idempotent(relay: Relay) -> None:
    crash_leftover(relay.path, relay.tail_tx[0] + relay.tail_tx[1][:30])
    recover_log(relay.folder)
    after_first = folder_hashes(relay.folder)
    second = recover_log(relay.folder)
    assert second.lines == [f"{relay.name}: clean"]
    assert folder_hashes(relay.folder) == after_first


def test_dry_run_reports_the_trim_and_leaves_every_byte(relay: Relay) -> None:
    crash_leftover(relay.path, relay.tail_tx[0] + relay.tail_tx[1][:30])
    before = folder_hashes(relay.folder)
    report = recover_log(relay.folder, dry_run=True)
    assert report.lines[0].startswith("would trim ")
    assert report.lines[0].endswith("would clear the IN_USE flag")
    assert folder_hashes(relay.folder) == before


def test_corruption_before_the_last_transaction_is_refused_naming_file_and_offset(
    relay: Relay,
) -> None:
    data = bytearray(relay.clean)
    second_tx_query = len(relay.clean) - sum(len(e) for e in relay.events[6:14]) + 40
    data[second_tx_query] ^= 0x04
    relay.path.write_bytes(bytes(data))
    crash_leftover(relay.path, relay.tail_tx[0])
    before = folder_hashes(relay.folder)
    with pytest.raises(LogCorruptionError) as info:
        recover_log(relay.folder)
    assert info.value.file == relay.name
    assert info.value.offset is not None and info.value.offset <= second_tx_query
    assert "before the last transaction" in info.value.message
    assert folder_hashes(relay.folder) == before


def test_damage_followed_by_a_complete_transaction_is_corruption(tmp_path: Path) -> None:
    relay = make_relay(tmp_path / "relay", complete=2)
    events = split_events(source_log(4))
    tx3, tx4 = events[10:14], events[14:18]
    damaged = bytearray(tx3[1])
    damaged[HEADER_LEN + 5] ^= 0x01
    crash_leftover(relay.path, tx3[0] + bytes(damaged) + b"".join(tx3[2:] + tx4))
    before = folder_hashes(relay.folder)
    with pytest.raises(LogCorruptionError):
        recover_log(relay.folder)
    assert folder_hashes(relay.folder) == before


def test_orphan_xid_is_refused(relay: Relay) -> None:
    xid = relay.tail_tx[3]
    crash_leftover(relay.path, xid + b"".join(relay.tail_tx))
    before = folder_hashes(relay.folder)
    with pytest.raises(OrphanEventError) as info:
        recover_log(relay.folder)
    assert info.value.file == relay.name
    assert info.value.offset == len(relay.clean)
    assert folder_hashes(relay.folder) == before


def test_duplicate_gtid_is_refused(relay: Relay) -> None:
    second_tx = b"".join(relay.events[6:10])  # seq 2 again
    crash_leftover(relay.path, second_tx)
    before = folder_hashes(relay.folder)
    with pytest.raises(DuplicateTransactionError) as info:
        recover_log(relay.folder)
    assert info.value.offset == len(relay.clean)
    assert "0-1-2" in info.value.message
    assert folder_hashes(relay.folder) == before


def rotated_relay(folder: Path) -> list[Path]:
    """Three files of whole transactions (rotation by size at each sync)."""
    events = split_events(source_log(12))
    writer = write_relay(folder, [], max_file_size=600, close=False)
    for event in events:
        writer.append(event)
        if not writer.in_transaction:
            writer.sync()
    writer.close()
    return [folder / name for name in LogIndex(folder / "relay-bin.index").names()]


def test_torn_tail_in_an_older_in_use_file_is_corruption(tmp_path: Path) -> None:
    files = rotated_relay(tmp_path)
    assert len(files) >= 3
    crash_leftover(files[0], b"\x33" * 10)
    before = folder_hashes(tmp_path)
    with pytest.raises(LogCorruptionError) as info:
        recover_log(tmp_path)
    assert info.value.file == files[0].name
    assert "not the newest" in info.value.message
    assert folder_hashes(tmp_path) == before


def test_damage_in_an_older_file_is_found_when_scanning_from_the_checkpoint(
    tmp_path: Path,
) -> None:
    files = rotated_relay(tmp_path)
    data = bytearray(files[1].read_bytes())
    data[-10] ^= 0x01
    files[1].write_bytes(bytes(data))
    assert recover_log(tmp_path, dry_run=True).lines == [f"{files[-1].name}: clean"]
    with pytest.raises(LogCorruptionError) as info:
        recover_log(tmp_path, scan_from=files[0].name)
    assert info.value.file == files[1].name


def test_scan_from_must_name_an_indexed_file(tmp_path: Path) -> None:
    rotated_relay(tmp_path)
    with pytest.raises(IndexFileError):
        recover_log(tmp_path, scan_from="relay-bin.000099")


def test_newest_file_without_a_whole_format_description_is_removed(tmp_path: Path) -> None:
    files = rotated_relay(tmp_path)
    newest = files[-1]
    newest.write_bytes(newest.read_bytes()[:30])
    seqs = gtid_seqs(tmp_path)
    report = recover_log(tmp_path)
    assert f"removed {newest.name}: it holds no complete format description" in report.lines[0]
    assert not newest.exists()
    assert LogIndex(tmp_path / "relay-bin.index").names() == [f.name for f in files[:-1]]
    check_recovered_log(tmp_path)
    assert gtid_seqs(tmp_path) == seqs


def test_trim_in_a_rotated_log_keeps_older_files_and_the_order(tmp_path: Path) -> None:
    files = rotated_relay(tmp_path)
    before = {f.name: f.read_bytes() for f in files[:-1]}
    extra = split_events(source_log(13))[-4:]
    crash_leftover(files[-1], extra[0] + extra[1][:25])
    recover_log(tmp_path)
    check_recovered_log(tmp_path)
    assert {f.name: f.read_bytes() for f in files[:-1]} == before
    assert gtid_seqs(tmp_path) == list(range(1, 13))


def test_damaged_format_description_in_front_of_valid_events_is_corruption(
    relay: Relay,
) -> None:
    data = bytearray(relay.clean)
    data[4 + 9 : 4 + 13] = (0x33333333).to_bytes(4, "little")  # FDE size runs past the end
    relay.path.write_bytes(bytes(data))
    before = folder_hashes(relay.folder)
    with pytest.raises(LogCorruptionError):
        recover_log(relay.folder)
    assert folder_hashes(relay.folder) == before


def test_foreign_file_as_the_newest_file_is_refused_not_removed(relay: Relay) -> None:
    stranger = relay.folder / "relay-bin.000002"
    stranger.write_bytes(b"hello, I am not a binlog\n")
    (relay.folder / "relay-bin.index").write_text("relay-bin.000001\nrelay-bin.000002\n")
    with pytest.raises(LogCorruptionError):
        recover_log(relay.folder)
    assert stranger.exists()


def test_newest_file_with_only_the_magic_is_removed(relay: Relay) -> None:
    (relay.folder / "relay-bin.000002").write_bytes(b"\xfebin")
    (relay.folder / "relay-bin.index").write_text("relay-bin.000001\nrelay-bin.000002\n")
    recover_log(relay.folder)
    check_recovered_log(relay.folder)
    assert not (relay.folder / "relay-bin.000002").exists()
