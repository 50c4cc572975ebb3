"""Consistent cuts, the pure parts (``binlake.cuts``): which cut an ``--at`` names, which cuts
the retention keeps, the cuts table's row format, the ``[cuts]`` section; and ``binlake cut``
refusing a malformed ``--at`` with a typed error before Spark starts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from binlake.cli.main import run
from binlake.config import config_from_mapping
from binlake.cuts import COPYING, Cut, TableAt, parse_at, protected_snapshots, retained, select
from binlake.errors import ConfigError, CutNotFoundError, CutTableError
from binlake.position import SourcePosition

HOUR = 3600
BASE = {"source": {"host": "127.0.0.1", "user": "repl", "server_id": 7}, "state": {"dir": "s"}}
T0 = int(datetime(2026, 11, 26, 8, 0, tzinfo=UTC).timestamp())


def cut(cut_id: int, offset: int, *, gtid: str = "", at: int = T0, **tables: int) -> Cut:
    return Cut(
        cut_id,
        SourcePosition("mariadb-bin.000002", offset),
        gtid,
        at,
        at * 1000,
        cut_id * 3,
        {f"db.{t}": TableAt(("db", t), s) for t, s in tables.items()},
        {"db.copying": COPYING},
    )


CUTS = [
    cut(1, 100, gtid="0-1-10", at=T0, a=11, b=21),
    cut(2, 200, gtid="0-1-20", at=T0 + HOUR, a=12, b=21),
    cut(3, 300, gtid="0-1-30", at=T0 + 2 * HOUR, a=12, b=22),
]


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        ("latest", 3),
        ("mariadb-bin.000002:250", 2),
        ("mariadb-bin.000002:300", 3),
        ("mariadb-bin.000003:4", 3),
        ("0-1-29", 2),
        ("0-1-10", 1),
        ("2026-11-26T09:30:00", 2),
        ("2026-11-26T10:30:00+01:00", 2),
        (str(T0 + 2 * HOUR), 3),
    ],
)
def test_at_names_the_newest_cut_at_or_before_a_position_gtid_or_time(
    at: str, expected: int
) -> None:
    assert select(list(reversed(CUTS)), parse_at(at)).cut_id == expected


@pytest.mark.parametrize("at", ["mariadb-bin.000002:99", "0-1-9", "2026-11-26T07:59:59"])
def test_a_point_before_the_oldest_retained_cut_is_cut_not_found_naming_the_oldest(
    at: str,
) -> None:
    with pytest.raises(CutNotFoundError) as raised:
        select(CUTS, parse_at(at))
    assert raised.value.oldest == "mariadb-bin.000002:100"
    assert "oldest is cut 1" in str(raised.value)
    assert raised.value.exit_code == 66


def test_no_cut_at_all_is_cut_not_found_with_a_hint() -> None:
    with pytest.raises(CutNotFoundError, match="no consistent cut is recorded yet"):
        select([], parse_at("latest"))


def test_a_mysql_gtid_set_selects_by_containment() -> None:
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    cuts = [cut(1, 100, gtid=f"{uuid}:1-5"), cut(2, 200, gtid=f"{uuid}:1-9")]
    assert select(cuts, parse_at(f"{uuid}:1-7")).cut_id == 1
    assert select(cuts, parse_at(f"{uuid}:1-9")).cut_id == 2


def test_a_malformed_at_is_a_typed_error() -> None:
    with pytest.raises(CutNotFoundError, match="is not latest"):
        parse_at("yesterday")


def test_a_table_pending_unknown_or_added_later_is_a_cut_table_error() -> None:
    chosen = CUTS[0]
    assert chosen.table("db.a") == TableAt(("db", "a"), 11)
    with pytest.raises(CutTableError, match="copy running"):
        chosen.table("db.copying")
    with pytest.raises(CutTableError, match="added after the cut"):
        chosen.table("db.later")


def test_a_cut_survives_its_row_format() -> None:
    assert Cut.from_row(CUTS[1].row()) == CUTS[1]
    assert CUTS[1].describe()["source_time"] == "2026-11-26T09:00:00+00:00"


def test_retention_keeps_the_newest_and_the_first_cut_of_each_interval_within_keep_for() -> None:
    # Four cuts an hour for two days: keep the newest 3, and the first of each hour of the last
    # day only.
    cuts = [cut(i + 1, 100 + i, at=T0 + i * 900) for i in range(4 * 48)]
    now = T0 + 48 * HOUR
    kept = retained(cuts, now_s=now, keep_last=3, keep_every_s=HOUR, keep_for_s=24 * HOUR)
    newest = {190, 191, 192}
    hourly = {
        c.cut_id for c in cuts if c.source_time >= now - 24 * HOUR and (c.cut_id - 1) % 4 == 0
    }
    assert kept == newest | hourly
    assert len(hourly) == 24


def test_snapshots_named_by_retained_cuts_are_protected_per_table() -> None:
    assert protected_snapshots(CUTS, ("db", "a")) == {11, 12}
    assert protected_snapshots(CUTS, ("db", "b")) == {21, 22}
    assert protected_snapshots(CUTS[:1], ("db", "zzz")) == set()


def test_the_cuts_section_has_defaults_and_refuses_a_table_without_a_namespace() -> None:
    config = config_from_mapping(BASE, base_dir=Path("/tmp"))
    assert config.cuts.identifier == ("binlake", "cuts")
    assert config.cuts.every_s == 5.0
    with pytest.raises(ConfigError, match=r"\[cuts\] table must be namespace.table"):
        config_from_mapping({**BASE, "cuts": {"table": "cuts"}}, base_dir=Path("/tmp"))


def test_binlake_cut_refuses_a_malformed_at_before_spark_with_exit_66(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "binlake.toml"
    config.write_text(
        '[source]\nhost = "h"\nuser = "u"\nserver_id = 7\n[state]\ndir = "s"\n', "utf-8"
    )
    assert run(["cut", "--config", str(config), "--at", "last tuesday"]) == 66
    err = capsys.readouterr().err
    assert "error: --at 'last tuesday' is not latest" in err
    assert "hint: e.g. --at latest" in err
    assert "Traceback" not in err
