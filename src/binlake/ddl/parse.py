"""The DDL the applier must follow, parsed from QUERY events: tables created, altered, truncated,
dropped and renamed.

Why a small hand-written tokenizer and recursive parser rather than a PyPI SQL parser: sqlglot
30.30 (tested on the statements below, ``read="mysql"``) falls back to an opaque ``Command``
for ``ALTER TABLE t ADD COLUMN (a INT, b INT)``, ``RENAME TABLE a TO b, c TO d`` and ``ALTER
ONLINE TABLE``, and raises on a statement inside a ``/*!...*/`` executable comment (mysqldump's
``/*!40000 ALTER TABLE t DISABLE KEYS */``). A statement binlake gets wrong replicates wrong
data, and the subset that matters is small: what names a table, what adds, drops, renames or
retypes a column. Everything else is recognised by its leading keywords and skipped as a no-op
for the lake, or refused (``UnsupportedDdlError``) when it could change rows or columns without
row events (``DROP PARTITION``, an ALTER clause binlake does not know).

The tokenizer (``binlake.ddl.tokens``) reads the text as MariaDB does: keywords, quoted
names and strings, comments and executable comments.

Column types are kept as text: ``binlake.ddl.types`` maps them to the Iceberg columns the
TABLE_MAP would give, where the text settles it, so that an ALTER is applied when it is read;
the TABLE_MAP that follows stays the ground truth (``binlake.lake.schema.evolution``); the DDL also
tells renames from drop+add. A column definition keeps what decides the value the rows a table
already has get when the column is added (``binlake.ddl.defaults``): its DEFAULT exactly
as written, NOT NULL / NULL, its charset, AUTO_INCREMENT, generated.
The statement classes live in ``binlake.ddl.statements`` and are re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from binlake.ddl.statements import (
    AddColumnClause,
    AlterClause,
    AlterTable,
    ChangeColumnClause,
    ColumnDefinition,
    CreateTable,
    DdlStatement,
    DropColumnClause,
    DropDatabase,
    DropTables,
    IgnoredClause,
    ModifyColumnClause,
    RenameColumnClause,
    RenameTableClause,
    RenameTables,
    TableName,
    TruncateTable,
)
from binlake.ddl.tokens import Token, Tokenizer
from binlake.errors import UnsupportedDdlError

__all__ = [
    "AddColumnClause",
    "AlterClause",
    "AlterTable",
    "ChangeColumnClause",
    "ColumnDefinition",
    "CreateTable",
    "DdlStatement",
    "DropColumnClause",
    "DropDatabase",
    "DropTables",
    "IgnoredClause",
    "ModifyColumnClause",
    "RenameColumnClause",
    "RenameTableClause",
    "RenameTables",
    "TableName",
    "TruncateTable",
    "parse_ddl",
]


class _ParseError(Exception):
    """The statement is not in the grammar binlake knows; becomes ``UnsupportedDdlError``."""


# ---- the parser -------------------------------------------------------------------------------

_END = Token("end", "", -1, -1)


class _DdlParser:
    """Recursive descent over the tokens of one statement."""

    def __init__(self, text: str, database: str) -> None:
        self.text = text
        self.database = database
        self.tokens = Tokenizer(text).run()
        self.at = 0

    # -- primitives

    def peek(self, ahead: int = 0) -> Token:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else _END

    def next(self) -> Token:
        token = self.peek()
        if token is _END:
            raise _ParseError("the statement ends too early")
        if token.kind == "bad":
            raise _ParseError(token.value)
        self.at += 1
        return token

    def accept(self, *words: str) -> bool:
        """Consume the keywords ``words`` in sequence if they are next; True if they were."""
        if all(self.peek(i).is_word(word) for i, word in enumerate(words)):
            self.at += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise _ParseError(f"expected {' '.join(words)} at {self.peek().value!r}")

    def accept_punct(self, char: str) -> bool:
        if self.peek().kind == "punct" and self.peek().value == char:
            self.at += 1
            return True
        return False

    def at_end(self) -> bool:
        while self.accept_punct(";"):
            pass
        return self.peek() is _END

    def identifier(self) -> str:
        token = self.next()
        if token.kind in ("word", "ident", "number"):
            return token.value
        if token.kind == "string" and token.value.startswith('"'):  # ANSI_QUOTES
            return token.value[1:-1].replace('""', '"')
        raise _ParseError(f"expected a name at {token.value!r}")

    def table_name(self) -> TableName:
        first = self.identifier()
        if self.accept_punct("."):
            return TableName(first, self.identifier())
        return TableName(self.database, first)

    def source_from(self, token: Token) -> str:
        """The statement text from ``token`` to the current position."""
        end = self.tokens[self.at - 1].end if self.at > 0 else token.start
        return " ".join(self.text[token.start : end].split())

    def skip_group(self) -> None:
        """Skip a balanced ``( ... )`` whose ``(`` is next."""
        depth = 0
        while True:
            token = self.next()
            if token.kind == "punct" and token.value == "(":
                depth += 1
            elif token.kind == "punct" and token.value == ")":
                depth -= 1
                if depth == 0:
                    return

    def skip_to_clause_end(self) -> None:
        """Skip tokens up to (not including) the next top-level ``,``, ``)`` or the end."""
        while not self.at_clause_end():
            if self.peek().value == "(" and self.peek().kind == "punct":
                self.skip_group()
            else:
                self.next()

    def at_clause_end(self) -> bool:
        token = self.peek()
        return token is _END or (token.kind == "punct" and token.value in ",);")

    def skip_wait(self) -> None:
        """``WAIT n`` / ``NOWAIT`` (MariaDB's lock timeouts)."""
        if self.accept("WAIT"):
            self.next()
        else:
            self.accept("NOWAIT")


def parse_ddl(
    database: str, query: str, *, replicated: Callable[[TableName], bool] | None = None
) -> DdlStatement | None:
    """The DDL that matters to the lake in one QUERY event, or None for anything else (DML,
    GRANT, CREATE USER, CREATE INDEX, temporary tables...).

    ``database`` is the event's default database (for unqualified names). A table statement
    (ALTER, DROP, RENAME, TRUNCATE TABLE) that binlake cannot follow raises
    ``UnsupportedDdlError`` naming the table, unless ``replicated`` is given and says the table
    is not replicated: then None.
    """
    if not _DDL_WORD.search(query):
        return None  # BEGIN, COMMIT, XA ...: the common case, without tokenizing
    try:
        return _statement(_DdlParser(query, database))
    except _ParseError as error:
        problem = str(error)
    known, table = _table_of(query, database)
    if not known:
        return None
    if table is not None and replicated is not None and not replicated(table):
        return None
    raise UnsupportedDdlError(
        f"binlake cannot follow this statement: {problem}",
        table=str(table) if table is not None else None,
        statement=query,
    )


def _table_of(query: str, database: str) -> tuple[bool, TableName | None]:
    """Whether ``query`` is a table statement binlake follows, and the first table it names
    (None when even that cannot be read)."""
    parser = _DdlParser(query, database)
    head = parser.peek()
    if head.is_word("ALTER"):
        known = _alter_head(parser)
    elif head.is_word("DROP", "RENAME"):
        parser.next()
        known = parser.accept("TABLE") or parser.accept("TABLES")
        parser.accept("IF", "EXISTS")
    elif head.is_word("TRUNCATE"):
        parser.next()
        parser.accept("TABLE")
        known = True
    else:
        known = False
    try:
        return known, parser.table_name() if known else None
    except _ParseError:
        return known, None


_DDL_WORD = re.compile(r"\b(?:CREATE|ALTER|DROP|RENAME|TRUNCATE)\b", re.IGNORECASE)


def _alter_head(parser: _DdlParser) -> bool:
    """Consume ``ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS]``; False if that is not next."""
    if not parser.accept("ALTER"):
        return False
    parser.accept("ONLINE")
    parser.accept("IGNORE")
    if not parser.accept("TABLE"):
        return False
    parser.accept("IF", "EXISTS")
    return True


def _statement(parser: _DdlParser) -> DdlStatement | None:
    head = parser.peek()
    if head.is_word("CREATE"):
        return _create(parser)
    if head.is_word("ALTER"):
        return _alter(parser)
    if head.is_word("TRUNCATE"):
        parser.next()
        parser.accept("TABLE")
        table = parser.table_name()
        parser.skip_wait()
        if not parser.at_end():
            raise _ParseError(f"unexpected {parser.peek().value!r} after the table name")
        return TruncateTable(table, parser.text)
    if head.is_word("DROP"):
        return _drop(parser)
    if head.is_word("RENAME"):
        return _rename_tables(parser)
    return None


def _create(parser: _DdlParser) -> CreateTable | None:
    parser.expect("CREATE")
    or_replace = parser.accept("OR", "REPLACE")
    if not parser.accept("TABLE"):
        return None  # TEMPORARY TABLE, INDEX, VIEW, USER, DATABASE...
    if_not_exists = parser.accept("IF", "NOT", "EXISTS")
    table = parser.table_name()
    return CreateTable(table, parser.text, if_not_exists=if_not_exists, or_replace=or_replace)


def _drop(parser: _DdlParser) -> DropTables | DropDatabase | None:
    parser.expect("DROP")
    if parser.accept("DATABASE") or parser.accept("SCHEMA"):
        parser.accept("IF", "EXISTS")
        return DropDatabase(parser.identifier(), parser.text)
    if not parser.accept("TABLE"):
        return None  # TEMPORARY TABLE, INDEX, VIEW...
    if_exists = parser.accept("IF", "EXISTS")
    names = [parser.table_name()]
    while parser.accept_punct(","):
        names.append(parser.table_name())
    parser.skip_wait()
    parser.accept("RESTRICT") or parser.accept("CASCADE")
    if not parser.at_end():
        raise _ParseError(f"unexpected {parser.peek().value!r} after the table names")
    return DropTables(tuple(names), parser.text, if_exists=if_exists)


def _rename_tables(parser: _DdlParser) -> RenameTables | None:
    parser.expect("RENAME")
    if not (parser.accept("TABLE") or parser.accept("TABLES")):
        return None  # RENAME USER
    parser.accept("IF", "EXISTS")
    pairs = []
    while True:
        old = parser.table_name()
        parser.skip_wait()
        parser.expect("TO")
        pairs.append((old, parser.table_name()))
        if not parser.accept_punct(","):
            break
    if not parser.at_end():
        raise _ParseError(f"unexpected {parser.peek().value!r} after the renames")
    return RenameTables(tuple(pairs), parser.text)


def _alter(parser: _DdlParser) -> AlterTable | None:
    if not _alter_head(parser):
        return None  # ALTER USER, DATABASE, VIEW, SEQUENCE...
    table = parser.table_name()
    parser.skip_wait()
    clauses: list[AlterClause] = []
    if not parser.at_end():
        clauses.extend(_alter_clause(parser))
        while parser.accept_punct(","):
            clauses.extend(_alter_clause(parser))
    if not parser.at_end():
        raise _ParseError(f"unexpected {parser.peek().value!r}")
    return AlterTable(table, tuple(clauses), parser.text)


# ---- ALTER TABLE clauses ----------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words after ADD / DROP that name an index, key, constraint or partition: no-ops for the lake.
_INDEX_WORDS = _words(
    """INDEX KEY FULLTEXT SPATIAL UNIQUE PRIMARY FOREIGN CONSTRAINT CHECK PERIOD SYSTEM"""
)
#: First words of clauses that leave the lake's columns alone (table options, partitioning,
#: maintenance). Skipped up to the next top-level comma.
_OPTION_WORDS = _words(
    """ENGINE AUTO_INCREMENT AVG_ROW_LENGTH CHECKSUM PAGE_CHECKSUM TABLE_CHECKSUM COMMENT
    COMPRESSION CONNECTION DATA INDEX DELAY_KEY_WRITE ENCRYPTED ENCRYPTION
    ENCRYPTION_KEY_ID IETF_QUOTES INSERT_METHOD KEY_BLOCK_SIZE MAX_ROWS MIN_ROWS
    PACK_KEYS PAGE_COMPRESSED PAGE_COMPRESSION_LEVEL PASSWORD ROW_FORMAT SEQUENCE
    STATS_AUTO_RECALC STATS_PERSISTENT STATS_SAMPLE_PAGES TABLESPACE TRANSACTIONAL UNION
    WITH WITHOUT DEFAULT CHARACTER CHARSET COLLATE ALGORITHM LOCK FORCE ORDER ENABLE
    DISABLE CONVERT DISCARD IMPORT ANALYZE CHECK OPTIMIZE REBUILD REPAIR COALESCE
    REORGANIZE PARTITION REMOVE"""
)


def _alter_clause(parser: _DdlParser) -> list[AlterClause]:
    head = parser.peek()
    if head.is_word("ADD"):
        return _add_clause(parser)
    if head.is_word("DROP"):
        return [_drop_clause(parser)]
    if head.is_word("CHANGE"):
        parser.next()
        parser.accept("COLUMN")
        parser.accept("IF", "EXISTS")
        old = parser.identifier()
        return [ChangeColumnClause(old, _column_definition(parser))]
    if head.is_word("MODIFY"):
        parser.next()
        parser.accept("COLUMN")
        parser.accept("IF", "EXISTS")
        return [ModifyColumnClause(_column_definition(parser))]
    if head.is_word("RENAME"):
        return [_rename_clause(parser)]
    if head.is_word("ALTER"):
        parser.next()
        parser.skip_to_clause_end()  # ALTER [COLUMN] c SET/DROP DEFAULT, ALTER INDEX ...
        return [IgnoredClause(parser.source_from(head))]
    if head.kind == "word" and head.value.upper() in _OPTION_WORDS:
        parser.skip_to_clause_end()
        return [IgnoredClause(parser.source_from(head))]
    if head.is_word("TRUNCATE", "EXCHANGE"):
        raise _ParseError(f"{head.value.upper()} PARTITION changes rows without row events")
    raise _ParseError(f"unknown ALTER TABLE clause {head.value!r}")


def _names_index(parser: _DdlParser) -> bool:
    """Whether the next words start an index, key, constraint, period or system versioning
    (``PERIOD`` and ``SYSTEM`` are also valid column names)."""
    word = parser.peek()
    if word.is_word("PERIOD"):
        return parser.peek(1).is_word("FOR")
    if word.is_word("SYSTEM"):
        return parser.peek(1).is_word("VERSIONING")
    return word.kind == "word" and word.value.upper() in _INDEX_WORDS


def _add_clause(parser: _DdlParser) -> list[AlterClause]:
    head = parser.next()  # ADD
    if _names_index(parser) or parser.peek().is_word("PARTITION"):
        parser.skip_to_clause_end()
        return [IgnoredClause(parser.source_from(head))]
    parser.accept("COLUMN")
    if_not_exists = parser.accept("IF", "NOT", "EXISTS")
    if not parser.accept_punct("("):
        return [AddColumnClause(_column_definition(parser), if_not_exists)]
    clauses: list[AlterClause] = []
    while True:
        inner = parser.peek()
        if _names_index(parser):
            parser.skip_to_clause_end()  # ADD COLUMN (a INT, INDEX (a)) is allowed
            clauses.append(IgnoredClause(parser.source_from(inner)))
        else:
            clauses.append(AddColumnClause(_column_definition(parser), if_not_exists))
        if not parser.accept_punct(","):
            break
    if not parser.accept_punct(")"):
        raise _ParseError("ADD COLUMN ( ... ) is not closed")
    return clauses


def _drop_clause(parser: _DdlParser) -> AlterClause:
    head = parser.next()  # DROP
    word = parser.peek()
    if word.is_word("PARTITION"):
        raise _ParseError("DROP PARTITION deletes rows without row events")
    if _names_index(parser):
        parser.skip_to_clause_end()
        return IgnoredClause(parser.source_from(head))
    parser.accept("COLUMN")
    if_exists = parser.accept("IF", "EXISTS")
    name = parser.identifier()
    parser.accept("RESTRICT") or parser.accept("CASCADE")
    if not parser.at_clause_end():
        raise _ParseError(f"unexpected {parser.peek().value!r} after DROP COLUMN {name}")
    return DropColumnClause(name, if_exists)


def _rename_clause(parser: _DdlParser) -> AlterClause:
    head = parser.next()  # RENAME
    if parser.accept("COLUMN"):
        parser.accept("IF", "EXISTS")
        old = parser.identifier()
        parser.expect("TO")
        return RenameColumnClause(old, parser.identifier())
    if parser.peek().is_word("INDEX", "KEY"):
        parser.skip_to_clause_end()
        return IgnoredClause(parser.source_from(head))
    parser.accept("TO") or parser.accept("AS")
    return RenameTableClause(parser.table_name())


# ---- column definitions -----------------------------------------------------------------------

#: Words that end a column's type and start its attributes.
_ATTRIBUTE_WORDS = _words(
    """NOT NULL DEFAULT AUTO_INCREMENT PRIMARY KEY UNIQUE COMMENT COLLATE CHARACTER CHARSET
    GENERATED AS ON INVISIBLE CHECK REFERENCES COMPRESSED FIRST AFTER CONSTRAINT
    PERSISTENT STORED VIRTUAL WITH WITHOUT SERIAL"""
)


def _column_definition(parser: _DdlParser) -> ColumnDefinition:
    name = parser.identifier()
    type_start = parser.peek()
    if type_start.kind != "word":
        raise _ParseError(f"expected a type for column {name} at {type_start.value!r}")
    serial = parser.accept("SERIAL")  # BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
    while parser.peek().kind == "word" and parser.peek().value.upper() not in _ATTRIBUTE_WORDS:
        parser.next()
        if parser.peek().value == "(" and parser.peek().kind == "punct":
            parser.skip_group()
    column = ColumnDefinition(
        name, parser.source_from(type_start), nullable=not serial, auto_increment=serial
    )
    while not parser.at_clause_end():
        column = _column_attribute(parser, column)
    return column


def _column_attribute(parser: _DdlParser, column: ColumnDefinition) -> ColumnDefinition:
    """``column`` with the next attribute of its definition read (unknown ones skipped)."""
    token = parser.peek()
    if parser.accept("NOT", "NULL") or parser.accept("PRIMARY", "KEY"):
        return replace(column, nullable=False)
    if parser.accept("NULL"):
        return replace(column, explicit_null=True)
    if parser.accept("DEFAULT"):
        return replace(column, default=_default_expression(parser))
    if parser.accept("AUTO_INCREMENT") or parser.accept("SERIAL", "DEFAULT", "VALUE"):
        return replace(column, auto_increment=True)
    if parser.accept("CHARACTER", "SET") or parser.accept("CHARSET"):
        return replace(column, charset=parser.identifier().lower())
    if parser.accept("COLLATE"):
        collation = parser.identifier().lower()
        return replace(column, charset=column.charset or collation.split("_", 1)[0])
    if parser.accept("GENERATED", "ALWAYS", "AS") or parser.accept("AS"):
        return replace(column, generated=True)
    if parser.accept("FIRST"):
        return replace(column, position="FIRST")
    if parser.accept("AFTER"):
        return replace(column, position=f"AFTER {parser.identifier()}")
    if token.kind == "punct" and token.value == "(":
        parser.skip_group()
    else:
        parser.next()
    return column


def _default_expression(parser: _DdlParser) -> str:
    """One DEFAULT value, as written: a literal (adjacent strings are one), a signed number,
    a function call or ``( expr )``."""
    start = parser.peek()
    if start.kind == "punct" and start.value in "+-":
        parser.next()
    token = parser.next()
    following = parser.peek()
    if token.kind == "punct" and token.value == "(":
        parser.at -= 1
        parser.skip_group()
    elif token.kind == "word" and following.value == "(" and following.kind == "punct":
        parser.skip_group()
    elif token.is_word("DATE", "TIME", "TIMESTAMP") and following.kind == "string":
        parser.next()
    elif token.kind == "word" and token.value.startswith("_") and following.kind == "string":
        parser.next()  # a charset introducer before a space: _latin1 'x'
    if parser.tokens[parser.at - 1].kind == "string":
        while parser.peek().kind == "string":  # 'a' 'b' is 'ab'
            parser.next()
    return parser.text[start.start : parser.tokens[parser.at - 1].end]
