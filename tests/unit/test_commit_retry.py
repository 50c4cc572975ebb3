"""The commit retry of issue 11 (part 1): which Spark failures are another writer's commit, and
the loop that re-reads the table, re-plans and commits again, up to a bound, counted."""

from __future__ import annotations

import pytest

from binlake.errors import CommitConflictError, SparkStatementError, exit_code_for
from binlake.lake.commit_retry import RETRIES, CommitRetry, CommitRetryPolicy, with_retries
from binlake.lake.spark_errors import classify_spark_failure, commit_conflict

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
            "org.apache.iceberg.exceptions.CommitStateUnknownException: Failed to confirm",
            "CommitStateUnknownException: Failed to confirm",
        ),
    ],
)
def test_another_writers_commit_is_a_conflict_with_icebergs_reason(text: str, reason: str) -> None:
    error = classify_spark_failure(text, "MERGE INTO lake.bench.t t USING v s ON ...", "bench.t")
    assert isinstance(error, CommitConflictError)
    assert error.reason is not None and error.reason.startswith(reason)
    assert error.table == "bench.t" and exit_code_for(error) == 70


@pytest.mark.parametrize(
    "text",
    [
        "org.apache.iceberg.exceptions.ValidationException: Cannot change column type: a",
        "org.apache.spark.sql.AnalysisException: cannot resolve column x",
        "CommitFailedException mentioned in passing, not thrown",
    ],
)
def test_other_failures_are_not_conflicts(text: str) -> None:
    assert commit_conflict(text) is None
    assert type(classify_spark_failure(text)) is SparkStatementError


def conflict() -> CommitConflictError:
    return classify_spark_failure(PY4J + VERSION_EXISTS, "MERGE", "bench.t")  # type: ignore[return-value]


class Table:
    """A table another writer commits to ``conflicts`` times before binlake's commit goes
    through; ``applied`` is what binlake's commit put there."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.reloads = 0
        self.commits: list[dict[str, str]] = []

    def attempt(self, retries: int) -> str:
        if self.conflicts:
            self.conflicts -= 1
            raise conflict()
        self.commits.append(with_retries({"binlake.position": "f.000001:4"}, retries))
        return "committed"

    def reload(self) -> None:
        self.reloads += 1


def test_a_conflict_is_re_planned_after_a_reload_and_committed_with_its_retry_count() -> None:
    table = Table(conflicts=3)
    told: list[tuple[str, int, float]] = []
    retry = CommitRetry(
        CommitRetryPolicy(retries=5, max_s=0.01),
        on_retry=lambda name, n, _error, wait: told.append((name, n, wait)),
        sleep=lambda _s: None,
    )
    assert retry.run("bench.t", table.attempt, table.reload) == "committed"
    assert table.reloads == 3
    assert table.commits == [{"binlake.position": "f.000001:4", RETRIES: "3"}]
    assert [n for _, n, _ in told] == [1, 2, 3] and all(w <= 0.1 for _, _, w in told)


def test_a_first_try_that_commits_carries_no_retry_count() -> None:
    table = Table(conflicts=0)
    CommitRetry(sleep=lambda _s: None).run("bench.t", table.attempt, table.reload)
    assert table.commits == [{"binlake.position": "f.000001:4"}]


def test_after_the_bound_the_conflict_is_a_typed_error_with_a_hint() -> None:
    table = Table(conflicts=100)
    retry = CommitRetry(CommitRetryPolicy(retries=2, max_s=0.01), sleep=lambda _s: None)
    with pytest.raises(CommitConflictError) as caught:
        retry.run("bench.t", table.attempt, table.reload)
    error = caught.value
    assert error.attempts == 3 and "gave up after 3 commits" in error.message
    assert "commit_retries" in error.hint and error.table == "bench.t"
    assert exit_code_for(error) == 70 and table.reloads == 2


def test_no_retries_means_the_first_conflict_is_raised() -> None:
    table = Table(conflicts=1)
    retry = CommitRetry(CommitRetryPolicy(retries=0), sleep=lambda _s: None)
    with pytest.raises(CommitConflictError):
        retry.run("bench.t", table.attempt, table.reload)
    assert table.reloads == 0


def test_other_errors_are_never_retried() -> None:
    calls: list[int] = []

    def attempt(retries: int) -> None:
        calls.append(retries)
        raise SparkStatementError("cannot resolve column x", table="bench.t")

    with pytest.raises(SparkStatementError):
        CommitRetry(sleep=lambda _s: None).run("bench.t", attempt, lambda: None)
    assert calls == [0]
