"""Crash-safe index: the marker file lets recovery finish or undo a create/purge cut by a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.binlog.constants import MAGIC
from binlake.errors import IndexFileError, NoIndexError
from binlake.relay.writer import format_description_event
from binlake.storage.index import LogIndex, Marker, MarkerOp, locate_index, read_index
from binlake.storage.recovery import recover_log
from relay_testing import (
    check_recovered_log,
    folder_hashes,
    gtid_seqs,
    source_log,
    split_events,
    write_relay,
)


def two_file_relay(folder: Path) -> LogIndex:
    """relay-bin.000001 (3 transactions) and relay-bin.000002 (2 more), closed cleanly."""
    events = split_events(source_log(5))
    writer = write_relay(folder, events[:14], close=False)
    writer.rotate()
    for event in events[14:]:
        writer.append(event)
    writer.sync()
    writer.close()
    index = LogIndex(folder / "relay-bin.index")
    assert index.names() == ["relay-bin.000001", "relay-bin.000002"]
    return index


@pytest.fixture
def index(tmp_path: Path) -> LogIndex:
    return two_file_relay(tmp_path)


def header_only_file(path: Path) -> None:
    path.write_bytes(MAGIC + format_description_event(0))


def test_created_file_not_yet_indexed_without_transactions_is_removed(index: LogIndex) -> None:
    new = index.folder / "relay-bin.000003"
    index.write_marker(Marker(MarkerOp.CREATE, (new.name,)))
    header_only_file(new)
    report = recover_log(index.folder)
    assert (
        "index: removed relay-bin.000003 (created but not yet listed; holds no complete "
        "transaction)" in report.lines
    )
    assert not new.exists()
    assert index.names() == ["relay-bin.000001", "relay-bin.000002"]
    check_recovered_log(index.folder)


def test_created_file_not_yet_indexed_holding_a_transaction_is_adopted(index: LogIndex) -> None:
    new = index.folder / "relay-bin.000003"
    index.write_marker(Marker(MarkerOp.CREATE, (new.name,)))
    extra = split_events(source_log(6))
    new.write_bytes(MAGIC + format_description_event(0) + extra[0] + b"".join(extra[-4:]))
    report = recover_log(index.folder)
    assert any(line.startswith("index: adopted relay-bin.000003") for line in report.lines)
    assert index.names() == ["relay-bin.000001", "relay-bin.000002", "relay-bin.000003"]
    check_recovered_log(index.folder)
    assert gtid_seqs(index.folder) == [1, 2, 3, 4, 5, 6]


def test_created_file_already_indexed_only_loses_the_marker(index: LogIndex) -> None:
    index.write_marker(Marker(MarkerOp.CREATE, ("relay-bin.000002",)))
    report = recover_log(index.folder)
    assert "index: relay-bin.000002 was created and listed before the crash" in report.lines
    assert not index.marker_path.exists()
    assert index.names() == ["relay-bin.000001", "relay-bin.000002"]
    check_recovered_log(index.folder)


def test_marker_for_a_file_never_created_is_dropped(index: LogIndex) -> None:
    index.write_marker(Marker(MarkerOp.CREATE, ("relay-bin.000003",)))
    recover_log(index.folder)
    assert not index.marker_path.exists()
    check_recovered_log(index.folder)


def test_purge_cut_before_the_index_update_is_finished(index: LogIndex) -> None:
    index.write_marker(Marker(MarkerOp.PURGE, ("relay-bin.000001",)))
    report = recover_log(index.folder)
    assert "index: finished the interrupted purge of relay-bin.000001" in report.lines
    assert index.names() == ["relay-bin.000002"]
    assert not (index.folder / "relay-bin.000001").exists()
    check_recovered_log(index.folder)


def test_purge_cut_after_the_index_update_is_finished(index: LogIndex) -> None:
    index.write_marker(Marker(MarkerOp.PURGE, ("relay-bin.000001",)))
    index.write_lines(["relay-bin.000002"])
    recover_log(index.folder)
    assert not (index.folder / "relay-bin.000001").exists()
    assert index.names() == ["relay-bin.000002"]
    check_recovered_log(index.folder)


def test_purge_cut_after_the_deletion_only_loses_the_marker(index: LogIndex) -> None:
    index.write_marker(Marker(MarkerOp.PURGE, ("relay-bin.000001",)))
    index.write_lines(["relay-bin.000002"])
    (index.folder / "relay-bin.000001").unlink()
    recover_log(index.folder)
    assert not index.marker_path.exists()
    check_recovered_log(index.folder)


def test_leftover_temp_copy_of_the_index_is_discarded(index: LogIndex) -> None:
    index.temp_path.write_text("relay-bin.000002\n")
    report = recover_log(index.folder)
    assert "index: removed relay-bin.index.tmp (a new version never committed)" in report.lines
    assert index.names() == ["relay-bin.000001", "relay-bin.000002"]
    check_recovered_log(index.folder)


def test_missing_index_is_restored_from_its_temp_copy(index: LogIndex) -> None:
    index.path.replace(index.temp_path)
    assert locate_index(index.folder) == index.path
    recover_log(index.folder)
    assert index.names() == ["relay-bin.000001", "relay-bin.000002"]
    check_recovered_log(index.folder)


def test_dangling_index_entry_without_marker_is_refused_untouched(index: LogIndex) -> None:
    (index.folder / "relay-bin.000001").unlink()
    before = folder_hashes(index.folder)
    with pytest.raises(IndexFileError, match=r"relay-bin\.000001"):
        recover_log(index.folder)
    assert folder_hashes(index.folder) == before


def test_index_listing_a_file_twice_is_refused(index: LogIndex) -> None:
    index.write_lines(["relay-bin.000001", "relay-bin.000002", "relay-bin.000002"])
    with pytest.raises(IndexFileError, match="twice"):
        recover_log(index.folder)


def test_garbage_marker_is_refused(index: LogIndex) -> None:
    index.marker_path.write_text("hello\n")
    with pytest.raises(IndexFileError, match="marker"):
        recover_log(index.folder)


def test_unlisted_newer_files_without_marker_follow_the_same_rule(index: LogIndex) -> None:
    extra = split_events(source_log(6))
    third, fourth = index.folder / "relay-bin.000003", index.folder / "relay-bin.000004"
    third.write_bytes(MAGIC + format_description_event(0) + extra[0] + b"".join(extra[-4:]))
    header_only_file(fourth)
    report = recover_log(index.folder)
    assert index.names()[-1] == "relay-bin.000003"
    assert not fourth.exists()
    assert any("removed relay-bin.000004" in line for line in report.lines)
    check_recovered_log(index.folder)


def test_dry_run_of_an_index_repair_writes_nothing(index: LogIndex) -> None:
    index.write_marker(Marker(MarkerOp.PURGE, ("relay-bin.000001",)))
    index.temp_path.write_text("junk\n")
    before = folder_hashes(index.folder)
    report = recover_log(index.folder, dry_run=True)
    assert "index: would finish the interrupted purge of relay-bin.000001" in report.lines
    assert folder_hashes(index.folder) == before


def test_purge_removes_files_before_up_to(tmp_path: Path) -> None:
    index = three_files(tmp_path)
    removed = index.purge("relay-bin.000003", keep_from="relay-bin.000003")
    assert removed == ["relay-bin.000001", "relay-bin.000002"]
    assert index.names() == ["relay-bin.000003"]
    assert sorted(p.name for p in tmp_path.glob("relay-bin.0*")) == ["relay-bin.000003"]


def test_purge_never_removes_the_checkpoint_file_or_newer(tmp_path: Path) -> None:
    index = three_files(tmp_path)
    assert index.purge("relay-bin.000003", keep_from="relay-bin.000002") == ["relay-bin.000001"]
    assert index.names() == ["relay-bin.000002", "relay-bin.000003"]


def test_purge_never_removes_the_newest_file(tmp_path: Path) -> None:
    index = three_files(tmp_path)
    index.purge("relay-bin.000001", keep_from="relay-bin.000001")
    assert index.names() == ["relay-bin.000001", "relay-bin.000002", "relay-bin.000003"]
    index.purge("relay-bin.000003", keep_from="relay-bin.000003")
    assert index.names() == ["relay-bin.000003"]
    assert index.purge("relay-bin.000003", keep_from="relay-bin.000003") == []


def test_purge_of_a_name_not_in_the_index_is_refused(tmp_path: Path) -> None:
    index = three_files(tmp_path)
    with pytest.raises(IndexFileError):
        index.purge("relay-bin.000009", keep_from="relay-bin.000003")


def three_files(folder: Path) -> LogIndex:
    writer = write_relay(folder, split_events(source_log(2)), close=False)
    writer.rotate()
    writer.rotate()
    writer.close()
    return LogIndex(folder / "relay-bin.index")


# ---- MariaDB/MySQL index files ------------------------------------------------------------


def server_style_folder(folder: Path, lines: list[str]) -> None:
    """Two server-named files and an index whose lines are ``lines``."""
    two_file_relay(folder)
    for n in (1, 2):
        (folder / f"relay-bin.00000{n}").rename(folder / f"mariadb-bin.00000{n}")
    (folder / "relay-bin.index").unlink()
    (folder / "mariadb-bin.index").write_text("".join(f"{line}\n" for line in lines))


def test_relative_dot_slash_lines_are_read_and_kept(tmp_path: Path) -> None:
    server_style_folder(tmp_path, ["./mariadb-bin.000001", "./mariadb-bin.000002"])
    (tmp_path / "mariadb-bin.000003").write_bytes(
        MAGIC + format_description_event(0) + b"".join(split_events(source_log(6))[-4:])
    )
    recover_log(tmp_path)
    assert (tmp_path / "mariadb-bin.index").read_text().splitlines() == [
        "./mariadb-bin.000001",
        "./mariadb-bin.000002",
        "./mariadb-bin.000003",
    ]


def test_absolute_lines_of_a_copied_folder_use_the_copies(tmp_path: Path) -> None:
    elsewhere = tmp_path / "original"
    lines = [f"{elsewhere}/mariadb-bin.000001", f"{elsewhere}/mariadb-bin.000002"]
    copy = tmp_path / "copy"
    copy.mkdir()
    server_style_folder(copy, lines)
    report = recover_log(copy)
    assert any("using the files of the same names in" in line for line in report.lines)
    assert read_index(copy / "mariadb-bin.index")[0] == elsewhere / "mariadb-bin.000001"


def test_absolute_lines_inside_the_folder_are_used_as_they_are(tmp_path: Path) -> None:
    lines = [f"{tmp_path}/mariadb-bin.000001", f"{tmp_path}/mariadb-bin.000002"]
    server_style_folder(tmp_path, lines)
    report = recover_log(tmp_path)
    assert report.lines == ["mariadb-bin.000002: clean"]


def test_folder_without_index_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(NoIndexError):
        recover_log(tmp_path)
