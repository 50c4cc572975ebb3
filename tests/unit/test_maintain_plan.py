"""Which maintenance steps a table's health calls for (``binlake.maintain.plan``), and the
``[maintenance]`` section's checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from binlake.config import MaintenanceConfig, config_from_mapping
from binlake.errors import ConfigError
from binlake.lake.tables.maintenance import SMALL_ONLY, FoldPolicy, TableHealth
from binlake.maintain.plan import Planned, Step, orphans_due, plan_table, purged_files
from binlake.maintain.runner import fold_policy

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
BASE = {"source": {"host": "127.0.0.1", "user": "repl", "server_id": 7}, "state": {"dir": "s"}}


def health(**fields: object) -> TableHealth:
    base: dict[str, object] = {
        "data_files": 10,
        "delete_files": 0,
        "dangling_deletes": 0,
        "small_files": 0,
        "manifests": 1,
        "snapshots": 5,
        "oldest_snapshot": NOW - timedelta(minutes=5),
    }
    return TableHealth(**{**base, **fields})  # type: ignore[arg-type]


def steps(table: TableHealth, *, orphans: bool = True, **config: object) -> list[Step]:
    planned = plan_table(table, MaintenanceConfig(**config), NOW, orphans_due=orphans)  # type: ignore[arg-type]
    return [p.step for p in planned]


def test_a_healthy_table_only_gets_its_orphan_files_looked_for() -> None:
    assert steps(health()) == [Step.ORPHANS]


def test_delete_files_per_data_file_or_small_files_trip_a_compaction_then_a_pruning() -> None:
    assert steps(health(delete_files=4)) == [Step.ORPHANS]
    assert steps(health(delete_files=5)) == [Step.COMPACT, Step.PRUNE, Step.ORPHANS]
    assert steps(health(small_files=16)) == [Step.COMPACT, Step.PRUNE, Step.ORPHANS]
    assert steps(health(delete_files=1), delete_files_per_data_file=0.0)[0] is Step.COMPACT
    assert steps(health(), delete_files_per_data_file=0.0) == [Step.ORPHANS], "no delete file"


def test_dangling_delete_files_are_pruned_and_never_trip_a_compaction() -> None:
    dangling = health(dangling_deletes=7)
    assert steps(dangling, delete_files_per_data_file=0.0) == [Step.PRUNE, Step.ORPHANS]


def test_manifests_and_old_snapshots_beyond_the_kept_ones_trip_their_steps() -> None:
    old = NOW - timedelta(days=2)
    assert steps(health(manifests=32)) == [Step.MANIFESTS, Step.ORPHANS]
    assert steps(health(snapshots=101, oldest_snapshot=old)) == [Step.EXPIRE, Step.ORPHANS]
    assert steps(health(snapshots=100, oldest_snapshot=old)) == [Step.ORPHANS], "all kept"
    young = health(snapshots=500, oldest_snapshot=NOW - timedelta(minutes=59))
    assert steps(young) == [Step.ORPHANS], "none older than an hour"
    every = health(
        delete_files=20,
        small_files=2,
        manifests=40,
        snapshots=200,
        oldest_snapshot=old,
        mostly_deleted_rows=(800_000, 700_000),
    )
    assert steps(every) == list(Step), "in running order"


def test_orphans_not_due_are_left_out_of_the_plan_and_nothing_else_is() -> None:
    assert steps(health(), orphans=False) == []
    every = health(
        delete_files=20,
        small_files=2,
        manifests=40,
        snapshots=200,
        oldest_snapshot=NOW - timedelta(2),
        mostly_deleted_rows=(2_000_000,),
    )
    assert steps(every, orphans=False) == [s for s in Step if s is not Step.ORPHANS]


def test_scheduled_orphans_are_due_at_a_runs_first_round_then_once_per_orphans_every_s() -> None:
    daily = MaintenanceConfig()
    assert daily.orphans_every_s == 86_400
    assert orphans_due(None, 5.0, daily), "not yet this run"
    assert not orphans_due(1000.0, 1000.0 + 86_399.9, daily)
    assert orphans_due(1000.0, 1000.0 + 86_400, daily)
    every_round = MaintenanceConfig(orphans_every_s=0.0)
    assert orphans_due(1000.0, 1000.0, every_round)


def test_a_bad_maintenance_value_is_a_config_error_naming_its_key(tmp_path: Path) -> None:
    too_young = {**BASE, "maintenance": {"orphan_min_age_s": 3600}}
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(too_young, base_dir=tmp_path, environ={})
    assert caught.value.field == "maintenance.orphan_min_age_s"
    for bad in (-1, "daily"):
        with pytest.raises(ConfigError) as cadence:
            orphans = {**BASE, "maintenance": {"orphans_every_s": bad}}
            config_from_mapping(orphans, base_dir=tmp_path, environ={})
        assert cadence.value.field == "maintenance.orphans_every_s", bad
    hourly = {**BASE, "maintenance": {"orphans_every_s": 3600}}
    loaded = config_from_mapping(hourly, base_dir=tmp_path, environ={})
    assert loaded.maintenance.orphans_every_s == 3600.0
    with pytest.raises(ConfigError) as typo:
        typo_section = {**BASE, "maintenance": {"keep_snapshot": 3}}
        config_from_mapping(typo_section, base_dir=tmp_path, environ={})
    assert typo.value.field == "maintenance.keep_snapshot"
    config = config_from_mapping(BASE, base_dir=tmp_path, environ={})
    assert config.maintenance == MaintenanceConfig()


def planned(table: TableHealth, **config: object) -> list[Planned]:
    return plan_table(table, MaintenanceConfig(**config), NOW, orphans_due=False)  # type: ignore[arg-type]


def test_a_table_with_equality_deletes_is_compacted_whole_once_a_threshold_trips() -> None:
    compaction = planned(health(delete_files=6, equality_deletes=1))
    assert [(p.step, p.whole) for p in compaction] == [(Step.COMPACT, True), (Step.PRUNE, False)]
    assert "1 of them equality deletes" in compaction[0].reason
    assert planned(health(delete_files=1, equality_deletes=1)) == [], "under the thresholds"


def test_a_table_of_position_deletes_is_compacted_by_its_small_and_mostly_deleted_files() -> None:
    compaction = planned(health(delete_files=6))
    assert [(p.step, p.whole) for p in compaction] == [(Step.COMPACT, False), (Step.PRUNE, False)]
    assert planned(health(small_files=16))[0].whole is False


def test_position_delete_files_at_the_threshold_are_merged_after_the_pruning() -> None:
    assert steps(health(delete_files=15), orphans=False, delete_files_per_data_file=9.0) == []
    merged = steps(health(delete_files=16), orphans=False, delete_files_per_data_file=9.0)
    assert merged == [Step.DELETES]
    with_equality = health(delete_files=20, equality_deletes=5)
    assert steps(with_equality, orphans=False) == [Step.COMPACT, Step.PRUNE], "15 positions"


def test_the_fold_policy_names_iceberg_s_options_for_small_and_mostly_deleted_files() -> None:
    options = FoldPolicy(small_file_bytes=4 << 20, delete_ratio=0.25).options()
    assert options["min-file-size-bytes"] == str(4 << 20)
    assert options["delete-ratio-threshold"] == "0.25"
    assert "delete-file-threshold" not in options, "a file is not rewritten for one delete"


@pytest.mark.parametrize("ratio", [0, -0.1, 1.5, "x"])
def test_a_delete_ratio_outside_zero_to_one_is_refused(ratio: object, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="delete_ratio"):
        mapping = {**BASE, "maintenance": {"delete_ratio": ratio}}
        config_from_mapping(mapping, base_dir=tmp_path, environ={})


def test_mostly_deleted_files_within_compaction_max_rows_are_folded_in_one_compaction() -> None:
    within = planned(health(delete_files=6, mostly_deleted_rows=(600_000, 400_000)))
    assert [(p.step, p.small_only) for p in within] == [(Step.COMPACT, False), (Step.PRUNE, False)]
    fold = fold_policy(within[0], MaintenanceConfig())
    assert fold == FoldPolicy(4 << 20, 0.3), "small and mostly deleted files, no file bound"
    unbounded = planned(health(small_files=16, mostly_deleted_rows=(9_000_000,)), **NO_BOUND)
    assert [p.step for p in unbounded] == [Step.COMPACT, Step.PRUNE]


NO_BOUND = {"compaction_max_rows": 0}


def test_mostly_deleted_files_over_compaction_max_rows_are_purged_as_many_as_fit_a_round() -> None:
    """A fold of the small files only, then a purge of the files the bound allows; the rest
    wait for the next round's plan, which sees them again."""
    rows = (1_400_000, 300_000, 500_000, 250_000, 200_000)
    over = planned(health(small_files=16, mostly_deleted_rows=rows), compaction_max_rows=1_000_000)
    assert [(p.step, p.small_only, p.files) for p in over] == [
        (Step.COMPACT, True, None),
        (Step.PURGE, False, 1),
        (Step.PRUNE, False, None),
    ]
    assert over[0].reason.endswith("the small files only, the mostly deleted ones purged next")
    assert "5 files with 0.3 of their rows deleted hold 2,650,000 live rows" in over[1].reason
    config = MaintenanceConfig()
    assert fold_policy(over[0], config) == FoldPolicy(4 << 20, SMALL_ONLY)
    purge = fold_policy(over[1], config)
    assert purge == FoldPolicy(0, 0.3, max_files=1)
    assert purge is not None and purge.options()["max-files-to-rewrite"] == "1"
    assert "max-files-to-rewrite" not in FoldPolicy(4 << 20, 0.3).options()
    rest = planned(
        health(small_files=3, delete_files=6, mostly_deleted_rows=rows[1:]),
        compaction_max_rows=10**6,
    )
    assert [(p.step, p.files) for p in rest][:2] == [(Step.COMPACT, None), (Step.PURGE, 2)]


def test_a_round_over_the_bound_with_no_small_file_purges_without_an_empty_fold() -> None:
    rows = (1_400_000, 300_000)
    over = planned(health(delete_files=6, mostly_deleted_rows=rows), compaction_max_rows=10**6)
    assert [(p.step, p.files) for p in over] == [(Step.PURGE, 1), (Step.PRUNE, None)]


@pytest.mark.parametrize(
    ("rows", "bound", "files"),
    [
        ((500, 500, 500), 1000, 2),
        ((500, 500, 500), 1500, 3),
        ((900, 100, 100, 100), 1000, 2),  # whichever two Iceberg meets: at most 1,000 rows
        ((5000, 10), 1000, 1),  # one over the bound goes alone: a file is never split
        ((), 1000, 0),
    ],
)
def test_a_purge_takes_as_many_files_as_the_largest_ones_allow(
    rows: tuple[int, ...], bound: int, files: int
) -> None:
    assert purged_files(rows, bound) == files


def test_a_whole_compaction_of_equality_deletes_is_not_bounded() -> None:
    compaction = planned(health(delete_files=6, equality_deletes=2, mostly_deleted_rows=(5 << 20,)))
    assert [(p.step, p.whole) for p in compaction] == [(Step.COMPACT, True), (Step.PRUNE, False)]
    assert fold_policy(compaction[0], MaintenanceConfig()) is None


def test_compaction_max_rows_is_on_by_default_and_refuses_a_negative_bound(tmp_path: Path) -> None:
    assert MaintenanceConfig().compaction_max_rows == 1_000_000
    with pytest.raises(ConfigError) as caught:
        mapping = {**BASE, "maintenance": {"compaction_max_rows": -1}}
        config_from_mapping(mapping, base_dir=tmp_path, environ={})
    assert caught.value.field == "maintenance.compaction_max_rows"
