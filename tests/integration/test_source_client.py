"""The replication client against a real MariaDB 10.11: what it streams is what the server's
binlog files hold, byte for byte, and every failure arrives as its typed error."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from binlake.binlog.codec import decode_event
from binlake.binlog.constants import HEADER_LEN, MAGIC, ChecksumAlg, EventFlag, EventType
from binlake.binlog.events import MariaGtidEvent, RotateEvent
from binlake.binlog.format import Flavor, FormatContext
from binlake.binlog.header import decode_header
from binlake.cli.main import run as cli_run
from binlake.errors import (
    SourceAuthError,
    SourceConfigError,
    SourceConnectionLostError,
    SourcePositionLostError,
    SourceUnreachableError,
)
from binlake.source import packets
from binlake.source.check import check_source
from binlake.source.client import DumpStart, SourceConnection
from binlake.source.settings import ConnectionSettings
from binlake_dev.sandbox import MariaDBSandbox, free_port
from tcp_proxy import TcpProxy

OUR_SERVER_ID = 4242
BIG_EVENT_BYTES = 20 * 1024 * 1024
#: Before the first FORMAT_DESCRIPTION, events carry the checksum we negotiated (CRC32).
STREAM_CTX = FormatContext.default(ChecksumAlg.CRC32)


def settings_for(
    sandbox: MariaDBSandbox,
    *,
    port: int | None = None,
    user: str = "root",
    password: str = "",
    heartbeat_period_s: float = 5.0,
    server_id: int = OUR_SERVER_ID,
) -> ConnectionSettings:
    return ConnectionSettings(
        host=sandbox.host,
        port=port if port is not None else sandbox.port,
        user=user,
        password=password,
        server_id=server_id,
        connect_timeout_s=5.0,
        heartbeat_period_s=heartbeat_period_s,
    )


def disk_events(path: Path) -> list[tuple[int, bytes]]:
    """(offset, bytes) of every event of a binlog file on disk."""
    data = path.read_bytes()
    assert data[:4] == MAGIC
    out, pos = [], len(MAGIC)
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        out.append((pos, data[pos : pos + size]))
        pos += size
    return out


def is_artificial(event: bytes) -> bool:
    header = decode_header(event)
    return bool(header.flags & EventFlag.ARTIFICIAL) or header.log_pos == 0


def stream_by_file(events: list[bytes]) -> dict[str, list[bytes]]:
    """The real (non-artificial, non-heartbeat) events of a stream, per source file."""
    ctx = STREAM_CTX
    out: dict[str, list[bytes]] = {}
    current = ""
    for event in events:
        decoded = decode_event(event, ctx)
        if isinstance(decoded.payload, FormatContext):
            ctx = decoded.payload
        if isinstance(decoded.payload, RotateEvent) and is_artificial(event):
            current = decoded.payload.next_file
        if is_artificial(event) or decoded.header.type_code == EventType.HEARTBEAT:
            continue
        out.setdefault(current, []).append(event)
        if isinstance(decoded.payload, RotateEvent):
            current = decoded.payload.next_file
    return out


def without_in_use(event: bytes) -> bytes:
    """A FORMAT_DESCRIPTION as the server sends it: IN_USE cleared (the CRC covers it cleared)."""
    if event[4] != EventType.FORMAT_DESCRIPTION:
        return event
    raw = bytearray(event)
    raw[17] &= ~EventFlag.BINLOG_IN_USE & 0xFF
    return bytes(raw)


def dump_all(settings: ConnectionSettings, start: DumpStart) -> list[bytes]:
    with SourceConnection.open(settings) as connection:
        return list(connection.dump(start, non_blocking=True))


def gtid_seq_nos(events: list[bytes]) -> list[int]:
    ctx = STREAM_CTX
    out = []
    for event in events:
        decoded = decode_event(event, ctx)
        if isinstance(decoded.payload, FormatContext):
            ctx = decoded.payload
        elif isinstance(decoded.payload, MariaGtidEvent):
            out.append(decoded.payload.seq_no)
    return out


# ---- a server with a known workload ----------------------------------------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBSandbox]:
    """A private server (big packets allowed) with a workload spread over three binlog files."""
    sandbox = MariaDBSandbox(
        tmp_path_factory.mktemp("source"), extra_args=["--max-allowed-packet=64M"]
    )
    sandbox.start()
    try:
        run_workload(sandbox)
        yield sandbox
    finally:
        sandbox.kill()


def run_workload(sandbox: MariaDBSandbox) -> None:
    sandbox.execute("CREATE DATABASE w")
    sandbox.execute(
        "CREATE TABLE w.item (id INT PRIMARY KEY, label VARCHAR(64), price DECIMAL(10,2), "
        "seen DATETIME(6), body BLOB)"
    )
    with sandbox.connect("w", autocommit=False) as connection, connection.cursor() as cursor:
        for i in range(60):
            cursor.execute(
                "INSERT INTO item VALUES (%s, %s, %s, NOW(6), %s)",
                (i, f"label-{i}-é", i * 1.25, os.urandom(i * 20)),
            )
            if i % 3 == 0:
                cursor.execute("UPDATE item SET label = CONCAT(label, '!') WHERE id < %s", (i,))
            if i % 7 == 0:
                cursor.execute("DELETE FROM item WHERE id = %s", (i - 1,))
            connection.commit()
            if i in (20, 40):
                sandbox.flush_logs()
    sandbox.execute("ALTER TABLE w.item ADD COLUMN note TEXT")


def test_file_position_dump_yields_exactly_the_events_of_the_binlog_files(
    source: MariaDBSandbox,
) -> None:
    files = source.binlog_files()
    assert len(files) >= 3
    streamed = stream_by_file(dump_all(settings_for(source), DumpStart(file=files[0].name)))
    assert list(streamed) == [f.name for f in files]
    for path in files:
        on_disk = [without_in_use(event) for _, event in disk_events(path)]
        assert streamed[path.name] == on_disk, path.name


def test_dump_without_a_file_starts_at_the_oldest_binlog(source: MariaDBSandbox) -> None:
    from_first = dump_all(settings_for(source), DumpStart(file=source.binlog_files()[0].name))
    assert dump_all(settings_for(source), DumpStart()) == from_first


def test_dump_starts_with_an_artificial_rotate_naming_the_file_and_position(
    source: MariaDBSandbox,
) -> None:
    files = source.binlog_files()
    offset, event = disk_events(files[1])[3]
    streamed = dump_all(settings_for(source), DumpStart(file=files[1].name, position=offset))
    rotate = decode_event(streamed[0], STREAM_CTX)
    assert rotate.header.is_artificial
    assert rotate.payload == RotateEvent(offset, files[1].name)
    assert decode_header(streamed[1]).type_code == EventType.FORMAT_DESCRIPTION
    assert decode_header(streamed[1]).log_pos == 0  # not at 4: the FDE is sent for context
    assert streamed[2] == event


def test_gtid_dump_from_a_mid_stream_state_starts_at_the_next_transaction(
    source: MariaDBSandbox,
) -> None:
    files = source.binlog_files()
    all_events = [event for path in files for _, event in disk_events(path)]
    seq_nos = gtid_seq_nos(all_events)
    middle = seq_nos[len(seq_nos) // 2]
    streamed = dump_all(settings_for(source), DumpStart(gtid_state=f"0-1-{middle}"))
    real = [event for event in streamed if not is_artificial(event)]
    assert gtid_seq_nos(real) == [n for n in seq_nos if n > middle]
    first_gtid = next(e for e in real if e[4] == EventType.MARIADB_GTID)
    position = all_events.index(first_gtid)
    tail = real[real.index(first_gtid) :]
    assert tail == [without_in_use(e) for e in all_events[position:]]


def test_event_larger_than_16mb_arrives_whole_and_crc_valid(source: MariaDBSandbox) -> None:
    source.execute("CREATE TABLE w.big (id INT PRIMARY KEY, data LONGBLOB) ENGINE=MyISAM")
    source.flush_logs()
    source.execute(f"INSERT INTO w.big VALUES (1, REPEAT('z', {BIG_EVENT_BYTES}))")
    last = source.binlog_files()[-1]
    streamed = dump_all(settings_for(source), DumpStart(file=last.name))
    big = [e for e in streamed if e[4] == EventType.WRITE_ROWS_V1]
    assert len(big) == 1
    assert len(big[0]) > packets.MAX_PACKET_CHUNK
    on_disk = dict((event, offset) for offset, event in disk_events(last))
    assert big[0] in on_disk  # byte-equal to the file; the client checked its CRC32 on arrival


def test_heartbeats_arrive_while_the_source_is_idle(source: MariaDBSandbox) -> None:
    settings = settings_for(source, heartbeat_period_s=0.2)
    last = source.binlog_files()[-1]
    position = last.stat().st_size
    with SourceConnection.open(settings) as connection:
        stream = connection.dump(DumpStart(file=last.name, position=position))
        started, heartbeats = time.monotonic(), []
        for event in stream:
            header = decode_header(event)
            if event[4] == EventType.HEARTBEAT:
                heartbeats.append((header.log_pos, position))
            else:  # the server may still log an event of its own (a binlog checkpoint)
                position = max(position, header.log_pos)
            if len(heartbeats) == 4:
                break
    elapsed = time.monotonic() - started
    assert 0.6 < elapsed < 5.0  # 4 x 0.2 s; generous for a loaded machine
    assert all(at == expected for at, expected in heartbeats), heartbeats  # where the dump is


def test_non_blocking_gtid_dump_ends_with_a_clean_eof(source: MariaDBSandbox) -> None:
    (pos,) = source.execute("SELECT @@gtid_binlog_pos")[0]
    with SourceConnection.open(settings_for(source)) as connection:
        streamed = list(connection.dump(DumpStart(gtid_state=str(pos)), non_blocking=True))
    assert all(is_artificial(e) or e[4] != EventType.MARIADB_GTID for e in streamed)


def test_a_dump_packet_one_byte_short_makes_the_server_reset_where_ours_closes_cleanly(
    source: MariaDBSandbox,
) -> None:
    """Measured server behaviour behind the python-mysql-replication bug: with one undeclared
    byte left unread, the server's close becomes a TCP reset."""
    sid = OUR_SERVER_ID + 1
    good = packets.frame_packet(packets.encode_binlog_dump(sid, "", 4, 3), 0)[0]
    short = (14).to_bytes(3, "little") + b"\x00\x12" + (4).to_bytes(4, "little")
    short += b"\x03\x00" + sid.to_bytes(4, "little") + b"\x00" * 4
    assert raw_dump_ending(source, good, sid) == "eof"
    assert raw_dump_ending(source, short, sid) == "reset"


def raw_dump_ending(sandbox: MariaDBSandbox, dump_wire: bytes, server_id: int) -> str:
    with sandbox.connect() as connection:
        with connection.cursor() as cursor:
            for statement in packets.mariadb_session_statements("CRC32", 5.0, "0-1-1"):
                cursor.execute(statement)
        sock: socket.socket = connection._sock  # type: ignore[attr-defined]
        sock.sendall(packets.frame_packet(packets.encode_register_slave(server_id), 0)[0])
        sock.recv(64)
        sock.sendall(dump_wire)
        time.sleep(0.5)  # let the server finish and close
        sock.settimeout(10)
        try:
            while sock.recv(1 << 16):
                pass
        except ConnectionResetError:
            return "reset"
        finally:
            connection._force_close()  # type: ignore[attr-defined]
        return "eof"


def test_server_info_describes_the_source(source: MariaDBSandbox) -> None:
    with SourceConnection.open(settings_for(source)) as connection:
        server = connection.server
    assert server.flavor is Flavor.MARIADB
    assert server.server_id == 1
    assert server.version.startswith("10.11")
    assert server.gtid_binlog_pos == source.execute("SELECT @@gtid_binlog_pos")[0][0]
    assert [name for name, _ in server.binlog_files] == [p.name for p in source.binlog_files()]
    assert server.variables["binlog_row_metadata"] == "FULL"


# ---- refusals and failures -------------------------------------------------------------------


def test_dump_from_a_purged_binlog_is_position_lost_with_the_server_message(
    sandbox_factory: Callable[..., MariaDBSandbox],
) -> None:
    sandbox = sandbox_factory().start()
    first = sandbox.binlog_files()[0].name
    sandbox.purge_binlogs()
    assert first not in [p.name for p in sandbox.binlog_files()]
    with SourceConnection.open(settings_for(sandbox)) as connection:
        stream = connection.dump(DumpStart(file=first, position=4))
        with pytest.raises(SourcePositionLostError) as caught:
            next(stream)
    error = caught.value
    assert error.code == 1236
    assert "Could not find first log file name" in str(error)
    assert error.requested == f"{first}:4"
    assert first in str(error)
    assert "binlake snapshot --tables" in error.hint


def test_dump_from_a_gtid_the_server_never_had_is_position_lost(source: MariaDBSandbox) -> None:
    with SourceConnection.open(settings_for(source)) as connection:
        stream = connection.dump(DumpStart(gtid_state="0-1-999999"))
        with pytest.raises(SourcePositionLostError) as caught:
            next(stream)
    assert caught.value.requested == "GTID state '0-1-999999'"


@pytest.mark.parametrize("inside", [True, False], ids=["inside-an-event", "past-the-end"])
def test_dump_from_a_position_that_is_not_an_event_start_is_position_lost_with_a_hint(
    source: MariaDBSandbox, inside: bool
) -> None:
    first = source.binlog_files()[0]
    offset, _event = disk_events(first)[4]
    position = offset + 7 if inside else first.stat().st_size + 1000
    with SourceConnection.open(settings_for(source)) as connection:
        stream = connection.dump(DumpStart(file=first.name, position=position))
        with pytest.raises(SourcePositionLostError) as caught:
            list(stream)
    assert caught.value.code == 1236
    assert "not the start of an event" in caught.value.hint


def test_wrong_password_is_an_auth_error_that_never_shows_the_password(
    mariadb: MariaDBSandbox,
) -> None:
    user = f"pw_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'the-right-one'")
    try:
        wrong = "wrong-Pa55word-zq"
        with pytest.raises(SourceAuthError) as caught:
            SourceConnection.open(settings_for(mariadb, user=user, password=wrong))
        error = caught.value
        assert error.code == 1045
        assert error.user == user
        for text in (str(error), repr(error), error.hint, str(error.fields())):
            assert wrong not in text
        settings = settings_for(mariadb, user=user, password=wrong)
        assert wrong not in repr(settings)
    finally:
        mariadb.execute(f"DROP USER '{user}'@'127.0.0.1'")


def test_closed_port_is_unreachable() -> None:
    settings = ConnectionSettings("127.0.0.1", free_port(), "root", "", OUR_SERVER_ID)
    started = time.monotonic()
    with pytest.raises(SourceUnreachableError) as caught:
        SourceConnection.open(settings)
    assert time.monotonic() - started < 5
    assert caught.value.retryable
    assert str(settings.port) in str(caught.value)


def test_port_that_accepts_but_never_greets_is_unreachable_after_the_connect_timeout() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # the kernel completes the TCP handshake; nobody ever answers
        port = silent.getsockname()[1]
        settings = ConnectionSettings(
            "127.0.0.1", port, "root", "", OUR_SERVER_ID, connect_timeout_s=0.5
        )
        started = time.monotonic()
        with pytest.raises(SourceUnreachableError):
            SourceConnection.open(settings)
    assert time.monotonic() - started < 4  # 0.5 s connect timeout, bounded


def test_unknown_host_is_unreachable() -> None:
    settings = ConnectionSettings(
        "no-such-host.invalid", 3306, "root", "", OUR_SERVER_ID, connect_timeout_s=3
    )
    with pytest.raises(SourceUnreachableError):
        SourceConnection.open(settings)


def test_server_without_binlog_refuses_dump_and_fails_the_check(
    sandbox_factory: Callable[..., MariaDBSandbox],
) -> None:
    sandbox = sandbox_factory(log_bin=False).start()
    settings = settings_for(sandbox)
    with SourceConnection.open(settings) as connection:
        assert connection.server.binlog_files == ()
        with pytest.raises(SourceConfigError) as caught:
            connection.dump(DumpStart())
    assert caught.value.setting == "log_bin"
    assert "log_bin" in caught.value.hint
    problems = check_source(settings)
    assert [p.setting for p in problems] == ["log_bin"]
    assert "restart" in problems[0].fix


def test_user_without_replication_slave_cannot_register(mariadb: MariaDBSandbox) -> None:
    with select_only_user(mariadb) as (user, password):
        settings = settings_for(mariadb, user=user, password=password)
        with SourceConnection.open(settings) as conn, pytest.raises(SourceAuthError) as caught:
            conn.dump(DumpStart())
    assert "REPLICATION SLAVE" in caught.value.hint


# ---- check_source ----------------------------------------------------------------------------


def test_check_source_finds_no_problem_on_the_sandbox(mariadb: MariaDBSandbox) -> None:
    assert check_source(settings_for(mariadb)) == []


def test_check_source_reports_statement_format_and_minimal_metadata_with_fixes(
    sandbox_factory: Callable[..., MariaDBSandbox],
) -> None:
    sandbox = sandbox_factory(
        extra_args=["--binlog-format=STATEMENT", "--binlog-row-metadata=MINIMAL"]
    ).start()
    problems = check_source(settings_for(sandbox))
    assert [(p.setting, p.found, p.expected) for p in problems] == [
        ("binlog_format", "STATEMENT", "ROW"),
        ("binlog_row_metadata", "MINIMAL", "FULL"),
    ]
    assert "SET GLOBAL binlog_format = 'ROW';" in problems[0].fix
    assert "binlog_format = ROW" in problems[0].fix
    assert "binlog_row_metadata = FULL" in problems[1].fix


def test_check_source_reports_our_own_server_id(mariadb: MariaDBSandbox) -> None:
    problems = check_source(settings_for(mariadb, server_id=1))
    assert [p.setting for p in problems] == ["server_id"]
    assert "server_id = 2" in problems[0].fix


class select_only_user:  # noqa: N801 - used as a context manager
    """A user with SELECT only, dropped afterwards."""

    def __init__(self, sandbox: MariaDBSandbox) -> None:
        self.sandbox = sandbox
        self.user = f"ro_{uuid.uuid4().hex[:8]}"
        self.password = uuid.uuid4().hex

    def __enter__(self) -> tuple[str, str]:
        self.sandbox.execute(
            f"CREATE USER '{self.user}'@'127.0.0.1' IDENTIFIED BY '{self.password}'"
        )
        self.sandbox.execute(f"GRANT SELECT ON *.* TO '{self.user}'@'127.0.0.1'")
        return self.user, self.password

    def __exit__(self, *exc: object) -> None:
        self.sandbox.execute(f"DROP USER '{self.user}'@'127.0.0.1'")


def test_check_source_reports_missing_replication_privileges_of_a_select_only_user(
    mariadb: MariaDBSandbox,
) -> None:
    with select_only_user(mariadb) as (user, password):
        problems = check_source(settings_for(mariadb, user=user, password=password))
    assert [p.setting for p in problems] == [
        "privilege REPLICATION SLAVE",
        "privilege BINLOG MONITOR",
    ]
    assert problems[0].fix == f"GRANT REPLICATION SLAVE ON *.* TO '{user}'@'127.0.0.1';"
    assert problems[1].fix == f"GRANT BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1';"


def test_check_source_accepts_replication_client_granted_under_its_old_name(
    mariadb: MariaDBSandbox,
) -> None:
    with select_only_user(mariadb) as (user, password):
        mariadb.execute(
            f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'127.0.0.1'"
        )
        assert check_source(settings_for(mariadb, user=user, password=password)) == []


def test_check_source_sees_privileges_granted_through_a_default_role_only(
    mariadb: MariaDBSandbox,
) -> None:
    role = f"role_{uuid.uuid4().hex[:8]}"
    with select_only_user(mariadb) as (user, password):
        mariadb.execute(f"CREATE ROLE {role}")
        try:
            mariadb.execute(f"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {role}")
            mariadb.execute(f"GRANT {role} TO '{user}'@'127.0.0.1'")
            settings = settings_for(mariadb, user=user, password=password)
            assert len(check_source(settings)) == 2  # granted, but not active in a new session
            mariadb.execute(f"SET DEFAULT ROLE {role} FOR '{user}'@'127.0.0.1'")
            assert check_source(settings) == []
        finally:
            mariadb.execute(f"DROP ROLE {role}")


def write_config(tmp_path: Path, sandbox: MariaDBSandbox, user: str) -> Path:
    path = tmp_path / "binlake.toml"
    path.write_text(
        "[source]\n"
        f'host = "{sandbox.host}"\nport = {sandbox.port}\nuser = "{user}"\n'
        'password_env = "BINLAKE_TEST_SOURCE_PASSWORD"\n'
        f"server_id = {OUR_SERVER_ID}\n"
        "[state]\n"
        f'dir = "{tmp_path / "state"}"\n'
    )
    return path


def test_check_source_command_exits_0_on_a_ready_source(
    mariadb: MariaDBSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with select_only_user(mariadb) as (user, password):
        mariadb.execute(f"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1'")
        monkeypatch.setenv("BINLAKE_TEST_SOURCE_PASSWORD", password)
        code = cli_run(["check-source", "--config", str(write_config(tmp_path, mariadb, user))])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "ready" in out.out
    assert password not in out.out + out.err


def test_check_source_command_prints_each_problem_with_its_fix_and_exits_1(
    mariadb: MariaDBSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with select_only_user(mariadb) as (user, password):
        monkeypatch.setenv("BINLAKE_TEST_SOURCE_PASSWORD", password)
        code = cli_run(["check-source", "--config", str(write_config(tmp_path, mariadb, user))])
    out = capsys.readouterr().out
    assert code == 1
    assert "2 problem(s)" in out
    assert f"fix: GRANT REPLICATION SLAVE ON *.* TO '{user}'@'127.0.0.1';" in out
    assert f"fix: GRANT BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1';" in out


def test_check_source_command_with_a_wrong_password_prints_the_auth_error_and_hint(
    mariadb: MariaDBSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with select_only_user(mariadb) as (user, _password):
        monkeypatch.setenv("BINLAKE_TEST_SOURCE_PASSWORD", "not-it-4711")
        code = cli_run(["check-source", "--config", str(write_config(tmp_path, mariadb, user))])
    err = capsys.readouterr().err
    assert code == 77
    assert "Access denied" in err
    assert "hint:" in err
    assert "not-it-4711" not in err


# ---- network faults through the proxy --------------------------------------------------------


def test_stall_longer_than_twice_the_heartbeat_is_a_lost_connection_within_bounded_time(
    source: MariaDBSandbox,
) -> None:
    last = source.binlog_files()[-1]
    with TcpProxy(source.port) as proxy:
        settings = settings_for(source, port=proxy.port, heartbeat_period_s=0.3)
        with SourceConnection.open(settings) as connection:
            stream = connection.dump(DumpStart(file=last.name, position=last.stat().st_size))
            while next(stream)[4] != EventType.HEARTBEAT:
                pass
            proxy.stall(10.0)
            started = time.monotonic()
            with pytest.raises(SourceConnectionLostError) as caught:
                for _ in stream:
                    pass
            elapsed = time.monotonic() - started
    assert caught.value.timed_out
    assert caught.value.retryable
    assert 0.5 < elapsed < 4.0  # 2 x 0.3 s (+ one heartbeat in flight, + slack for load)


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "fin"])
def test_connection_cut_mid_event_is_lost_and_no_partial_event_is_yielded(
    source: MariaDBSandbox, reset: bool
) -> None:
    source.execute(
        "CREATE TABLE IF NOT EXISTS w.cut (id INT AUTO_INCREMENT PRIMARY KEY, b MEDIUMBLOB)"
    )
    last = source.binlog_files()[-1]  # no FLUSH: its Binlog_checkpoint would come late
    with TcpProxy(source.port) as proxy:
        settings = settings_for(source, port=proxy.port, heartbeat_period_s=30)
        with SourceConnection.open(settings) as connection:
            stream = connection.dump(DumpStart(file=last.name, position=last.stat().st_size))
            assert [next(stream)[4], next(stream)[4]] == [4, 15]  # artificial ROTATE, FDE
            proxy.cut_after(300_000, reset=reset)
            source.execute("INSERT INTO w.cut (b) VALUES (REPEAT('c', 1000000))")
            received: list[bytes] = []
            with pytest.raises(SourceConnectionLostError):
                for event in stream:
                    received.append(event)
    assert [e[4] for e in received] == [
        EventType.MARIADB_GTID,
        EventType.ANNOTATE_ROWS,
        EventType.TABLE_MAP,
    ]
    assert all(len(e) == decode_header(e).event_size > HEADER_LEN for e in received)


def test_dropped_connection_is_lost_and_retryable(source: MariaDBSandbox) -> None:
    last = source.binlog_files()[-1]
    with TcpProxy(source.port) as proxy:
        settings = settings_for(source, port=proxy.port, heartbeat_period_s=0.2)
        with SourceConnection.open(settings) as connection:
            stream = connection.dump(DumpStart(file=last.name, position=last.stat().st_size))
            next(stream)
            proxy.drop()
            with pytest.raises(SourceConnectionLostError) as caught:
                for _ in stream:
                    pass
    assert caught.value.retryable
    assert not caught.value.timed_out


# ---- TLS -------------------------------------------------------------------------------------


def make_certificates(folder: Path) -> dict[str, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 (IP SAN), made with openssl."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {name: folder / f"{name}.pem" for name in ("ca", "ca_key", "server", "server_key")}
    csr, ext = folder / "server.csr", folder / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    commands = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
         "/CN=binlake test CA", "-keyout", files["ca_key"], "-out", files["ca"]],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", files["server_key"], "-out", csr],
        ["x509", "-req", "-in", csr, "-CA", files["ca"], "-CAkey", files["ca_key"],
         "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", files["server"]],
    ]  # fmt: skip
    for command in commands:
        subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True)
    return files


@pytest.fixture(scope="module")
def tls_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MariaDBSandbox, Path]]:
    """A server that speaks TLS, with a table of 2 MB rows; yields it and its CA file."""
    base = tmp_path_factory.mktemp("tls")
    certs = make_certificates(base / "certs")
    sandbox = MariaDBSandbox(
        base / "server",
        extra_args=[
            f"--ssl-ca={certs['ca']}",
            f"--ssl-cert={certs['server']}",
            f"--ssl-key={certs['server_key']}",
        ],
    )
    sandbox.start()
    try:
        sandbox.execute("CREATE DATABASE t")
        sandbox.execute("CREATE TABLE t.blob2m (id INT PRIMARY KEY, b LONGBLOB) ENGINE=MyISAM")
        for i in range(3):
            sandbox.execute(f"INSERT INTO t.blob2m VALUES ({i}, REPEAT(CHAR(65 + {i}), 2000000))")
        yield sandbox, certs["ca"]
    finally:
        sandbox.kill()


def test_dump_over_tls_is_byte_equal_to_the_binlog(
    tls_source: tuple[MariaDBSandbox, Path],
) -> None:
    sandbox, ca = tls_source
    settings = replace(settings_for(sandbox), ssl_ca=str(ca), ssl_verify=True)
    with SourceConnection.open(settings) as connection:
        ((_, cipher),) = connection.query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        assert cipher
        streamed = list(connection.dump(DumpStart(file="mariadb-bin.000001"), non_blocking=True))
    (path,) = sandbox.binlog_files()
    on_disk = [without_in_use(event) for _, event in disk_events(path)]
    assert stream_by_file(streamed)[path.name] == on_disk


def test_tls_with_an_unknown_ca_is_unreachable_with_a_tls_hint(
    tls_source: tuple[MariaDBSandbox, Path], tmp_path: Path
) -> None:
    sandbox, _ca = tls_source
    other_ca = make_certificates(tmp_path / "other")["ca"]
    settings = replace(settings_for(sandbox), ssl_ca=str(other_ca), ssl_verify=True)
    with pytest.raises(SourceUnreachableError) as caught:
        SourceConnection.open(settings)
    assert "TLS" in caught.value.hint
