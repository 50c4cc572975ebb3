"""``--tables`` of `binlake verify` and `binlake snapshot`: source table names, comma-separated,
each ``db.table`` with a part that holds a dot, a space, a comma or a backtick in backticks
(``--tables '`we.ird db`.`tâble x`,shop.orders'``), as ``TableName.parse`` reads them."""

from __future__ import annotations

from binlake.binlog.names import TableName, parse_table_list
from binlake.errors import UsageError

HINT = (
    "name tables as db.table, comma-separated (--tables shop.orders,shop.items); a name holding "
    "a dot, a space, a comma or a backtick goes in backticks, a backtick doubled: "
    "--tables '`we.ird db`.`tâble x`'"
)


def parse_tables_option(text: str) -> list[TableName]:
    """The tables ``text`` names, each once, in order; ``UsageError`` when one is not
    ``db.table`` or none is named."""
    try:
        tables = parse_table_list(text)
    except ValueError as error:
        raise UsageError(f"--tables: {error}", hint=HINT) from None
    if not tables:
        raise UsageError("--tables names no table", hint=HINT)
    return list(dict.fromkeys(tables))
