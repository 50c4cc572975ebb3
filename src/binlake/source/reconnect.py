"""Every connection binlake holds to the source comes back the same way: the receiver's backoff.

``retrying(action, policy, ...)`` runs ``action``; when it fails with a retryable
``SourceError`` (the connection was lost or refused: ``SourceConnectionLostError``,
``SourceUnreachableError``, ``SourceProtocolError``) it calls ``reset`` (close the broken
connection), waits the policy's next backoff (``policy.Backoff``: capped exponential with
jitter, from ``[receiver] reconnect_initial_s`` / ``reconnect_max_s``), and runs ``action``
again from its start on a new connection. A refused login, a missing privilege or a lost
position are not retried. It gives up, raising the last error with a hint that says so, after
``reconnect_max_attempts`` failed attempts (0: never) or once the outage has lasted
``give_up_s`` (when set: one-shot commands bound their wait). A ``stop`` event set during a wait
ends it with ``SourceWaitAbandoned`` (the caller is stopping; nothing was half done).

So each ``action`` must be whole on its own: read-only statements (information_schema, time
conversions, a snapshot chunk read in its own transaction, a status query), never a write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from binlake.config import ReceiverConfig
from binlake.errors import SourceConnectionLostError, SourceError
from binlake.source.policy import Backoff

T = TypeVar("T")
GAVE_UP_HINT = (
    "check that the source runs and is reachable from here, then run the command again "
    "(what was done before the outage is kept)"
)
#: Told each retry: what failed, and the seconds before the next attempt.
Notify = Callable[[SourceError, float], None]


class SourceWaitAbandoned(Exception):  # noqa: N818 - control flow, not an error to report
    """A stop was requested while waiting to reconnect: the caller ends its work cleanly."""


@dataclass(frozen=True)
class ReconnectPolicy:
    """The receiver's reconnect settings, shared by every connection to the source."""

    initial_s: float
    max_s: float
    #: Failed attempts before giving up (0: never).
    max_attempts: int = 0
    #: Seconds of outage before giving up (None: never).
    give_up_s: float | None = None

    @classmethod
    def from_config(cls, config: ReceiverConfig, give_up_s: float | None = None) -> ReconnectPolicy:
        return cls(
            config.reconnect_initial_s,
            config.reconnect_max_s,
            config.reconnect_max_attempts,
            give_up_s,
        )

    def backoff(self) -> Backoff:
        return Backoff(self.initial_s, self.max_s, self.max_attempts)


def retrying(
    action: Callable[[], T],
    policy: ReconnectPolicy,
    *,
    reset: Callable[[], None],
    notify: Notify | None = None,
    stop: threading.Event | None = None,
) -> T:
    """``action()``, retried on a new connection after retryable source errors (see the
    module docstring)."""
    backoff = policy.backoff()
    outage_started: float | None = None
    while True:
        try:
            return action()
        except SourceError as error:
            if not error.retryable:
                raise
            reset()
            now = time.monotonic()
            outage_started = now if outage_started is None else outage_started
            _check_give_up(error, policy, backoff, now - outage_started)
            wait = backoff.next_wait()
            if notify is not None:
                notify(error, wait)
            if stop is not None:
                if stop.wait(wait):
                    raise SourceWaitAbandoned(str(error)) from error
            else:
                time.sleep(wait)


def _check_give_up(
    error: SourceError, policy: ReconnectPolicy, backoff: Backoff, outage_s: float
) -> None:
    if backoff.exhausted:
        reason = f"{backoff.attempts} attempts to reconnect"
    elif policy.give_up_s is not None and outage_s >= policy.give_up_s:
        reason = f"{outage_s:.0f} s without the source"
    else:
        return
    hint = error.hint
    if hint == SourceConnectionLostError.default_hint:  # it says binlake goes on retrying
        hint = GAVE_UP_HINT
    raise type(error)(
        f"gave up after {reason}: {error.message}",
        hint=hint,
        code=error.code,
        host=error.host,
        port=error.port,
    ) from error
