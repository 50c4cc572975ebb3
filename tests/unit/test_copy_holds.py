"""What streaming holds back while tables are copied (``binlake.apply.holds``): the copied
table's rows and the DDL naming it; every other table streams on."""

from __future__ import annotations

from typing import cast

import pytest

from binlake.apply.holds import CopyHolds
from binlake.apply.plan import Unit, UnitKind
from binlake.binlog.names import TableName
from binlake.ddl.statements import DdlStatement, DropDatabase, RenameTables
from binlake.relay.reader import RelayGroup

pytestmark = pytest.mark.unit

NO_GROUP = cast(RelayGroup, None)  # holds look at a unit's kind, tables and statement only


N = TableName.parse


def rows(*tables: str) -> Unit:
    return Unit(NO_GROUP, UnitKind.ROWS, tables=frozenset(map(N, tables)))


def ddl(statement: object, *tables: str) -> Unit:
    named = frozenset(map(N, tables))
    return Unit(NO_GROUP, UnitKind.DDL, ddl=cast(DdlStatement, statement), tables=named)


def test_rows_of_a_copied_table_are_held_and_other_tables_stream() -> None:
    holds = CopyHolds([N("db.copied")])
    assert holds.holds_unit(rows("db.copied"))
    assert holds.holds_unit(rows("db.other", "db.copied"))  # one transaction: held whole
    assert not holds.holds_unit(rows("db.other"))
    assert not holds.holds_unit(rows("db2.copied"))


def test_a_rename_of_a_copied_table_is_held_and_holds_its_new_name() -> None:
    holds = CopyHolds([N("db.copied")])
    rename = RenameTables((), "RENAME TABLE copied TO renamed")
    assert holds.holds_unit(ddl(rename, "db.copied", "db.renamed"))
    assert holds.holds_unit(rows("db.renamed"))
    assert not holds.holds_unit(ddl(rename, "db.a", "db.b"))


def test_dropping_the_database_of_a_copied_table_holds_the_whole_database() -> None:
    holds = CopyHolds([N("db.copied")])
    assert not holds.holds_unit(ddl(DropDatabase("other", "DROP DATABASE other")))
    assert holds.holds_unit(ddl(DropDatabase("db", "DROP DATABASE db")))
    assert holds.holds_unit(rows("db.created_later"))
