"""Byte-level tests of the replication client's packets, framing, reader and event checks.

The MariaDB packets are also exercised against a real server in
tests/integration/test_source_client.py. MySQL 8 cannot run here (no MySQL server package is
installed or reachable), so COM_BINLOG_DUMP_GTID and the GTID set encoding are checked against
the layout the MySQL protocol documentation gives -- ``int<1> 0x1e, int<2> flags, int<4>
server_id, int<4> name_len, name, int<8> pos, int<4> data_len, data`` with data = ``int<8> n_sids,
{16-byte uuid, int<8> n_intervals, {int<8> start, int<8> end (exclusive)}}`` -- and against
binlake's own decoder of PREVIOUS_GTIDS events, which carry the same set encoding.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from binlake.binlog.codec import encode_event
from binlake.binlog.constants import ChecksumAlg, EventType
from binlake.binlog.events import (
    HeartbeatEvent,
    PreviousGtidsEvent,
    RotateEvent,
    XidEvent,
    decode_control,
)
from binlake.errors import (
    ChecksumMismatchError,
    SourceConfigError,
    SourceConnectionLostError,
    SourceProtocolError,
)
from binlake.source import packets
from binlake.source.event_check import EventChecker
from binlake.source.packets import (
    MAX_PACKET_CHUNK,
    PacketEncodingError,
    decode_err_packet,
    encode_binlog_dump,
    encode_binlog_dump_gtid,
    encode_mysql_gtid_set,
    encode_register_slave,
    frame_packet,
    is_eof_packet,
    mariadb_session_statements,
    mysql_session_statements,
    parse_packet_header,
)
from binlake.source.wire import PacketReader
from binlog_builder import MARIADB_CTX

UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "5ad4c2b8-9b3c-11ee-8c90-0242ac120002"


def u(n: int, value: int) -> bytes:
    return value.to_bytes(n, "little")


# ---- COM_REGISTER_SLAVE ----------------------------------------------------------------------


def test_register_slave_is_command_server_id_three_empty_strings_port_rank_master_id() -> None:
    payload = encode_register_slave(4242)
    assert payload == (
        b"\x15" + u(4, 4242) + b"\x00" + b"\x00" + b"\x00" + u(2, 0) + u(4, 0) + u(4, 0)
    )
    assert frame_packet(payload, 0)[0][:4] == bytes([18, 0, 0, 0])


def test_register_slave_prefixes_each_reported_string_with_its_one_byte_length() -> None:
    payload = encode_register_slave(7, report_host="replica-1", report_port=3307)
    assert payload[5:15] == b"\x09replica-1"
    assert payload[15:17] == b"\x00\x00"  # user, password: empty
    assert payload[17:19] == u(2, 3307)
    assert len(payload) == 1 + 4 + 10 + 1 + 1 + 2 + 4 + 4


def test_register_slave_never_carries_the_connection_password_unless_asked() -> None:
    assert b"secret" not in encode_register_slave(7, report_user="repl")


def test_register_slave_refuses_a_string_longer_than_255_bytes() -> None:
    with pytest.raises(PacketEncodingError, match="report_host"):
        encode_register_slave(7, report_host="h" * 256)


@pytest.mark.parametrize("server_id", [-1, 1 << 32])
def test_register_slave_refuses_a_server_id_outside_four_bytes(server_id: int) -> None:
    with pytest.raises(PacketEncodingError, match="server_id"):
        encode_register_slave(server_id)


# ---- COM_BINLOG_DUMP (file/position) ---------------------------------------------------------


def test_binlog_dump_matches_the_mariadb_documentation_example_byte_for_byte() -> None:
    # MariaDB KB "COM_BINLOG_DUMP": position 0x634, flags 2, server id 10101, mysql-bin.000034.
    documented = bytes.fromhex(
        "1b000000 12 34060000 0200 75270000 6d7973716c2d62696e2e303030303334".replace(" ", "")
    )
    payload = encode_binlog_dump(10101, "mysql-bin.000034", 0x634, 2)
    assert frame_packet(payload, 0)[0] == documented


def test_binlog_dump_file_name_runs_to_the_end_of_the_packet_without_a_nul() -> None:
    payload = encode_binlog_dump(9, "mariadb-bin.000001", 4, 0)
    assert payload.endswith(b"mariadb-bin.000001")
    assert len(payload) == 11 + len("mariadb-bin.000001")


def test_binlog_dump_refuses_a_position_past_four_bytes() -> None:
    with pytest.raises(PacketEncodingError, match="position"):
        encode_binlog_dump(9, "f", 1 << 32, 0)


# ---- MariaDB GTID mode -----------------------------------------------------------------------


def test_mariadb_gtid_mode_sets_checksum_heartbeat_capability_connect_state_and_strict_mode() -> (
    None
):
    assert mariadb_session_statements("CRC32", 2.5, "0-1-100,1-2-7") == [
        "SET @master_binlog_checksum = 'CRC32'",
        "SET @master_heartbeat_period = 2500000000",
        "SET @mariadb_slave_capability = 4",
        "SET @slave_connect_state = '0-1-100,1-2-7'",
        "SET @slave_gtid_strict_mode = 1",
        "SET @slave_gtid_ignore_duplicates = 0",
    ]


def test_mariadb_file_mode_still_declares_gtid_capability_but_no_connect_state() -> None:
    statements = mariadb_session_statements("CRC32", 5.0, None)
    assert "SET @mariadb_slave_capability = 4" in statements
    assert not any("slave_connect_state" in s for s in statements)


def test_mariadb_gtid_dump_packet_is_11_bytes_and_declares_11_the_python_mysql_replication_off_by_one_regression() -> (  # noqa: E501
    None
):
    """python-mysql-replication 1.0.17 declares 14 bytes and sends 15 (its "empty file name"
    is 4 zero bytes, and its count forgets the command byte): the server reads 14, leaves one
    byte unread, and its close then becomes a TCP reset. The server parses COM_BINLOG_DUMP as
    pos = [1:5], flags = [5:7], server_id = [7:11], file name = [11:end of packet]; an empty
    name means the packet is exactly 11 bytes."""
    payload = encode_binlog_dump(77, "", 4, packets.BINLOG_SEND_ANNOTATE_ROWS_EVENT)
    wire, _ = frame_packet(payload, 0)
    declared, seq = parse_packet_header(wire[:4])
    assert (declared, seq) == (11, 0)
    assert len(wire) - 4 == declared == len(payload) == 11
    assert payload[0] == packets.COM_BINLOG_DUMP
    assert int.from_bytes(payload[1:5], "little") == 4
    assert int.from_bytes(payload[5:7], "little") == packets.BINLOG_SEND_ANNOTATE_ROWS_EVENT
    assert int.from_bytes(payload[7:11], "little") == 77
    assert payload[11:] == b""
    python_mysql_replication = (
        struct_pack_i(4 + 2 + 4 + 4) + b"\x12" + u(4, 4) + u(2, 2) + u(4, 77) + b"\0\0\0\0"
    )
    assert parse_packet_header(python_mysql_replication[:4])[0] == 14
    assert len(python_mysql_replication) - 4 == 15  # one byte more than declared
    assert wire != python_mysql_replication


def struct_pack_i(value: int) -> bytes:
    return value.to_bytes(4, "little", signed=True)


@pytest.mark.parametrize(
    "state",
    ["0-1-5'; DROP TABLE x; --", "0-1", "a-b-c", "0-1-5,0-2-6", "0-1-5,", "-1-1-1"],
)
def test_mariadb_connect_state_refuses_anything_but_one_gtid_per_domain(state: str) -> None:
    with pytest.raises(PacketEncodingError):
        mariadb_session_statements("CRC32", 1.0, state)


def test_mariadb_connect_state_ignores_whitespace_and_allows_empty_for_from_the_start() -> None:
    assert packets.normalize_mariadb_gtid_state(" 0-1-5,\n 1-1-9 ") == "0-1-5,1-1-9"
    assert "SET @slave_connect_state = ''" in mariadb_session_statements("CRC32", 1.0, "")


def test_heartbeat_period_is_sent_in_nanoseconds_and_must_be_positive() -> None:
    assert packets.heartbeat_period_ns(0.25) == 250_000_000
    with pytest.raises(PacketEncodingError):
        packets.heartbeat_period_ns(0)


def test_mysql_session_sets_both_master_and_source_variable_spellings() -> None:
    assert mysql_session_statements("CRC32", 1.0) == [
        "SET @master_binlog_checksum = 'CRC32'",
        "SET @source_binlog_checksum = 'CRC32'",
        "SET @master_heartbeat_period = 1000000000",
        "SET @source_heartbeat_period = 1000000000",
    ]


# ---- MySQL 8: GTID sets and COM_BINLOG_DUMP_GTID ----------------------------------------------


def test_gtid_set_encodes_n_sids_uuid_n_intervals_and_half_open_intervals() -> None:
    encoded = encode_mysql_gtid_set(f"{UUID_A}:1-5:11-18")
    assert encoded == (
        u(8, 1)
        + uuid.UUID(UUID_A).bytes
        + u(8, 2)
        + u(8, 1)
        + u(8, 6)  # 1-5 is [1, 6)
        + u(8, 11)
        + u(8, 19)  # 11-18 is [11, 19)
    )
    assert len(encoded) == 8 + 16 + 8 + 2 * 16


def test_gtid_set_single_transaction_is_an_interval_of_one() -> None:
    assert encode_mysql_gtid_set(f"{UUID_A}:7")[-16:] == u(8, 7) + u(8, 8)


def test_empty_gtid_set_is_eight_zero_bytes() -> None:
    assert encode_mysql_gtid_set("") == bytes(8)


def test_gtid_set_merges_and_sorts_intervals_and_repeated_uuids() -> None:
    messy = f"{UUID_A}:11-18:1-5, {UUID_A}:6-10,\n{UUID_B}:3"
    assert encode_mysql_gtid_set(messy) == encode_mysql_gtid_set(f"{UUID_A}:1-18,{UUID_B}:3")


def test_gtid_set_encoding_is_what_previous_gtids_events_carry() -> None:
    text = f"{UUID_A}:1-5:11-18,{UUID_B}:3"
    decoded = decode_control(EventType.PREVIOUS_GTIDS, encode_mysql_gtid_set(text), MARIADB_CTX, 0)
    assert isinstance(decoded, PreviousGtidsEvent)
    assert decoded.text() == text


@pytest.mark.parametrize(
    "text",
    [f"{UUID_A}:tag:1-5", "not-a-uuid:1", f"{UUID_A}", f"{UUID_A}:5-1", f"{UUID_A}:0"],
)
def test_gtid_set_refuses_tags_bad_uuids_and_impossible_intervals(text: str) -> None:
    with pytest.raises(PacketEncodingError):
        encode_mysql_gtid_set(text)


def test_binlog_dump_gtid_follows_the_documented_layout() -> None:
    gtid_set = encode_mysql_gtid_set(f"{UUID_A}:1-5")
    payload = encode_binlog_dump_gtid(4242, gtid_set)
    assert payload == (
        b"\x1e"
        + u(2, packets.BINLOG_THROUGH_GTID)
        + u(4, 4242)
        + u(4, 0)  # file name length: none
        + u(8, 4)  # position
        + u(4, len(gtid_set))
        + gtid_set
    )
    wire, _ = frame_packet(payload, 0)
    assert parse_packet_header(wire[:4]) == (1 + 2 + 4 + 4 + 8 + 4 + 48, 0)


def test_binlog_dump_gtid_with_a_file_name_counts_its_bytes() -> None:
    payload = encode_binlog_dump_gtid(1, bytes(8), file="binlog.000003", position=157)
    assert payload[7:11] == u(4, 13)
    assert payload[11:24] == b"binlog.000003"
    assert payload[24:32] == u(8, 157)


def test_binlog_dump_gtid_without_the_through_gtid_flag_sends_no_gtid_data() -> None:
    payload = encode_binlog_dump_gtid(1, bytes(8), flags=packets.BINLOG_DUMP_NON_BLOCK)
    assert len(payload) == 1 + 2 + 4 + 4 + 8


# ---- framing ---------------------------------------------------------------------------------


def test_small_payload_is_one_packet_with_its_length_and_sequence_id() -> None:
    wire, next_seq = frame_packet(b"abc", 5)
    assert wire == b"\x03\x00\x00\x05abc"
    assert next_seq == 6


def test_payload_of_exactly_0xffffff_bytes_is_followed_by_an_empty_packet() -> None:
    wire, next_seq = frame_packet(b"x" * MAX_PACKET_CHUNK, 0)
    assert wire[:4] == b"\xff\xff\xff\x00"
    assert wire[4 + MAX_PACKET_CHUNK :] == b"\x00\x00\x00\x01"
    assert len(wire) == 4 + MAX_PACKET_CHUNK + 4
    assert next_seq == 2


def test_payload_longer_than_0xffffff_continues_in_a_packet_with_the_next_sequence_id() -> None:
    wire, next_seq = frame_packet(b"y" * (MAX_PACKET_CHUNK + 10), 254)
    assert wire[:4] == b"\xff\xff\xff\xfe"
    assert wire[4 + MAX_PACKET_CHUNK : 8 + MAX_PACKET_CHUNK] == b"\x0a\x00\x00\xff"
    assert len(wire) == 8 + MAX_PACKET_CHUNK + 10
    assert next_seq == 0  # wraps after 255


def test_payload_of_two_full_chunks_ends_with_a_third_empty_packet() -> None:
    wire, next_seq = frame_packet(b"z" * (2 * MAX_PACKET_CHUNK), 0)
    assert len(wire) == 3 * 4 + 2 * MAX_PACKET_CHUNK
    assert wire[-4:] == b"\x00\x00\x00\x02"
    assert next_seq == 3


# ---- replies ---------------------------------------------------------------------------------


def test_error_packet_gives_code_sql_state_and_message() -> None:
    raw = b"\xff" + u(2, 1236) + b"#HY000" + b"Could not find first log file name"
    error = decode_err_packet(raw)
    assert (error.code, error.sql_state, error.message) == (
        1236,
        "HY000",
        "Could not find first log file name",
    )


def test_eof_is_0xfe_with_a_short_payload_only() -> None:
    assert is_eof_packet(b"\xfe\x00\x00\x02\x00")
    assert not is_eof_packet(b"\xfe" + bytes(9))
    assert not is_eof_packet(b"\x00\xfe")


# ---- PacketReader on a real socket pair ------------------------------------------------------


@pytest.fixture
def socket_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def send_in_thread(sock: socket.socket, data: bytes, piece: int | None = None) -> threading.Thread:
    def run() -> None:
        if piece is None:
            sock.sendall(data)
            return
        for i in range(0, len(data), piece):
            sock.sendall(data[i : i + piece])
            time.sleep(0.0005)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_reader_joins_continuation_packets_into_one_payload(
    socket_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = socket_pair
    big = bytes(range(256)) * ((MAX_PACKET_CHUNK + 1000) // 256)
    wire = frame_packet(big, 1)[0] + frame_packet(b"after", 1 + 2)[0]
    writer = send_in_thread(theirs, wire)
    reader = PacketReader(ours, timeout_s=10, buffer_size=1 << 16)
    assert reader.read_packet() == big
    assert reader.read_packet() == b"after"
    writer.join()


def test_reader_returns_a_payload_of_exactly_0xffffff_bytes_after_its_empty_tail(
    socket_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = socket_pair
    exact = b"e" * MAX_PACKET_CHUNK
    writer = send_in_thread(theirs, frame_packet(exact, 1)[0] + frame_packet(b"next", 3)[0])
    reader = PacketReader(ours, timeout_s=10)
    assert reader.read_packet() == exact
    assert reader.read_packet() == b"next"
    writer.join()


def test_reader_reassembles_packets_that_arrive_a_few_bytes_at_a_time(
    socket_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = socket_pair
    payloads = [b"a" * 1, b"b" * 300, b"c" * 5000]
    wire = b"".join(frame_packet(p, 1 + i)[0] for i, p in enumerate(payloads))
    writer = send_in_thread(theirs, wire, piece=7)
    reader = PacketReader(ours, timeout_s=10, buffer_size=4096)
    assert [reader.read_packet() for _ in payloads] == payloads
    writer.join()


def test_reader_refuses_a_packet_with_the_wrong_sequence_id(
    socket_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = socket_pair
    theirs.sendall(frame_packet(b"one", 1)[0] + frame_packet(b"two", 5)[0])
    reader = PacketReader(ours, timeout_s=10)
    assert reader.read_packet() == b"one"
    with pytest.raises(SourceProtocolError, match="sequence id 5, expected 2"):
        reader.read_packet()


def test_reader_reports_a_connection_closed_mid_packet_and_returns_no_part_of_it(
    socket_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = socket_pair
    theirs.sendall(frame_packet(b"whole", 1)[0] + frame_packet(b"x" * 100, 2)[0][:50])
    theirs.shutdown(socket.SHUT_WR)
    reader = PacketReader(ours, timeout_s=10)
    assert reader.read_packet() == b"whole"
    with pytest.raises(SourceConnectionLostError, match="54 byte"):
        reader.read_packet()


def test_reader_times_out_on_a_silent_peer(
    socket_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _theirs = socket_pair
    reader = PacketReader(ours, timeout_s=0.2)
    started = time.monotonic()
    with pytest.raises(SourceConnectionLostError) as caught:
        reader.read_packet()
    assert caught.value.timed_out
    assert 0.15 < time.monotonic() - started < 2


# ---- EventChecker ----------------------------------------------------------------------------


def fde(checksum_alg: int = ChecksumAlg.CRC32) -> bytes:
    ctx = replace(MARIADB_CTX, checksum_alg=checksum_alg)
    return encode_event(ctx, ctx)


def crc_event(payload: XidEvent | RotateEvent | HeartbeatEvent) -> bytes:
    return encode_event(payload, MARIADB_CTX, log_pos=500)


def test_checker_passes_valid_events_and_learns_the_file_from_rotate() -> None:
    checker = EventChecker(negotiated_checksum="CRC32")
    rotate = crc_event(RotateEvent(4, "mariadb-bin.000007"))
    for event in (rotate, fde(), crc_event(XidEvent(9)), crc_event(HeartbeatEvent("x"))):
        assert checker.check(event) is event
    assert checker.file == "mariadb-bin.000007"


def test_checker_raises_on_a_flipped_bit_with_file_and_offset() -> None:
    checker = EventChecker(negotiated_checksum="CRC32")
    checker.check(crc_event(RotateEvent(4, "mariadb-bin.000007")))
    bad = bytearray(crc_event(XidEvent(9)))
    bad[20] ^= 0x01
    with pytest.raises(ChecksumMismatchError) as caught:
        checker.check(bytes(bad))
    assert caught.value.file == "mariadb-bin.000007"
    assert caught.value.offset == 500 - len(bad)
    assert caught.value.event_type == "Xid"


def test_checker_refuses_a_binlog_written_without_checksums() -> None:
    checker = EventChecker(negotiated_checksum="CRC32")
    with pytest.raises(SourceConfigError, match="without event checksums"):
        checker.check(fde(ChecksumAlg.OFF))
    lenient = EventChecker(negotiated_checksum="NONE", allow_unchecksummed=True)
    lenient.check(fde(ChecksumAlg.OFF))
    assert lenient.checksum_alg == ChecksumAlg.OFF


def test_checker_refuses_an_event_whose_size_disagrees_with_its_packet() -> None:
    checker = EventChecker(negotiated_checksum="CRC32")
    event = crc_event(XidEvent(9))
    with pytest.raises(SourceProtocolError, match="declares"):
        checker.check(event + b"\x00")
    with pytest.raises(SourceProtocolError, match="shorter than a header"):
        checker.check(event[:10])


# ---- PacketReader.events: the hot path and its fallbacks --------------------------------------


def dump_wire(
    events: list[bytes], *, first_seq: int = 1, tail: bytes = b"\xfe\x00\x00\x02\x00"
) -> bytes:
    """A dump stream as a server sends it: one OK packet per event, then ``tail`` (EOF)."""
    out, seq = bytearray(), first_seq
    for event in events:
        wire, seq = frame_packet(b"\x00" + event, seq)
        out += wire
    return bytes(out) + frame_packet(tail, seq)[0]


def stream_start() -> list[bytes]:
    rotate = encode_event(RotateEvent(4, "mariadb-bin.000003"), MARIADB_CTX, flags=0x20)
    return [rotate, fde()]


def read_all_events(
    wire: bytes, checker: EventChecker | None = None, *, buffer_size: int = 1 << 16
) -> tuple[list[bytes], bytes, EventChecker]:
    ours, theirs = socket.socketpair()
    try:
        writer = send_in_thread(theirs, wire)
        checker = checker or EventChecker(negotiated_checksum="CRC32")
        events = PacketReader(ours, timeout_s=10, buffer_size=buffer_size).events(checker)
        received: list[bytes] = []
        while True:
            try:
                received.append(next(events))
            except StopIteration as stop:
                writer.join()
                return received, stop.value, checker
    finally:
        ours.close()
        theirs.close()


def test_events_yields_every_event_and_returns_the_eof_packet() -> None:
    body = [crc_event(XidEvent(i)) for i in range(500)] + [crc_event(HeartbeatEvent("f"))]
    events, last, checker = read_all_events(dump_wire(stream_start() + body))
    assert events == [*stream_start(), *body]
    assert is_eof_packet(last)
    assert checker.file == "mariadb-bin.000003"


def test_event_batches_hand_over_every_event_already_read_before_the_next_socket_read() -> None:
    first = [crc_event(XidEvent(i)) for i in range(40)]
    later = [crc_event(XidEvent(100 + i)) for i in range(3)]
    ours, theirs = socket.socketpair()
    with ours, theirs:
        wire = dump_wire([*stream_start(), *first, *later])
        split = len(dump_wire([*stream_start(), *first], tail=b"")) - 4  # without the tail
        theirs.sendall(wire[:split])
        checker = EventChecker(negotiated_checksum="CRC32")
        batches = PacketReader(ours, timeout_s=10).event_batches(checker)
        got = [next(batches), next(batches)]  # the two stateful events: one batch each
        got.append(next(batches))  # no more bytes have arrived: the 40 come before a read
        theirs.sendall(wire[split:])
        rest = list(batches)
    assert got == [stream_start()[:1], stream_start()[1:], first]
    assert [event for batch in rest for event in batch] == later


def test_events_never_yields_an_event_with_a_bad_crc_and_names_where_it_was() -> None:
    good = [crc_event(XidEvent(i)) for i in range(10)]
    bad = bytearray(crc_event(XidEvent(99)))
    bad[-1] ^= 0x80
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(dump_wire([*stream_start(), *good, bytes(bad), *good]))
        events = PacketReader(ours, timeout_s=10).events(EventChecker(negotiated_checksum="CRC32"))
        received = [next(events) for _ in range(2 + len(good))]
        with pytest.raises(ChecksumMismatchError) as caught:
            next(events)
    assert received[2:] == good
    assert caught.value.file == "mariadb-bin.000003"


def test_events_refuses_a_sequence_id_gap_in_the_middle_of_the_stream() -> None:
    head = dump_wire(stream_start(), tail=b"")[:-4]  # drop the framed empty tail
    gap = frame_packet(b"\x00" + crc_event(XidEvent(1)), 9)[0]
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(head + gap)
        events = PacketReader(ours, timeout_s=10).events(EventChecker(negotiated_checksum="CRC32"))
        next(events), next(events)
        with pytest.raises(SourceProtocolError, match="sequence id 9, expected 3"):
            next(events)


def test_events_reassembles_an_event_larger_than_16mb_across_continuation_packets() -> None:
    big = encode_event(HeartbeatEvent("x" * (MAX_PACKET_CHUNK + 5000)), MARIADB_CTX, log_pos=4)
    after = crc_event(XidEvent(1))
    events, last, _ = read_all_events(dump_wire([*stream_start(), big, after]))
    assert events[2:] == [big, after]
    assert is_eof_packet(last)


def test_events_returns_an_error_packet_for_the_caller_to_raise() -> None:
    error = b"\xff" + u(2, 1236) + b"#HY000" + b"Could not find first log file name"
    events, last, _ = read_all_events(dump_wire(stream_start(), tail=error))
    assert len(events) == 2
    assert decode_err_packet(last).code == 1236


def test_events_through_a_tiny_buffer_gives_the_same_events() -> None:
    body = [crc_event(XidEvent(i)) for i in range(200)]
    events, _, _ = read_all_events(dump_wire(stream_start() + body), buffer_size=64)
    assert events == [*stream_start(), *body]
