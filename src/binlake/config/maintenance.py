"""``[maintenance]``: the thresholds ``binlake maintain`` decides by, per table, what to run
(``binlake.maintain.plan``; docs/configuration.md lists every key)."""

from __future__ import annotations

from dataclasses import dataclass

from binlake.config.section import Section, setting
from binlake.config.values import DAY_S, HOUR_S, float_value, int_value

__all__ = ["MaintenanceConfig"]


@dataclass(frozen=True, kw_only=True)
class MaintenanceConfig(Section):
    """``[maintenance]``: when each step of ``binlake maintain`` runs on a table."""

    #: Compact when the table has at least this many delete files per data file.
    delete_files_per_data_file: float = setting(
        "float",
        float_value(0.0, 1_000_000.0, low_open=False),
        0.5,
        "compact a table (rewrite_data_files, its deletes applied) once it has this many delete "
        "files per data file; 0 = whenever it has one",
    )
    #: Compact when at least this many of its data files are smaller than ``small_file_bytes``.
    small_files: int = setting(
        "int",
        int_value(2, 10_000_000),
        16,
        "compact a table once this many of its data files are smaller than small_file_bytes",
    )
    #: A batch's data file is small; a preloaded or copied table's files are not (folding
    #: those rewrites the table, and moves every key the index holds).
    small_file_bytes: int = setting(
        "int",
        int_value(1, 1 << 40),
        4 * 1024 * 1024,
        "a data file smaller than this counts as small",
    )
    #: A compaction rewrites a data file at least this share of whose rows are deleted.
    delete_ratio: float = setting(
        "float",
        float_value(0.0, 1.0),
        0.3,
        "a compaction (of a table without equality deletes) rewrites a data file once at least "
        "this share of its rows is deleted, and the small ones; other files keep their position "
        "deletes",
    )
    #: The live rows one round's compaction moves out of mostly deleted files at most (the
    #: small files are folded whatever it is); 0 = no bound.
    compaction_max_rows: int = setting(
        "int",
        int_value(0, 1 << 62),
        1_000_000,
        "one round rewrites the mostly deleted files (delete_ratio) whose live rows fit this "
        "many, the largest counted first, at least one file; the rest wait for the next rounds, "
        "and the small files are folded every round; 0 = no bound",
    )
    #: Merge the position-delete files once the table has this many.
    position_delete_files: int = setting(
        "int",
        int_value(1, 10_000_000),
        16,
        "merge a table's position-delete files (rewrite_position_delete_files, one per partition) "
        "once it has this many",
    )
    #: Rewrite the manifests when the current snapshot has at least this many.
    manifests: int = setting(
        "int",
        int_value(2, 10_000_000),
        32,
        "rewrite a table's manifests once its current snapshot has this many",
    )
    #: Expire snapshots older than this, keeping the newest ``keep_snapshots`` (and the
    #: snapshots binlake's tags reference: the applied position's).
    snapshot_max_age_s: float = setting(
        "float",
        float_value(0.0, 3650 * DAY_S, low_open=False),
        HOUR_S,
        "expire snapshots older than this (the newest keep_snapshots, and the applied "
        "position's, are kept)",
    )
    keep_snapshots: int = setting(
        "int",
        int_value(1, 10_000_000),
        100,
        "snapshots every expiry keeps, newest first",
    )
    #: Remove files no snapshot references once they are this old (Iceberg refuses under a day:
    #: a running writer's files not committed yet must never go).
    orphan_min_age_s: float = setting(
        "float",
        float_value(DAY_S, 3650 * DAY_S, low_open=False),
        3 * DAY_S,
        "remove files no snapshot references once they are this old (at least a day: files a "
        "running replicate stored but has not committed yet are younger)",
    )
    #: ``binlake replicate`` maintains its tables every this many seconds (the first round this
    #: long after its start); 0 = never.
    schedule_s: float = setting(
        "float",
        float_value(0.0, 3650 * DAY_S, low_open=False),
        30.0,
        "binlake replicate runs this maintenance on its tables every this many seconds, the "
        "first round this long after its start, beside its batches; 0 = never (run binlake "
        "maintain instead)",
    )
    #: Its rounds look for a table's orphan files (a listing of its folder) at most this often
    #: (the first round of a run always does); ``binlake maintain`` does every run.
    orphans_every_s: float = setting(
        "float",
        float_value(0.0, 3650 * DAY_S, low_open=False),
        DAY_S,
        "binlake replicate's scheduled rounds look for a table's orphan files (a listing of its "
        "folder) at most this often, the first round of a run always; 0 = every round "
        "(binlake maintain always does)",
    )
