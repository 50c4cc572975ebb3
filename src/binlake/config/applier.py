"""``[applier]``: how large ``binlake replicate``'s batches grow, how long it rides out a failing
catalog or another writer's commits, how a keyed table's replaced rows are deleted, and its
metrics endpoint (docs/configuration.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from binlake.config.section import Section, setting
from binlake.config.values import enum_value, float_value, int_value

__all__ = ["ApplierConfig", "DeleteMode"]


class DeleteMode(StrEnum):
    """How a keyed table's row delta deletes the rows a batch replaces."""

    #: By position (data file, row number) from the key index: readers pay nothing extra.
    POSITION = "position"
    #: By key (an equality-delete file per batch): no index, every reader pays for them.
    EQUALITY = "equality"


@dataclass(frozen=True, kw_only=True)
class ApplierConfig(Section):
    """``[applier]``: batch bounds and the metrics endpoint."""

    max_transactions: int = setting(
        "int",
        int_value(1, 10_000_000),
        100_000,
        "a batch ends after this many source transactions",
    )
    max_bytes: int = setting(
        "int",
        int_value(1024, 1 << 34),
        64 * 1024 * 1024,
        "a batch ends once its transactions hold this many relay-log bytes",
    )
    max_seconds: float = setting(
        "float",
        float_value(0.0, 3600.0),
        2.0,
        "a batch ends this long after its first transaction was read",
    )
    #: The longest a batch stays open when the one before took long to commit.
    max_lag_s: float = setting(
        "float",
        float_value(0.0, 3600.0),
        10.0,
        "a batch stays open as long as the batch before took to commit (when that is longer "
        "than max_seconds), at most this long",
    )
    #: A batch's tables commit side by side on this many threads (``apply.commit_pool``).
    commit_threads: int = setting(
        "int",
        int_value(1, 64),
        4,
        "a batch's tables are committed by this many threads side by side (each table's "
        "commits stay in order; 1: one table at a time)",
    )
    #: Port of the Prometheus endpoint; 0 = none.
    metrics_port: int = setting(
        "int",
        int_value(0, 65535),
        0,
        "port of the Prometheus metrics endpoint of binlake replicate; 0 = none",
    )
    #: How long a batch waits out a failing catalog before binlake stops.
    catalog_give_up_s: float = setting(
        "float",
        float_value(0.0, 86_400.0),
        300.0,
        "a batch the catalog failed is retried (backoff of [receiver] reconnect_*) this long, "
        "then binlake replicate stops",
    )
    #: Commits tried again after another writer committed to the table first.
    commit_retries: int = setting(
        "int",
        int_value(0, 10_000),
        10,
        "conflicts in a row with another writer's commit after which binlake replicate stops; "
        "each waits the [receiver] reconnect_* backoff, then the batch is applied again (0: never)",
    )
    #: How a row delta deletes the rows it replaces (docs/architecture.md, "The key index").
    deletes: DeleteMode = setting(
        "position or equality",
        enum_value(DeleteMode),
        DeleteMode.POSITION,
        "how a keyed table's batch deletes the rows it replaces: position (position-delete "
        "files, the positions from the key index in the state folder) or equality "
        "(equality-delete files: no index, every reader applies them)",
    )
