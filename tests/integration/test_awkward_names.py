"""Issue 11, part 2: databases and tables whose names hold a dot, a space, a backtick, a comma,
non-ASCII letters, or differ only by case, through every CLI command that names tables:
`replicate` (initial snapshot, then streaming), `verify` (all, and ``--tables``), `status`,
`snapshot --tables`; ``[tables]`` include/exclude globs, ``key_columns`` and ``namespace_map``
with those names. Names are (database, table) pairs end to end.

Each command runs once as the `binlake` command (its own process: argument parsing, output);
the runs that only repeat a command (streaming after the first `replicate`, `verify` of every
table) run in this process, on the tests' Spark session, through the same code below the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from binlake.binlog.names import TableName
from binlake_dev.sandbox import MariaDBSandbox
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    describe,
    lake_warehouse,
    module_source,
    replicate_in_process,
    run_binlake,
    run_replicate,
    write_config,
)

source = module_source("awkward-names-source")
WEIRD = "we.ird db"
#: A second database, mapped to another namespace, whose name differs from WEIRD by case only.
OTHER = "WE.IRD db"
TABLES = {
    "tâble x": "(id INT PRIMARY KEY, `select` INT, `col name` VARCHAR(20))",
    "Orders": "(id INT PRIMARY KEY, v INT)",
    "orders": "(id INT PRIMARY KEY, v INT)",  # differs from Orders by case only
    "t`1": "(id INT PRIMARY KEY, v INT)",
    "a.b": "(id INT PRIMARY KEY, v INT)",
    "c,d": "(id INT PRIMARY KEY, v INT)",
    "log x": "(id INT NOT NULL, at INT)",  # no primary key: keyed by [tables] key_columns
    "tmp 1": "(id INT PRIMARY KEY)",  # excluded
}


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def fill(source: MariaDBSandbox, database: str, row: int) -> None:
    """One more row in every table of ``database``, and updates of earlier ones."""
    with source.connect() as conn, conn.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"INSERT INTO {q(database)}.{q(table)} (id) VALUES (%s)", (row,))
        cursor.execute(f"UPDATE {q(database)}.{q('tâble x')} SET `select` = id, `col name` = 'é'")
        cursor.execute(f"UPDATE {q(database)}.`Orders` SET v = id * 2")
        cursor.execute(f"UPDATE {q(database)}.{q('log x')} SET at = id + 1")


def test_every_command_takes_awkward_names_as_pairs(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    with source.connect() as conn, conn.cursor() as cursor:
        for database in (WEIRD, OTHER):
            cursor.execute(f"CREATE DATABASE {q(database)}")
            for table, columns in TABLES.items():
                cursor.execute(f"CREATE TABLE {q(database)}.{q(table)} {columns}")
    fill(source, WEIRD, 1)  # before the initial snapshot
    fill(source, OTHER, 1)
    config = write_config(
        tmp_path / "binlake.toml",
        source,
        warehouse=lake_warehouse(spark),
        include=["`we.ird db`.*", "`WE.IRD db`.*"],
        exclude=["`we.ird db`.`tmp *`", "`WE.IRD db`.`tmp *`"],
        tables='key_columns = { "`we.ird db`.`log x`" = ["id"], "`WE.IRD db`.`log x`" = ["id"] }\n',
        snapshot="initial = true\nchunk_rows = 1\n",
    )
    text = config.read_text("utf-8").replace(
        "[target]\n", '[target]\nnamespace_map = { "WE.IRD db" = "weird_upper" }\n'
    )
    config.write_text(text, "utf-8")
    first = run_replicate(config, "--until-caught-up")
    assert first.returncode == 0, describe(first)
    fill(source, WEIRD, 2)  # streamed
    fill(source, OTHER, 2)
    replicate_in_process(config, spark)

    expected = {TableName(db, t) for db in (WEIRD, OTHER) for t in TABLES if t != "tmp 1"}
    checked = assert_verify_passes(config, spark)  # every table the config selects
    assert {TableName.parse(name) for name in checked} == expected

    chosen = "`we.ird db`.`tâble x`,`we.ird db`.Orders,`WE.IRD db`.`c,d`,`we.ird db`.`t``1`"
    some = run_binlake("verify", config, "--tables", chosen, "--json")
    assert some.returncode == 0, describe(some)
    report = json.loads(some.stdout)["tables"]
    assert [TableName(r["source_database"], r["source_table"]) for r in report] == [
        TableName(WEIRD, "tâble x"),
        TableName(WEIRD, "Orders"),
        TableName(OTHER, "c,d"),
        TableName(WEIRD, "t`1"),
    ]
    assert all(r["status"] == "ok" for r in report)
    assert [TableName.parse(r["table"]) for r in report] == [
        TableName(r["source_database"], r["source_table"]) for r in report
    ]

    status = run_binlake("status", config, "--json")
    assert status.returncode == 0, describe(status)
    sources = {
        TableName(t["source"]["database"], t["source"]["table"])
        for t in json.loads(status.stdout)["tables"]
        if t["source"] is not None
    }
    assert expected <= sources
    human = run_binlake("status", config)
    assert "`we.ird db`.`tâble x`" in human.stdout and "`WE.IRD db`.`a.b`" in human.stdout

    snapshot = run_binlake("snapshot", config, "--tables", "`we.ird db`.`a.b`,`we.ird db`.orders")
    assert snapshot.returncode == 0, describe(snapshot)
    assert "`we.ird db`.`a.b`: done" in snapshot.stdout
    refused = run_binlake("snapshot", config, "--tables", "we.ird db.a.b")
    assert refused.returncode == 64 and "backticks" in refused.stderr
    missing = run_binlake("snapshot", config, "--tables", "`we.ird db`.`A.B`")
    assert missing.returncode != 0 and "not a base table" in missing.stderr
    excluded = run_binlake("snapshot", config, "--tables", "`we.ird db`.`tmp 1`")
    assert excluded.returncode != 0 and "include/exclude" in excluded.stderr
    fill(source, WEIRD, 3)
    replicate_in_process(config, spark)
    assert {TableName.parse(name) for name in assert_verify_passes(config, spark)} == expected
    history = assert_history_is_exactly_once(config, spark)
    assert set(history) == {str(name) for name in expected}
