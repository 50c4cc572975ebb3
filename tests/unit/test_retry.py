"""The applier's one retry policy (``binlake.retry``). A failing catalog: back off and
probe until it answers, give up after ``catalog_give_up_s`` with the last error, stop at once
when asked, never wait out an error that waiting cannot cure. Another writer's commit (issue
11): which Spark failures are one, and the work done again after a reload, up to
``commit_retries`` conflicts in a row, counted."""

from __future__ import annotations

import io
import random
import threading
import time

import pytest

from binlake.console import Console
from binlake.errors import (
    CatalogAuthError,
    CatalogCommitUnknownError,
    CatalogUnreachableError,
    CommitConflictError,
    SparkStatementError,
)
from binlake.lake.catalog.metadata import RETRIES, with_retries
from binlake.lake.spark.errors import classify_spark_failure, commit_conflict
from binlake.retry import Retry, retryable
from binlake.source.policy import Backoff

PY4J = "An error occurred while calling o77.sql.\n: "
VERSION_EXISTS = (
    "org.apache.iceberg.exceptions.CommitFailedException: Version 69 already exists: "
    "/w/bench/t/metadata/v69.metadata.json"
)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (PY4J + VERSION_EXISTS, "CommitFailedException: Version 69 already exists"),
        (
            "org.apache.spark.SparkException: Writing job aborted\n"
            "org.apache.iceberg.exceptions.CommitFailedException: Cannot commit changes based "
            "on stale table metadata",
            "CommitFailedException: Cannot commit changes based on stale table metadata",
        ),
        (
            "org.apache.iceberg.exceptions.ValidationException: Cannot commit, missing data "
            "files: [file:/w/t/data/0001.parquet]",
            "ValidationException: Cannot commit, missing data files",
        ),
        (
            "org.apache.iceberg.exceptions.ValidationException: Found new conflicting delete "
            "files that can apply to records matching true: [d.parquet]",
            "ValidationException: Found new conflicting delete files",
        ),
        (
            "org.apache.iceberg.exceptions.ValidationException: Deleted manifest "
            "/w/t/metadata/fd91-m0.avro could not be found in the latest snapshot 6677023867",
            "ValidationException: Deleted manifest",
        ),
        (
            "py4j.protocol.Py4JJavaError: An error occurred while calling o77.commit.\n"
            ": java.lang.IllegalArgumentException: Snapshot 3560210673057679124 is not an "
            "ancestor of 4343636859009883881\n\tat org.apache.iceberg.relocated.com.google."
            "common.base.Preconditions.checkArgument(Preconditions.java:218)",
            "the snapshot the commit was planned on was expired meanwhile: Snapshot",
        ),
        (
            "org.apache.iceberg.exceptions.ValidationException: Found concurrently added DV for "
            "file:/w/t/data/0001.parquet: DV{location=file:/w/t/data/d.puffin, offset=4}",
            "ValidationException: Found concurrently added DV for",
        ),
        (
            "py4j.protocol.Py4JJavaError: An error occurred while calling o90.addDeletes.\n"
            ": java.lang.IllegalArgumentException: Must use DVs for position deletes in V3: "
            "file:/w/t/data/binlake-1-deletes.parquet",
            "the table's format version changed meanwhile: Must use DVs",
        ),
    ],
)
def test_another_writers_commit_is_a_conflict_with_icebergs_reason(text: str, reason: str) -> None:
    error = classify_spark_failure(text, "MERGE INTO lake.bench.t t USING v s ON ...", "bench.t")
    assert isinstance(error, CommitConflictError)
    assert error.reason is not None and error.reason.startswith(reason)
    assert error.table == "bench.t" and error.exit_code == 70


@pytest.mark.parametrize(
    "text",
    [
        "org.apache.iceberg.exceptions.ValidationException: Cannot change column type: a",
        "org.apache.spark.sql.AnalysisException: cannot resolve column x",
        "CommitFailedException mentioned in passing, not thrown",
        "java.lang.IllegalArgumentException: Cannot expire 3 snapshots: not an ancestor",
    ],
)
def test_other_failures_are_not_conflicts(text: str) -> None:
    assert commit_conflict(text) is None
    assert type(classify_spark_failure(text)) is SparkStatementError


def conflict() -> CommitConflictError:
    return classify_spark_failure(PY4J + VERSION_EXISTS, "MERGE", "bench.t")  # type: ignore[return-value]


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


def retry(
    catalog: Catalog, give_up_s: float = 5.0, conflicts: int = 10, told: list[int] | None = None
) -> tuple[Retry, io.StringIO]:
    out = io.StringIO()
    backoff = Backoff(0.001, 0.004, rng=random.Random(1))
    stop = threading.Event()
    console = Console(out, live=False)
    on_conflict = None if told is None else (lambda _e, n, _w: told.append(n))
    policy = Retry(
        catalog.probe,
        backoff,
        give_up_s,
        console,
        stop,
        conflicts=conflicts,
        on_conflict=on_conflict,
    )
    return policy, out


def test_waits_until_the_catalog_answers_and_says_so() -> None:
    catalog = Catalog(failures=3)
    waiting, out = retry(catalog)
    assert waiting.wait(DOWN) is True
    assert catalog.probes == 4
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


def test_only_failures_that_waiting_may_cure_are_retried() -> None:
    assert retryable(DOWN) and retryable(CatalogCommitUnknownError("lost"))
    assert retryable(conflict())
    unknown = "org.apache.iceberg.exceptions.CommitStateUnknownException: Failed to confirm"
    assert isinstance(classify_spark_failure(unknown), CatalogCommitUnknownError)
    assert not retryable(CatalogAuthError("x"))
    assert not retryable(SparkStatementError("x"))


class Table:
    """A table another writer commits to ``conflicts`` times before binlake's commit goes
    through; ``commits`` is what binlake's commit put there."""

    def __init__(self, conflicts: int, policy: Retry | None = None) -> None:
        self.conflicts = conflicts
        self.policy = policy
        self.reloads = 0
        self.commits: list[dict[str, str]] = []

    def attempt(self) -> str:
        if self.conflicts:
            self.conflicts -= 1
            raise conflict()
        retries = 0 if self.policy is None else self.policy.retries
        self.commits.append(with_retries({"binlake.position": "f.000001:4"}, retries))
        return "committed"

    def reload(self) -> None:
        self.reloads += 1


def test_a_conflict_is_done_again_after_a_reload_and_committed_with_its_retry_count() -> None:
    told: list[int] = []
    policy, _ = retry(Catalog(failures=0), conflicts=5, told=told)
    table = Table(conflicts=3, policy=policy)
    assert policy.run(table.attempt, table.reload) == "committed"
    assert table.reloads == 3
    assert table.commits == [{"binlake.position": "f.000001:4", RETRIES: "3"}]
    assert told == [1, 2, 3]


def test_a_first_try_that_commits_carries_no_retry_count() -> None:
    policy, _ = retry(Catalog(failures=0))
    table = Table(conflicts=0, policy=policy)
    policy.run(table.attempt, table.reload)
    assert table.commits == [{"binlake.position": "f.000001:4"}] and table.reloads == 0


def test_after_the_bound_the_conflict_is_a_typed_error_with_a_hint() -> None:
    policy, _ = retry(Catalog(failures=0), conflicts=2)
    table = Table(conflicts=100, policy=policy)
    with pytest.raises(CommitConflictError) as caught:
        policy.run(table.attempt, table.reload)
    error = caught.value
    assert error.attempts == 3 and "gave up after 3 commits" in error.message
    assert "commit_retries" in error.hint and error.table == "bench.t"
    assert error.exit_code == 70 and table.reloads == 2


def test_no_retries_means_the_first_conflict_is_raised() -> None:
    policy, _ = retry(Catalog(failures=0), conflicts=0)
    table = Table(conflicts=1, policy=policy)
    with pytest.raises(CommitConflictError):
        policy.run(table.attempt, table.reload)
    assert table.reloads == 0


def test_a_catalog_outage_and_a_conflict_share_one_loop_and_one_reload() -> None:
    catalog = Catalog(failures=2)
    policy, out = retry(catalog)
    failures: list[Exception] = [DOWN, conflict()]
    reloads: list[int] = []

    def work() -> str:
        if failures:
            raise failures.pop(0)
        return "applied"

    assert policy.run(work, lambda: reloads.append(policy.retries)) == "applied"
    assert reloads == [1, 2] and catalog.probes == 3
    assert "catalog answers again" in out.getvalue()


def test_other_errors_are_never_retried() -> None:
    calls: list[int] = []
    policy, _ = retry(Catalog(failures=0))

    def attempt() -> None:
        calls.append(policy.retries)
        raise SparkStatementError("cannot resolve column x", table="bench.t")

    with pytest.raises(SparkStatementError):
        policy.run(attempt, lambda: None)
    assert calls == [0]
