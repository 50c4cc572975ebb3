"""GTID states the receiver tracks: MariaDB per-domain positions and MySQL executed sets."""

from __future__ import annotations

import uuid

import pytest

from binlake.gtid import MariaGtid, MariaGtidState, MysqlGtidSet, parse_server_gtid_state

SID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
SID2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_mariadb_state_round_trips_its_text_sorted_by_domain() -> None:
    state = MariaGtidState.parse("1-2-9, 0-1-5\n")
    assert state.text() == "0-1-5,1-2-9"
    assert MariaGtidState.parse("").text() == "" and not MariaGtidState.parse("")


@pytest.mark.parametrize("text", ["0-1", "a-b-c", "0-1-2-3", "4294967296-1-1"])
def test_malformed_mariadb_gtids_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        MariaGtidState.parse(text)


def test_a_transaction_gtid_replaces_its_domain_even_with_another_server_id() -> None:
    state = MariaGtidState.parse("0-1-5,1-1-3").with_gtid(MariaGtid(0, 2, 6))
    assert state.text() == "0-2-6,1-1-3"


def test_a_gtid_list_takes_the_last_entry_per_domain_and_never_moves_a_domain_back() -> None:
    state = MariaGtidState.parse("0-1-52")
    listed = [MariaGtid(0, 1, 40), MariaGtid(0, 2, 49), MariaGtid(1, 1, 7)]
    assert state.with_list(listed).text() == "0-1-52,1-1-7"
    assert MariaGtidState().with_list(listed).text() == "0-2-49,1-1-7"


def test_mariadb_containment_compares_seq_per_domain() -> None:
    server = MariaGtidState.parse("0-1-100,1-1-5")
    assert server.contains(MariaGtidState.parse("0-1-100"))
    assert server.contains(MariaGtidState.parse("0-2-99,1-1-5"))
    assert not server.contains(MariaGtidState.parse("0-1-101"))
    assert not server.contains(MariaGtidState.parse("2-1-1"))
    assert server.contains(MariaGtidState())


def test_mysql_sets_merge_intervals_and_print_like_the_server() -> None:
    gtids = MysqlGtidSet.parse(f"{SID}:1-5:7, {SID2}:3")
    gtids = gtids.with_gtid(f"{SID}:6").with_gtid(f"{SID2}:4")
    assert gtids.text() == f"{SID}:1-7,{SID2}:3-4"
    assert gtids.sets()[0] == (uuid.UUID(SID), ((1, 8),))


def test_mysql_containment_and_union() -> None:
    executed = MysqlGtidSet.parse(f"{SID}:1-10")
    assert executed.contains(MysqlGtidSet.parse(f"{SID}:2-4:9"))
    assert not executed.contains(MysqlGtidSet.parse(f"{SID}:10-11"))
    assert not executed.contains(MysqlGtidSet.parse(f"{SID2}:1"))
    both = executed.union(MysqlGtidSet.parse(f"{SID}:11-12,{SID2}:1"))
    assert both.text() == f"{SID}:1-12,{SID2}:1"


@pytest.mark.parametrize("text", [f"{SID}", "not-a-uuid:1", f"{SID}:0", f"{SID}:5-3"])
def test_malformed_mysql_sets_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        MysqlGtidSet.parse(text)


def test_server_states_parse_by_flavor() -> None:
    assert parse_server_gtid_state("0-1-3", mariadb=True) == MariaGtidState.parse("0-1-3")
    assert parse_server_gtid_state(None, mariadb=False) == MysqlGtidSet()
