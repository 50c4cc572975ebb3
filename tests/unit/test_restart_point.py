"""The receiver's restart point is derived from the relay log alone (WL#4621): the end of its last
complete transaction, as a source file and offset, and the GTID state there; every relay file
carries enough context to derive it without the files before it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from binlake.binlog.codec import encode_event
from binlake.binlog.constants import EventFlag
from binlake.binlog.events import GtidListEvent, MysqlGtidEvent, PreviousGtidsEvent, XidEvent
from binlake.binlog.format import Flavor
from binlake.errors import LogCorruptionError
from binlake.gtid import MariaGtidState, MysqlGtidSet
from binlake.position import SourcePosition
from binlake.relay.restart import EMPTY, SourceTracker, derive_restart_point
from binlake.relay.writer import RelayLogWriter
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import LogIndex
from binlake.storage.recovery import recover_log
from binlog_builder import MARIADB_CTX, query
from relay_testing import check_recovered_log, crash_leftover
from source_stream import Source, artificial_rotate, file_name, receive_into


def three_file_source() -> Source:
    source = Source()
    source.transactions(5)
    source.rotate()
    source.transactions(4)
    source.rotate()
    source.transactions(3)
    return source


def expected_end(source: Source) -> SourcePosition:
    return SourcePosition(*source.end())


def test_an_empty_or_missing_relay_log_has_no_restart_point(tmp_path: Path) -> None:
    assert derive_restart_point(tmp_path / "relay") is EMPTY
    RelayLogWriter.open(tmp_path / "relay").close()
    point = derive_restart_point(tmp_path / "relay")
    assert point.empty and point.transactions == 0


def test_restart_point_is_the_end_of_the_last_transaction_after_source_rotations(
    tmp_path: Path,
) -> None:
    source = three_file_source()
    receive_into(tmp_path, source.dump_events())
    point = derive_restart_point(tmp_path)
    assert point.position == expected_end(source)
    assert point.flavor is Flavor.MARIADB
    assert point.gtid_state == MariaGtidState.parse("0-1-12")
    assert point.source_server_id == 1


def test_every_relay_file_alone_gives_the_same_restart_point(tmp_path: Path) -> None:
    """Older relay files may be purged: each file's preamble names its source file and GTID
    state, so the files from any one of them on are enough."""
    source = three_file_source()
    relay = tmp_path / "relay"
    receive_into(relay, source.dump_events(), max_file_size=1500)
    names = LogIndex(relay / "relay-bin.index").names()
    assert len(names) >= 5, "the case needs size rotations as well as source rotations"
    full = derive_restart_point(relay)
    for i in range(len(names)):
        copy = tmp_path / f"from{i}"
        copy.mkdir()
        for name in names[i:]:
            shutil.copy(relay / name, copy / name)
        (copy / "relay-bin.index").write_text("".join(f"{n}\n" for n in names[i:]))
        point = derive_restart_point(copy)
        assert (point.position, point.gtid_state) == (full.position, full.gtid_state), names[i]


def test_purged_relay_files_are_not_needed(tmp_path: Path) -> None:
    source = three_file_source()
    writer = receive_into(tmp_path, source.dump_events(), max_file_size=1500, close=False)
    files = writer.files
    writer.purge(files[-2], keep_from=files[-2])
    writer.close()
    assert LogIndex(tmp_path / "relay-bin.index").names()[0] == files[-2]
    point = derive_restart_point(tmp_path)
    assert point.position == expected_end(source)
    assert point.gtid_state == MariaGtidState.parse("0-1-12")


def test_each_relay_file_starts_with_a_rotate_and_gtid_list_preamble(tmp_path: Path) -> None:
    source = three_file_source()
    receive_into(tmp_path, source.dump_events(), max_file_size=1500)
    for name in LogIndex(tmp_path / "relay-bin.index").names()[1:]:
        with (tmp_path / name).open("rb") as f, BinlogFileReader(f, name) as reader:
            events = list(reader.events())
        kinds = [e.type_name for e in events[:4]]
        assert kinds == ["Format_desc", "Format_desc", "Rotate", "Gtid_list"], name
        assert events[2].header.flags & EventFlag.ARTIFICIAL
        assert events[2].header.log_pos == 0 and events[3].header.log_pos == 0


def test_a_torn_tail_is_trimmed_and_the_restart_point_is_before_it(tmp_path: Path) -> None:
    source = Source()
    source.transactions(6)
    events = source.dump_events()
    receive_into(tmp_path, events)
    newest = tmp_path / LogIndex(tmp_path / "relay-bin.index").names()[-1]
    before = derive_restart_point(tmp_path)
    more = Source()
    more.transactions(7)
    partial = more.file_events(1)[-4]  # an event of transaction 7
    crash_leftover(newest, partial[: len(partial) // 2])
    recover_log(tmp_path)
    check_recovered_log(tmp_path)
    assert derive_restart_point(tmp_path) == before


def test_a_transaction_cut_by_a_dropped_connection_is_not_part_of_the_restart_point(
    tmp_path: Path,
) -> None:
    source = Source()
    source.transactions(3)
    events = source.dump_events()
    writer = receive_into(tmp_path, events[:-2], close=False)  # transaction 3 without its end
    assert writer.in_transaction
    writer.close()  # inside a transaction: IN_USE stays set
    recover_log(tmp_path)
    point = derive_restart_point(tmp_path)
    assert point.gtid_state == MariaGtidState.parse("0-1-2")
    third = source.files[0].offsets[-4]  # where transaction 3 (GTID, 2 queries, XID) starts
    assert point.position == SourcePosition(file_name(1), third)


def test_a_restart_continues_in_a_new_relay_file_with_the_same_restart_point(
    tmp_path: Path,
) -> None:
    source = Source()
    source.transactions(4)
    receive_into(tmp_path, source.dump_events())
    point = derive_restart_point(tmp_path)
    RelayLogWriter.open(tmp_path, preamble=SourceTracker(point).context_events).close()
    again = derive_restart_point(tmp_path)
    assert (again.position, again.gtid_state) == (point.position, point.gtid_state)


def test_a_dump_by_gtid_replaying_the_file_header_never_moves_the_restart_point_back(
    tmp_path: Path,
) -> None:
    """MariaDB restarts a GTID dump at the top of the file: ROTATE to offset 4, the file's
    FORMAT_DESCRIPTION and its (older) GTID_LIST again, then a GTID_LIST at the real offset. A
    relay rotation (or a crash) in the middle of that must not lose the position."""
    source = Source()
    source.transactions(5)
    receive_into(tmp_path, source.dump_events())
    point = derive_restart_point(tmp_path)
    log = source.files[0]
    header = source.file_events(1)[:2]  # FORMAT_DESCRIPTION, GTID_LIST (empty)
    replay = [artificial_rotate(file_name(1), 4), *header]
    fake_list = encode_event(
        GtidListEvent(((0, 1, 5),), 0), MARIADB_CTX, server_id=1, log_pos=len(log.buf)
    )
    receive_into(tmp_path, replay, max_file_size=1)  # rotates after every sync
    mid = derive_restart_point(tmp_path)
    assert (mid.position, mid.gtid_state) == (point.position, point.gtid_state)
    receive_into(tmp_path, [fake_list], max_file_size=1)
    assert derive_restart_point(tmp_path).position == point.position


def test_relay_files_without_any_source_context_are_refused(tmp_path: Path) -> None:
    source = Source()
    source.transactions(2)
    writer = RelayLogWriter.open(tmp_path)  # no preamble, no artificial ROTATE
    for event in source.file_events(1):
        writer.append(event)
    writer.close()
    with pytest.raises(LogCorruptionError, match="no event naming their source binlog file"):
        derive_restart_point(tmp_path)


def test_mysql_gtid_sets_are_tracked_from_previous_gtids(tmp_path: Path) -> None:
    sid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    previous = MysqlGtidSet.parse(f"{sid}:1-10")
    ctx = MARIADB_CTX
    stream = [
        artificial_rotate("binlog.000003", 4),
        encode_event(ctx, ctx, log_pos=256),
        encode_event(PreviousGtidsEvent(previous.sets()), ctx, log_pos=300),
    ]
    pos = 300
    for gno in (11, 12):
        gtid = MysqlGtidEvent(0, previous.sets()[0][0], gno, 0, 0, b"")
        for payload in (gtid, query("BEGIN"), query("INSERT INTO t VALUES (1)"), XidEvent(gno)):
            size = len(encode_event(payload, ctx))
            pos += size
            stream.append(encode_event(payload, ctx, log_pos=pos))
    receive_into(tmp_path, stream, max_file_size=600)
    point = derive_restart_point(tmp_path)
    assert point.flavor is Flavor.MYSQL
    assert point.position == SourcePosition("binlog.000003", pos)
    assert point.gtid_state == MysqlGtidSet.parse(f"{sid}:1-12")
