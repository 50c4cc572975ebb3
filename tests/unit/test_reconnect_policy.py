"""``source.reconnect.retrying``: every connection to the source comes back with the receiver's
backoff; what is not a lost connection is never retried; giving up is a typed error with a
hint; a stop ends the wait."""

from __future__ import annotations

import threading

import pytest

from binlake.errors import (
    SourceAuthError,
    SourceConnectionLostError,
    SourceError,
    SourceUnreachableError,
)
from binlake.source.reconnect import ReconnectPolicy, SourceWaitAbandoned, retrying

FAST = ReconnectPolicy(0.001, 0.004)


class Flaky:
    """Fails with ``errors`` in turn, then answers."""

    def __init__(self, *errors: SourceError) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.resets = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"

    def reset(self) -> None:
        self.resets += 1


def lost() -> SourceConnectionLostError:
    return SourceConnectionLostError("reading column types failed: reset", host="h", port=1)


def test_a_lost_connection_is_opened_again_and_the_action_run_again() -> None:
    flaky = Flaky(lost(), SourceUnreachableError("refused", host="h", port=1), lost())
    waits: list[float] = []
    answer = retrying(flaky, FAST, reset=flaky.reset, notify=lambda _e, wait: waits.append(wait))
    assert answer == "answer"
    assert (flaky.calls, flaky.resets, len(waits)) == (4, 3, 3)
    assert all(0 < w <= FAST.max_s for w in waits)


def test_a_refused_login_is_raised_at_once() -> None:
    flaky = Flaky(SourceAuthError("denied", user="u"))
    with pytest.raises(SourceAuthError):
        retrying(flaky, FAST, reset=flaky.reset)
    assert (flaky.calls, flaky.resets) == (1, 0)


def test_after_max_attempts_it_gives_up_with_a_typed_error_and_a_hint() -> None:
    flaky = Flaky(*(lost() for _ in range(10)))
    policy = ReconnectPolicy(0.001, 0.002, max_attempts=3)
    with pytest.raises(SourceConnectionLostError) as caught:
        retrying(flaky, policy, reset=flaky.reset)
    error = caught.value
    assert "gave up after 3 attempts to reconnect" in error.message
    assert "run the command again" in error.hint
    assert (error.host, error.port) == ("h", 1) and error.exit_code == 69
    assert flaky.calls == 4


def test_an_outage_longer_than_give_up_s_ends_the_wait() -> None:
    flaky = Flaky(*(lost() for _ in range(1000)))
    policy = ReconnectPolicy(0.01, 0.02, give_up_s=0.1)
    with pytest.raises(SourceConnectionLostError, match="without the source"):
        retrying(flaky, policy, reset=flaky.reset)
    assert 3 <= flaky.calls < 1000


def test_a_stop_during_the_wait_abandons_it() -> None:
    stop = threading.Event()
    flaky = Flaky(*(lost() for _ in range(1000)))
    policy = ReconnectPolicy(5.0, 5.0)
    stop.set()
    with pytest.raises(SourceWaitAbandoned):
        retrying(flaky, policy, reset=flaky.reset, stop=stop)
    assert flaky.calls == 1


def test_a_closed_pymysql_connection_is_a_lost_connection() -> None:
    import pymysql

    from binlake.source.errmap import map_pymysql_error
    from binlake.source.settings import ConnectionSettings

    settings = ConnectionSettings("127.0.0.1", 3306, "u", b"", 7)
    error = map_pymysql_error(pymysql.err.InterfaceError(0, ""), settings, during="ROLLBACK")
    assert isinstance(error, SourceConnectionLostError) and error.retryable and error.hint
