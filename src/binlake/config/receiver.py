"""``[receiver]``: when the receiver fsyncs the relay log, how large a relay file grows, and how
it reconnects to the source (docs/configuration.md, "How the receiver uses them")."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from binlake.config.section import Loading, Section, setting
from binlake.config.values import enum_value, float_value, int_value
from binlake.errors import ConfigError

__all__ = ["ReceiverConfig", "SyncPolicy"]

MIN_RELAY_FILE_SIZE = 4096
MAX_RELAY_FILE_SIZE = 1 << 30


class SyncPolicy(StrEnum):
    """When the receiver fsyncs the relay log (always at a transaction boundary)."""

    GROUPED = "grouped"
    EVERY_TRANSACTION = "every-transaction"


@dataclass(frozen=True, kw_only=True)
class ReceiverConfig(Section):
    """``[receiver]``: fsync grouping, relay file size, reconnect policy."""

    sync: SyncPolicy = setting(
        "grouped or every-transaction",
        enum_value(SyncPolicy),
        SyncPolicy.GROUPED,
        "grouped: one fsync per sync_interval_ms or sync_max_transactions; every-transaction: "
        "one per transaction",
    )
    sync_interval_ms: int = setting(
        "int", int_value(1, 60_000), 50, "grouped: longest wait before an fsync"
    )
    sync_max_transactions: int = setting(
        "int", int_value(1, 1_000_000), 1000, "grouped: most transactions per fsync"
    )
    max_relay_file_size: int = setting(
        "int",
        int_value(MIN_RELAY_FILE_SIZE, MAX_RELAY_FILE_SIZE),
        128 * 1024 * 1024,
        "a relay file is rotated at the first transaction boundary past this",
    )
    reconnect_initial_s: float = setting(
        "float",
        float_value(0.0, 3600.0),
        0.5,
        "first wait before reconnecting; doubles per failed attempt (with jitter)",
    )
    reconnect_max_s: float = setting(
        "float", float_value(0.0, 3600.0), 30.0, "longest wait between attempts"
    )
    #: 0 = retry forever (while running without --until-caught-up).
    reconnect_max_attempts: int = setting(
        "int",
        int_value(0, 1_000_000),
        0,
        "give up after this many failed attempts in a row; 0 = never",
    )
    #: With --until-caught-up: give up when the source stays unreachable this long.
    catch_up_give_up_s: float = setting(
        "float",
        float_value(0.0, 86_400.0),
        60.0,
        "with --until-caught-up: give up when the source stays unreachable this long",
    )
    progress_interval_s: float = setting(
        "float",
        float_value(0.0, 3600.0),
        5.0,
        "seconds between progress log lines (when not on a terminal)",
    )

    @classmethod
    def from_values(cls, values: dict[str, Any], loading: Loading) -> Self:
        """``reconnect_max_s`` is at least ``reconnect_initial_s``."""
        if values["reconnect_max_s"] < values["reconnect_initial_s"]:
            raise ConfigError(
                f"[receiver] reconnect_max_s ({values['reconnect_max_s']:g}) is smaller than "
                f"reconnect_initial_s ({values['reconnect_initial_s']:g})",
                field="receiver.reconnect_max_s",
            )
        return cls(**values)
