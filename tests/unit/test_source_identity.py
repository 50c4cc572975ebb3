"""The source identity in source.state, and when a server is not the recorded source."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.binlog.format import Flavor
from binlake.config import ReplicationMode
from binlake.errors import SourceIdentityChangedError, StateFileCorruptError
from binlake.gtid import MariaGtidState, MysqlGtidSet
from binlake.position import SourcePosition
from binlake.relay.restart import EMPTY, RestartPoint
from binlake.source.client import ServerInfo
from binlake.source.identity import (
    SourceIdentity,
    SourceStateFile,
    identity_changed_error,
    identity_problems,
)
from binlake.storage.shadow import ShadowStateFile

UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def mariadb(server_id: int = 1, gtid: str = "0-1-100") -> ServerInfo:
    return ServerInfo("10.11.6-MariaDB-log", Flavor.MARIADB, server_id, None, gtid, (), {})


def mysql(server_uuid: str = UUID_A, gtid: str = f"{UUID_A}:1-100") -> ServerInfo:
    return ServerInfo("8.0.36", Flavor.MYSQL, 7, server_uuid, gtid, (), {})


def maria_point(gtid: str) -> RestartPoint:
    return RestartPoint(
        SourcePosition("mariadb-bin.000002", 900), Flavor.MARIADB, MariaGtidState.parse(gtid), 1
    )


def recorded(server: ServerInfo) -> SourceIdentity:
    return SourceIdentity.of_server(server, ReplicationMode.GTID, "db:3306")


def test_the_same_server_further_on_is_the_same_source() -> None:
    before = recorded(mariadb(gtid="0-1-50"))
    assert identity_problems(before, mariadb(gtid="0-1-100"), maria_point("0-1-80")) == []
    assert identity_problems(None, mariadb(), EMPTY) == []


def test_a_mariadb_server_whose_history_lacks_our_position_is_another_source() -> None:
    problems = identity_problems(recorded(mariadb()), mariadb(gtid="0-1-40"), maria_point("0-1-80"))
    assert any("does not contain our position" in p for p in problems)
    assert any("lacks what it had when recorded" in p for p in problems)


def test_a_reset_mariadb_server_is_caught_by_the_recorded_lower_bound() -> None:
    problems = identity_problems(recorded(mariadb(gtid="0-1-100")), mariadb(gtid=""), EMPTY)
    assert problems and "reset or replaced" in problems[0]


def test_a_different_mariadb_server_id_or_mysql_server_uuid_is_another_source() -> None:
    assert identity_problems(recorded(mariadb(1)), mariadb(2), EMPTY) == ["server_id is 2, was 1"]
    mysql_point = RestartPoint(
        SourcePosition("binlog.000001", 4), Flavor.MYSQL, MysqlGtidSet.parse(f"{UUID_A}:1-5"), 7
    )
    problems = identity_problems(recorded(mysql()), mysql(UUID_B), mysql_point)
    assert problems == [f"server_uuid is {UUID_B}, was {UUID_A}"]


def test_a_relay_log_without_a_recorded_source_is_not_trusted() -> None:
    assert identity_problems(None, mariadb(), maria_point("0-1-10")) == [
        "source.state is missing but the relay log holds a position"
    ]


def test_the_error_names_both_servers_and_the_remedy() -> None:
    error = identity_changed_error(recorded(mariadb(1)), mariadb(2), "db2:3306", ["server_id"])
    assert isinstance(error, SourceIdentityChangedError)
    assert error.expected == "mariadb server_id 1 (at db:3306)"
    assert error.found == "mariadb server_id 2 (at db2:3306)"
    assert "--accept-new-source" in error.hint


def test_the_identity_is_recorded_then_replaced_through_the_shadow_file(tmp_path: Path) -> None:
    state = SourceStateFile(tmp_path / "source.state")
    assert state.read() is None
    first = recorded(mysql())
    state.record(first)
    assert state.read() == first
    second = recorded(mysql(UUID_B))
    state.record(second)
    assert state.read() == second
    with ShadowStateFile.open(state.path) as shadow:
        assert shadow.sequence == 2


def test_a_prepared_but_uncommitted_identity_is_rolled_back(tmp_path: Path) -> None:
    """A crash between prepare and commit: the old identity stays, the new one is checked and
    recorded again at the next start."""
    state = SourceStateFile(tmp_path / "source.state")
    first = recorded(mariadb(1))
    state.record(first)
    with ShadowStateFile.open(state.path) as shadow:
        shadow.prepare(9, recorded(mariadb(2)).encode())
    assert state.read() == first
    with ShadowStateFile.open(state.path) as shadow:
        assert shadow.recover() is None


def test_a_payload_that_is_not_an_identity_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "source.state"
    ShadowStateFile.create(path, initial=b'{"version": 9}').close()
    with pytest.raises(StateFileCorruptError, match="cannot be read"):
        SourceStateFile(path).read()
