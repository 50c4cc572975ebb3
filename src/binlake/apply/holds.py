"""Changes held back for tables being copied (``binlake.snapshot``).

While a table is copied, streaming must not commit to it: a delete (or an upsert) committed
before a chunk that still holds the key's older row would be undone by that chunk. So the
applier holds back every change of a held table: its transactions stay counted in the
relay-log checkpoint (MDEV-181), the relay log keeps them, and once the copy is done the
applier reads the relay log again from the recorded checkpoint, as a restart does: the copied
table applies every change after its copy's position, the others skip by position what they
have (``binlake.apply.applier``).

A DDL statement naming a held table is held whole, and every table it names is held from then
on (a RENAME of the copied table must reach the lake before anything written to its new name;
``DROP DATABASE`` holds the database): until the next reading again, which releases them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from binlake.apply.plan import Unit, UnitKind
from binlake.binlog.names import TableName
from binlake.ddl.statements import DropDatabase


class CopyHolds:
    """The tables (and databases) whose changes wait for copies."""

    def __init__(self, tables: Iterable[TableName] = ()) -> None:
        self.tables: set[TableName] = set(tables)
        self.databases: set[str] = set()
        #: Transactions held per relay file (they stay counted for the checkpoint).
        self.transactions: Counter[str] = Counter()

    def __bool__(self) -> bool:
        return bool(self.tables or self.databases)

    def add(self, tables: Iterable[TableName]) -> None:
        self.tables.update(tables)

    def holds(self, table: TableName) -> bool:
        return table in self.tables or table.database in self.databases

    def holds_unit(self, unit: Unit) -> bool:
        """True when ``unit`` touches a held table (a DDL naming one holds what it names)."""
        if unit.kind is UnitKind.ROWS:
            return any(self.holds(t) for t in unit.tables)
        if unit.kind is not UnitKind.DDL or unit.ddl is None:
            return False
        statement = unit.ddl
        dropped = statement.database if isinstance(statement, DropDatabase) else None
        named = any(self.holds(t) for t in unit.tables)
        if dropped is not None:
            named = named or any(t.database == dropped for t in self.tables)
        if not named:
            return False
        self.tables.update(unit.tables)
        if dropped is not None:
            self.databases.add(dropped)
        return True
