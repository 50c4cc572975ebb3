"""The receiver's two timing policies: when to fsync, and how long to wait before reconnecting.

Both take the clock as an argument (``now``, monotonic seconds) so that they are plain state
machines, tested without sleeping.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from binlake.config import ReceiverConfig, SyncPolicy


@dataclass
class SyncSchedule:
    """fsync at transaction boundaries only: after each one (``every-transaction``), or grouped:
    once ``interval_s`` has passed since the first unsynced transaction, or once
    ``max_transactions`` are waiting, whichever comes first.

    The receiver asks ``due(now)`` after each transaction and whenever the stream is idle (so a
    quiet source never leaves a transaction unsynced for longer than the interval), and always
    syncs before it reports progress or stops.
    """

    policy: SyncPolicy
    interval_s: float
    max_transactions: int
    pending: int = 0
    #: When the oldest unsynced transaction was appended (None when nothing is pending).
    oldest: float | None = None

    @classmethod
    def from_config(cls, config: ReceiverConfig) -> SyncSchedule:
        return cls(config.sync, config.sync_interval_ms / 1000.0, config.sync_max_transactions)

    def on_transaction(self, now: float) -> None:
        self.on_transactions(1, now)

    def on_transactions(self, count: int, now: float) -> None:
        """``on_transaction`` for ``count`` transactions appended together at ``now``."""
        if count:
            self.pending += count
            if self.oldest is None:
                self.oldest = now

    @property
    def room(self) -> int:
        """How many transactions may be appended before the count falls due (at least 1):
        a run of transactions appended together stops there, so the fsync comes after the
        same transaction as when they are appended one by one."""
        if self.policy is SyncPolicy.EVERY_TRANSACTION:
            return 1
        return max(1, self.max_transactions - self.pending)

    def due(self, now: float) -> bool:
        if self.pending == 0:
            return False
        if self.policy is SyncPolicy.EVERY_TRANSACTION:
            return True
        if self.pending >= self.max_transactions:
            return True
        return self.oldest is not None and now - self.oldest >= self.interval_s

    def wait_s(self, now: float) -> float | None:
        """How long the receiver may wait for the next event before a sync falls due."""
        if self.oldest is None:
            return None
        return max(0.0, self.interval_s - (now - self.oldest))

    def on_synced(self) -> None:
        self.pending = 0
        self.oldest = None


@dataclass
class Backoff:
    """Capped exponential backoff with full jitter: the n-th wait is uniform in
    [base/2, base] with base = min(max_s, initial_s * 2**n). ``reset()`` after a success."""

    initial_s: float
    max_s: float
    max_attempts: int = 0
    attempts: int = 0
    rng: random.Random = field(default_factory=random.Random)

    @classmethod
    def from_config(cls, config: ReceiverConfig) -> Backoff:
        return cls(
            config.reconnect_initial_s, config.reconnect_max_s, config.reconnect_max_attempts
        )

    @property
    def exhausted(self) -> bool:
        return self.max_attempts > 0 and self.attempts >= self.max_attempts

    def next_wait(self) -> float:
        base = min(self.max_s, self.initial_s * (2 ** min(self.attempts, 62)))
        self.attempts += 1
        return self.rng.uniform(base / 2, base)

    def reset(self) -> None:
        self.attempts = 0
