"""``[maintenance]``: the thresholds ``binlake maintain`` decides by, per table, what to run
(``binlake.maintain.plan``; docs/configuration.md lists every key).

Re-exported by ``binlake.config``, which loads and checks the whole file.
"""

from __future__ import annotations

from dataclasses import dataclass

from binlake.config.values import Key, float_value, int_value

__all__ = ["MAINTENANCE_KEYS", "MaintenanceConfig"]

DAY_S = 86_400.0


@dataclass(frozen=True)
class MaintenanceConfig:
    """``[maintenance]``: when each step of ``binlake maintain`` runs on a table."""

    #: Compact when the table has at least this many delete files per data file.
    delete_files_per_data_file: float = 0.5
    #: Compact when at least this many of its data files are smaller than ``small_file_bytes``.
    small_files: int = 16
    small_file_bytes: int = 32 * 1024 * 1024
    #: Rewrite the manifests when the current snapshot has at least this many.
    manifests: int = 32
    #: Expire snapshots older than this, keeping the newest ``keep_snapshots`` (and the
    #: snapshots binlake's tags reference: the applied position's).
    snapshot_max_age_s: float = DAY_S
    keep_snapshots: int = 100
    #: Remove files no snapshot references once they are this old (Iceberg refuses under a day:
    #: a running writer's files not committed yet must never go).
    orphan_min_age_s: float = 3 * DAY_S
    #: ``binlake replicate`` maintains its tables every this many seconds; 0 = never.
    schedule_s: float = 0.0
    #: Its rounds look for a table's orphan files (a listing of its folder) at most this often
    #: (the first round of a run always does); ``binlake maintain`` does every run.
    orphans_every_s: float = DAY_S


MAINTENANCE_KEYS: tuple[Key, ...] = (
    Key(
        "delete_files_per_data_file",
        "float",
        float_value(0.0, 1_000_000.0, low_open=False),
        0.5,
        "compact a table (rewrite_data_files, its deletes applied) once it has this many delete "
        "files per data file; 0 = whenever it has one",
    ),
    Key(
        "small_files",
        "int",
        int_value(2, 10_000_000),
        16,
        "compact a table once this many of its data files are smaller than small_file_bytes",
    ),
    Key(
        "small_file_bytes",
        "int",
        int_value(1, 1 << 40),
        32 * 1024 * 1024,
        "a data file smaller than this counts as small",
    ),
    Key(
        "manifests",
        "int",
        int_value(2, 10_000_000),
        32,
        "rewrite a table's manifests once its current snapshot has this many",
    ),
    Key(
        "snapshot_max_age_s",
        "float",
        float_value(0.0, 3650 * DAY_S, low_open=False),
        DAY_S,
        "expire snapshots older than this (the newest keep_snapshots, and the applied "
        "position's, are kept)",
    ),
    Key(
        "keep_snapshots",
        "int",
        int_value(1, 10_000_000),
        100,
        "snapshots every expiry keeps, newest first",
    ),
    Key(
        "orphan_min_age_s",
        "float",
        float_value(DAY_S, 3650 * DAY_S, low_open=False),
        3 * DAY_S,
        "remove files no snapshot references once they are this old (at least a day: files a "
        "running replicate stored but has not committed yet are younger)",
    ),
    Key(
        "schedule_s",
        "float",
        float_value(0.0, 3650 * DAY_S, low_open=False),
        0.0,
        "binlake replicate runs this maintenance on its tables every this many seconds, "
        "beside its batches; 0 = never (run binlake maintain instead)",
    ),
    Key(
        "orphans_every_s",
        "float",
        float_value(0.0, 3650 * DAY_S, low_open=False),
        DAY_S,
        "binlake replicate's scheduled rounds look for a table's orphan files (a listing of its "
        "folder) at most this often, the first round of a run always; 0 = every round "
        "(binlake maintain always does)",
    ),
)
