"""A commit another writer beat, tried again: re-read the table, re-plan, commit.

Iceberg's concurrency is optimistic: a commit is built on the table metadata it read, and fails
(``CommitConflictError``, lake/spark_errors.py) when another writer committed first in a way it
cannot be rebased on (an ``ALTER TABLE ... SET TBLPROPERTIES`` loop outrunning Iceberg's own
four retries, a DELETE or a compaction that removed files this commit's deletes refer to). A
failed commit changed nothing, so the work can be planned again against the new metadata.

``CommitRetry.run(table, attempt, reload)`` is that loop, the same for every binlake commit to a
table, whatever the statement that commits (a batch's MERGE or its successor, an ALTER's schema
changes and positioned commit, a table action, a snapshot chunk): it runs ``attempt(retries)``;
on a conflict it waits (capped exponential backoff with jitter, ``source.policy.Backoff``, from
``FIRST_WAIT_S`` to ``[applier] commit_retry_max_s``), calls ``reload()`` so that the table's
schema and applied position are read anew from the catalog (nothing known before the conflict
is trusted), and runs ``attempt`` again; ``attempt`` plans from that state, so a transaction the
table already holds by position (its commit went through after all: an unknown commit state) is
skipped and nothing is applied twice. After ``[applier] commit_retries`` retries it raises
``CommitConflictError`` with ``attempts``. Each retry is reported (``on_retry``: the console and
the ``binlake_commit_retries_total`` metric), and the commit that goes through carries
``binlake.retries`` (``with_retries``), so `binlake status` counts them from the lake itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from binlake.config import ApplierConfig
from binlake.errors import CommitConflictError
from binlake.source.policy import Backoff

T = TypeVar("T")
#: The snapshot property: how many times this commit was tried again before it went through.
RETRIES = "binlake.retries"
FIRST_WAIT_S = 0.1
#: Told each retry: the table, the retry's number (1 = the first), the conflict, the wait.
OnRetry = Callable[[str, int, CommitConflictError, float], None]


@dataclass(frozen=True)
class CommitRetryPolicy:
    #: Retries after the first commit (0: none).
    retries: int = 10
    #: Longest wait between two tries.
    max_s: float = 5.0

    @classmethod
    def from_config(cls, config: ApplierConfig) -> CommitRetryPolicy:
        return cls(config.commit_retries, config.commit_retry_max_s)


class CommitRetry:
    def __init__(
        self,
        policy: CommitRetryPolicy | None = None,
        on_retry: OnRetry | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.policy = policy or CommitRetryPolicy()
        self.on_retry = on_retry
        self.sleep = sleep

    def run(self, table: str, attempt: Callable[[int], T], reload: Callable[[], None]) -> T:
        """``attempt(retries)`` until it commits (see the module docstring)."""
        policy = self.policy
        backoff = Backoff(FIRST_WAIT_S, max(FIRST_WAIT_S, policy.max_s), policy.retries)
        while True:
            try:
                return attempt(backoff.attempts)
            except CommitConflictError as error:
                if backoff.attempts >= policy.retries:
                    raise _gave_up(table, error, backoff.attempts + 1) from error
                wait = backoff.next_wait()
                if self.on_retry is not None:
                    self.on_retry(table, backoff.attempts, error, wait)
                self.sleep(wait)
                reload()


def with_retries(properties: Mapping[str, str], retries: int) -> dict[str, str]:
    """The commit's ``binlake.*`` properties, with ``binlake.retries`` when it was retried."""
    out = dict(properties)
    if retries:
        out[RETRIES] = str(retries)
    return out


def _gave_up(table: str, error: CommitConflictError, attempts: int) -> CommitConflictError:
    return CommitConflictError(
        f"gave up after {attempts} commits: another writer committed first each time "
        f"({error.reason})",
        hint="find the writer that commits to this table without pause (a maintenance loop?) "
        "and slow it down, or raise [applier] commit_retries; a restart re-applies from the "
        "table's newest binlake snapshot",
        table=error.table or table,
        statement=error.statement,
        reason=error.reason,
        attempts=attempts,
    )
