"""Riding out a failing catalog (``binlake.apply.catalog_retry``): back off and probe until the
catalog answers, give up after ``catalog_give_up_s`` with the last error, stop at once when
asked, and never wait out an error that waiting cannot cure."""

from __future__ import annotations

import io
import random
import threading
import time

import pytest

from binlake.apply.catalog_retry import CatalogRetry, retryable
from binlake.console import Console
from binlake.errors import (
    CatalogAuthError,
    CatalogCommitUnknownError,
    CatalogUnreachableError,
    SparkStatementError,
)
from binlake.source.policy import Backoff

DOWN = CatalogUnreachableError("the catalog database cannot be reached: refused")


class Catalog:
    """Answers after ``failures`` probes failed with ``error``."""

    def __init__(self, failures: int, error: Exception = DOWN) -> None:
        self.failures, self.error, self.probes = failures, error, 0

    def probe(self) -> str:
        self.probes += 1
        if self.probes <= self.failures:
            raise self.error
        return "answers"


def retry(catalog: Catalog, give_up_s: float = 5.0) -> tuple[CatalogRetry, io.StringIO]:
    out = io.StringIO()
    backoff = Backoff(0.01, 0.04, rng=random.Random(1))
    stop = threading.Event()
    return CatalogRetry(catalog.probe, backoff, give_up_s, Console(out, live=False), stop), out


def test_waits_until_the_catalog_answers_and_says_so() -> None:
    catalog = Catalog(failures=3)
    waiting, out = retry(catalog)
    assert waiting.wait(DOWN) is True
    assert catalog.probes == 4 and waiting.retries == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("apply: catalog failed: the catalog database cannot be reached")
    assert sum("retrying in" in line for line in lines) == 4
    assert lines[-1].startswith("apply: catalog answers again; re-reading every table's position")


def test_gives_up_after_the_configured_time_with_the_last_error() -> None:
    later = CatalogUnreachableError("the catalog database cannot be reached: timed out")
    waiting, _ = retry(Catalog(failures=10**6, error=later), give_up_s=0.2)
    started = time.monotonic()
    with pytest.raises(CatalogUnreachableError, match="timed out"):
        waiting.wait(DOWN)
    assert time.monotonic() - started < 2.0


def test_an_error_waiting_cannot_cure_is_raised_at_once() -> None:
    refused = CatalogAuthError("the catalog database refused the login")
    catalog = Catalog(failures=1, error=refused)
    waiting, _ = retry(catalog)
    with pytest.raises(CatalogAuthError):
        waiting.wait(DOWN)
    assert catalog.probes == 1


def test_a_stop_request_ends_the_wait() -> None:
    waiting, _ = retry(Catalog(failures=10**6), give_up_s=60.0)
    waiting.stop.set()
    assert waiting.wait(DOWN) is False


def test_only_catalog_errors_that_waiting_may_cure_are_retried() -> None:
    assert retryable(DOWN) and retryable(CatalogCommitUnknownError("lost"))
    assert not retryable(CatalogAuthError("x"))
    assert not retryable(SparkStatementError("x"))
