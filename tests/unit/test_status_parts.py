"""Pieces of `binlake status`: byte distances across binlog files, and Iceberg metadata read
straight from a Hadoop catalog folder (the table spec's JSON, the version hint's rules)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from binlake.binlog.names import TableGlob, TableName
from binlake.config import load_config
from binlake.lake.catalog.metadata import LakeLineage, LakeSnapshot, find_tables, read_table
from binlake.lake.catalog.target import LakeTarget, lake_target
from binlake.position import SourcePosition
from binlake.relay.scan import RelayFollower
from binlake.verify.status import SourceStatus, bytes_between, table_status

FILES = (("mariadb-bin.000001", 1000), ("mariadb-bin.000002", 500), ("mariadb-bin.000003", 300))


def p(number: int, offset: int) -> SourcePosition:
    return SourcePosition(f"mariadb-bin.{number:06d}", offset)


def test_bytes_between_positions_count_across_files_with_their_sizes() -> None:
    assert bytes_between(p(3, 100), p(3, 300), FILES) == 200
    assert bytes_between(p(1, 900), p(3, 40), FILES) == 100 + 500 + 40
    assert bytes_between(p(3, 300), p(2, 4), FILES) == 0, "ahead counts as nothing behind"
    assert bytes_between(p(9, 4), p(10, 4), FILES) is None, "a file no longer listed"


def metadata(snapshots: list[dict[str, Any]], main: int | None) -> dict[str, Any]:
    data: dict[str, Any] = {"format-version": 2, "snapshots": snapshots}
    if main is not None:
        data["refs"] = {"main": {"snapshot-id": main, "type": "branch"}}
        data["current-snapshot-id"] = main
    return data


def snap(sid: int, parent: int | None, position: str | None = None) -> dict[str, Any]:
    summary = {"operation": "append"}
    if position is not None:
        summary["binlake.position"] = position
    out: dict[str, Any] = {"snapshot-id": sid, "timestamp-ms": sid * 1000, "summary": summary}
    if parent is not None:
        out["parent-snapshot-id"] = parent
    return out


def write_version(table_dir: Path, version: int, data: dict[str, Any], gz: bool = False) -> None:
    meta = table_dir / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(data).encode()
    if gz:
        (meta / f"v{version}.gz.metadata.json").write_bytes(gzip.compress(raw))
    else:
        (meta / f"v{version}.metadata.json").write_bytes(raw)


def test_the_current_version_follows_a_lagging_hint_and_reads_compressed_files(
    tmp_path: Path,
) -> None:
    table = tmp_path / "shop" / "orders"
    write_version(table, 1, metadata([], None))
    write_version(table, 2, metadata([snap(1, None, "f.000001:100")], 1))
    lineage = [snap(1, None, "f.000001:100"), snap(2, 1, "f.000001:200"), snap(3, 2)]
    write_version(table, 3, metadata(lineage, 3), gz=True)
    (table / "metadata" / "version-hint.text").write_text("2\n")
    lake = read_table(tmp_path, ("shop", "orders"))
    assert lake is not None
    assert [s.snapshot_id for s in lake.lineage] == [3, 2, 1]
    latest = lake.latest_binlake
    assert latest is not None and str(latest.position) == "f.000001:200"
    assert not lake.lineage_cut


TEMP_METADATA = "5d0c0b8e-2f6a-4f0e-9c1a-0d8f2b7c3e41.metadata.json"
TEMP_HINT = "0a9e6f3c-41b2-4c55-8d3e-7b1f9e2a6c10-version-hint.temp"


def committing(meta: Path, step: int) -> None:
    """Version 2 of a table at version 1 as Iceberg's HadoopTableOperations.commit writes it,
    up to ``step``: the new metadata under a temporary name (half written, then whole), renamed
    to v2, the new hint under a temporary name, the old hint deleted, the new one renamed into
    place (Hadoop's local file system writes a ``.crc`` beside each file)."""
    whole = json.dumps(metadata([snap(1, None, "f.000001:100"), snap(2, 1, "f.000001:200")], 2))
    hint = meta / "version-hint.text"
    steps: list[Callable[[], object]] = [
        lambda: (meta / TEMP_METADATA).write_text(whole[: len(whole) // 2]),
        lambda: (meta / TEMP_METADATA).write_text(whole),
        lambda: (meta / f".{TEMP_METADATA}.crc").write_text("crc"),
        lambda: (meta / TEMP_METADATA).rename(meta / "v2.metadata.json"),
        lambda: (meta / TEMP_HINT).write_text("2"),
        hint.unlink,
        lambda: (meta / TEMP_HINT).rename(hint),
    ]
    for do in steps[:step]:
        do()


@pytest.mark.parametrize("step", range(8))
def test_a_table_read_while_a_commit_runs_is_at_the_old_version_or_the_new_one_never_between(
    tmp_path: Path, step: int
) -> None:
    table = tmp_path / "ns" / "t"
    write_version(table, 1, metadata([snap(1, None, "f.000001:100")], 1))
    (table / "metadata" / "version-hint.text").write_text("1")
    (table / "metadata" / ".v1.metadata.json.crc").write_text("crc")
    committing(table / "metadata", step)
    lake = read_table(tmp_path, ("ns", "t"))
    assert lake is not None
    expected = [2, 1] if step >= 4 else [1]  # from the rename of v2 on
    assert [s.snapshot_id for s in lake.lineage] == expected


def test_the_lineage_is_the_main_branch_and_an_expired_parent_cuts_it(tmp_path: Path) -> None:
    table = tmp_path / "ns" / "t"
    rolled_back = snap(4, 2, "f.000001:900")
    write_version(table, 1, metadata([snap(2, 1, "f.000001:200"), snap(3, 2), rolled_back], 3))
    lake = read_table(tmp_path, ("ns", "t"))
    assert lake is not None
    assert [s.snapshot_id for s in lake.lineage] == [3, 2] and lake.lineage_cut
    latest = lake.latest_binlake
    assert latest is not None and str(latest.position) == "f.000001:200"


def tagged(data: dict[str, Any], **tags: int) -> dict[str, Any]:
    for name, sid in tags.items():
        data["refs"][name.replace("_", "-")] = {"snapshot-id": sid, "type": "tag"}
    return data


def test_a_lineage_cut_above_every_binlake_snapshot_goes_on_with_the_tagged_ones(
    tmp_path: Path,
) -> None:
    copy = snap(2, 1, "f.000001:200")
    copy["summary"]["binlake.snapshot"] = "{}"
    kept = [copy, snap(5, 4, "f.000001:500"), snap(7, 6), snap(8, 7)]  # 7, 8: compactions
    table = tmp_path / "ns" / "t"
    write_version(table, 1, tagged(metadata(kept, 8), binlake_applied=5, binlake_copy=2))
    lake = read_table(tmp_path, ("ns", "t"))
    assert lake is not None and not lake.lineage_cut
    assert [s.snapshot_id for s in lake.lineage] == [8, 7, 5, 2]
    latest = lake.latest_binlake
    assert latest is not None and str(latest.position) == "f.000001:500"
    write_version(table, 2, metadata(kept, 8))  # no tag: a commit's tag move was cut short
    untagged = read_table(tmp_path, ("ns", "t"))
    assert untagged is not None and untagged.lineage_cut and untagged.latest_binlake is None
    after = [*kept, snap(9, 8, "f.000001:900")]  # binlake committed again: the tag is on it
    write_version(table, 3, tagged(metadata(after, 9), binlake_applied=9))
    again = read_table(tmp_path, ("ns", "t"))
    assert again is not None and not again.lineage_cut
    assert [s.snapshot_id for s in again.lineage] == [9, 8, 7]


def test_tables_are_found_at_any_namespace_depth_and_empty_ones_have_no_position(
    tmp_path: Path,
) -> None:
    write_version(tmp_path / "a" / "t1", 1, metadata([], None))
    write_version(tmp_path / "a" / "b" / "t2", 1, metadata([], None))
    (tmp_path / "a" / "not_a_table").mkdir()
    assert find_tables(tmp_path) == [("a", "b", "t2"), ("a", "t1")]
    empty = read_table(tmp_path, ("a", "t1"))
    assert empty is not None and empty.lineage == () and empty.latest_binlake is None
    assert find_tables(tmp_path / "missing") == []


N, G = TableName.parse, TableGlob.parse


def test_namespace_map_and_table_globs() -> None:
    target = LakeTarget(
        warehouse=Path("/w"),
        namespace_map={"shop": "retail"},
        include=(G("shop.*"), G("crm.customers")),
        exclude=(G("shop.tmp_*"),),
    )
    assert target.lake_table(N("shop.orders")) == "`lake`.`retail`.`orders`"
    assert target.source_table(("retail", "orders")) == N("shop.orders")
    assert target.source_table(("shop", "orders")) is None, "shop maps elsewhere"
    assert target.selected(N("shop.orders")) and target.selected(N("crm.customers"))
    assert not target.selected(N("shop.tmp_1")) and not target.selected(N("crm.leads"))
    assert not LakeTarget(warehouse=Path("/w")).selected(N("mysql.user"))


def test_a_table_whose_binlake_snapshots_were_all_expired_has_an_unknown_position() -> None:
    cut = LakeLineage(("shop", "orders"), (LakeSnapshot(7, 6, 0, {}),), lineage_cut=True)
    follower = RelayFollower(Path("/never/read"))
    follower.end = p(3, 300)
    source = SourceStatus("db:3306", True, p(3, 300), FILES)
    status = table_status(cut, LakeTarget(warehouse=Path("/w")), follower, source, now=0.0)
    assert status.applied_position is None and status.problem is not None
    assert (status.pending_transactions, status.lag_bytes, status.lag_seconds) == (None, None, None)


def test_the_target_comes_from_the_config_sections(tmp_path: Path) -> None:
    config_file = tmp_path / "binlake.toml"
    config_file.write_text(
        '[source]\nhost = "db"\nuser = "repl"\nserver_id = 7\n[state]\ndir = "state"\n'
        '[target]\nwarehouse = "lake"\ncatalog = "cat"\nnamespace_map = { shop = "retail" }\n'
        '[tables]\ninclude = ["shop.*"]\nkey_columns = { "shop.log" = ["id"] }\n'
        '[spark]\nconf = { "spark.sql.catalog.cat" = "org.apache.iceberg.spark.SparkCatalog" }\n'
    )
    target = lake_target(load_config(config_file, environ={}))
    assert target.warehouse == tmp_path / "lake" and target.catalog == "cat"
    assert target.lake_table(N("shop.orders")) == "`cat`.`retail`.`orders`"
    assert target.key_columns == {N("shop.log"): ("id",)} and not target.embedded
    assert target.selected(N("shop.orders")) and not target.selected(N("crm.orders"))
    default = tmp_path / "default.toml"
    default.write_text('[source]\nhost = "db"\nuser = "u"\nserver_id = 7\n[state]\ndir = "s"\n')
    assert lake_target(load_config(default, environ={})).warehouse == tmp_path / "warehouse"


def test_awkward_names_map_to_namespaces_and_match_globs_as_pairs() -> None:
    target = LakeTarget(
        warehouse=Path("/w"),
        namespace_map={"we.ird db": "weird"},
        include=(G("`we.ird db`.*"), G("Shop.Orders")),
        exclude=(G("`we.ird db`.`tmp *`"),),
    )
    weird = TableName("we.ird db", "tâble x")
    assert target.identifier(weird) == ("weird", "tâble x")
    assert target.lake_table(weird) == "`lake`.`weird`.`tâble x`"
    assert target.source_table(("weird", "tâble x")) == weird
    assert target.selected(weird) and not target.selected(TableName("we.ird db", "tmp 1"))
    assert not target.selected(TableName("we", "ird db.tâble x"))  # joined alike, not the same
    assert target.selected(TableName("Shop", "Orders"))
    assert not target.selected(TableName("shop", "orders"))  # names differ only by case
    assert LakeTarget(warehouse=Path("/w")).identifier(weird) == ("we.ird db", "tâble x")


def _table(i: int, *, lag_s: float = 0.0, pending: int = 0, problem: str | None = None) -> Any:
    from binlake.verify.status import TableStatus

    return TableStatus(
        f"lake.wide.t{i:03d}", TableName("wide", f"t{i:03d}"), p(1, 100), 1, 1_700_000_000_000,
        "1", pending, pending * 50, lag_s, problem=problem,
    )  # fmt: skip


def test_status_of_500_tables_is_a_summary_and_the_furthest_behind_first() -> None:
    from binlake.cli.status_cmd import SHOWN_TABLES, render_status
    from binlake.verify.status import RelayStatus, StatusReport

    tables = [_table(i) for i in range(500)]
    tables[7] = _table(7, lag_s=3.5, pending=2)
    tables[420] = _table(420, lag_s=12.0, pending=9)
    tables[99] = _table(99, problem="its snapshots were expired")
    relay = RelayStatus(Path("/r"), 1, 10, p(1, 900), None, None, None, 0)
    report = StatusReport(SourceStatus("h:1", True), relay, tuple(tables), "lake", Path("/w"), 0.0)
    text = render_status(report)
    lines = text.splitlines()
    summary = next(line for line in lines if line.startswith("tables"))
    assert summary == (
        "tables     500: 497 caught up, 2 behind (furthest: wide.t420, lag 12.0 s), 1 unreadable"
    )
    rows = [line.split()[0] for line in lines[lines.index(summary) + 2 :] if line.startswith("  w")]
    assert rows[:3] == ["wide.t099", "wide.t420", "wide.t007"]  # unreadable, then by lag
    assert len(rows) == SHOWN_TABLES
    assert lines[-1].startswith("  ... and 480 more") and "--all" in lines[-1]
    every = render_status(report, every_table=True)
    assert sum(1 for line in every.splitlines() if line.startswith("  wide.")) == 500
