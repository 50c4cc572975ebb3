"""Work split in numbered pieces, run as Spark tasks on the executors: one Spark job of ``count``
tasks, task ``i`` running ``work(i, attempt)`` (a picklable function returning text), and the
driver told of each piece as its task finishes, while the job still runs.

How: ``spark.range(count, numPartitions=count).mapInArrow(...)`` gives one row, so one task, per
piece; each task adds ``(i, text)`` to a Spark accumulator. Spark sends a task's accumulator
updates to the driver with its completion (only for tasks that succeed; a failed attempt's are
dropped), and pyspark's accumulator server merges them into the driver's value as they come.
``ChunkJob.run`` runs the job in a thread of its own and polls that value, handing each new
result to ``on_result`` in the calling thread; at the end it also reads the job's own output
(the same texts), so that nothing depends on the polling alone. A piece reported twice (a
speculative duplicate) is handed on twice: the caller keeps one.

Tasks are scheduled in order and at most one runs per executor core: an executor holds a few
pieces at a time whatever ``count`` is, and the driver holds one short text per piece. Jobs run
in the Spark scheduler pool ``POOL`` (``spark.scheduler.mode = FAIR``, which binlake's sessions
set): a core freed by one of its tasks goes first to a job of another pool with fewer running
tasks (the applier's statements), so streaming waits at most one task, never a whole copy.

``cancel`` (any thread) cancels the job; a failed job's text (Spark's, with the Python error of
the failed task and its cause) is returned, not raised: the caller knows what its tasks encode.
"""

from __future__ import annotations

import itertools
import sys
import threading
import uuid
import zipimport
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import SparkSession

from binlake.lake.spark.errors import java_causes

#: The scheduler pool chunk jobs run in.
POOL = "binlake-snapshot"
POLL_S = 0.2
_OUTPUT = "piece INT, text STRING"
_jobs = itertools.count(1)

Result = tuple[int, str]
Work = Callable[[int, str], str]


class _Results(AccumulatorParam[list[Result]]):
    """An accumulator of (piece, text) pairs, in arrival order."""

    def zero(self, value: list[Result]) -> list[Result]:
        return []

    def addInPlace(self, value1: list[Result], value2: list[Result]) -> list[Result]:  # noqa: N802
        value1.extend(value2)
        return value1


@dataclass
class JobOutcome:
    #: Every (piece, text) the job's tasks returned, in the order they were handed on.
    results: list[Result] = field(default_factory=list)
    #: The failed job's error text (None: it succeeded).
    failure: str | None = None
    cancelled: bool = False


class ChunkJob:
    """One Spark job of ``count`` pieces (see the module docstring)."""

    def __init__(self, spark: SparkSession, count: int, work: Work, description: str) -> None:
        self.spark, self.count, self.work, self.description = spark, count, work, description
        self.group = f"binlake-chunks-{next(_jobs)}-{uuid.uuid4().hex[:8]}"
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()
        self.spark.sparkContext.cancelJobGroup(self.group)

    def run(self, on_result: Callable[[int, str], None]) -> JobOutcome:
        """Run the job; ``on_result(piece, text)`` for each piece as its task finishes."""
        outcome = JobOutcome()
        if self.count == 0:
            return outcome
        accumulator = self.spark.sparkContext.accumulator([], _Results())
        output: list[Result] = []
        errors: list[Exception] = []
        thread = threading.Thread(
            target=self._collect,
            args=(accumulator, output, errors),
            name=f"{self.group}-job",
            daemon=True,
        )
        thread.start()
        seen = 0
        while True:
            done = not thread.is_alive()
            values = list(accumulator.value)
            for piece, text in values[seen:]:
                outcome.results.append((piece, text))
                on_result(piece, text)
            seen = len(values)
            if done:
                break
            thread.join(POLL_S)
        handed = {piece for piece, _ in outcome.results}
        for piece, text in output:  # results the polling missed, if any
            if piece not in handed:
                outcome.results.append((piece, text))
                on_result(piece, text)
        if errors:
            outcome.cancelled = self._cancelled.is_set()
            error = errors[0]
            outcome.failure = f"{error}\n{java_causes(error)}"
        return outcome

    def _collect(self, accumulator: Any, output: list[Result], errors: list[Exception]) -> None:
        context = self.spark.sparkContext
        context.setJobGroup(self.group, self.description, interruptOnCancel=True)
        context.setLocalProperty("spark.scheduler.pool", POOL)
        try:
            frame = self.spark.range(0, self.count, 1, numPartitions=self.count)
            rows = frame.mapInArrow(_mapper(self.work, accumulator), _OUTPUT).collect()
            output.extend((int(row[0]), str(row[1])) for row in rows)
        except Exception as error:
            errors.append(error)
        finally:
            context.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def steady_zip_imports() -> None:
    """Keep this Python worker's zip importers from re-reading their archives at every task.

    pyspark's worker calls ``importlib.invalidate_caches()`` before each task, and Python 3.11's
    ``zipimporter.invalidate_caches`` reads its archive's whole directory again; the worker
    holds one zip importer per package imported from ``pyspark.zip`` (Spark puts it first on
    the workers' path), each reading all its 793 entries: 11% of a chunk task's worker time in
    the snapshot benchmark's profile (py-spy, 10 M rows). Spark's archives do not change while
    its application runs, so the importers found here keep the directory they read."""
    for finder in list(sys.path_importer_cache.values()):
        if isinstance(finder, zipimport.zipimporter) and "invalidate_caches" not in vars(finder):
            finder.invalidate_caches = _keep  # type: ignore[method-assign]


def _keep() -> None:
    """A zip importer's ``invalidate_caches`` once its archive is known not to change."""


def _mapper(work: Work, accumulator: Any) -> Callable[[Iterable[Any]], Iterable[Any]]:
    """The ``mapInArrow`` function: each input row is a piece number."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        steady_zip_imports()
        attempt = uuid.uuid4().hex[:12]  # names what this attempt writes (unique per attempt)
        for batch in batches:
            pieces = [int(p) for p in batch.column(0).to_pylist()]
            texts = []
            for piece in pieces:
                text = work(piece, attempt)
                texts.append(text)
                accumulator.add([(piece, text)])
            yield pa.RecordBatch.from_pydict(
                {"piece": pa.array(pieces, pa.int32()), "text": pa.array(texts, pa.string())}
            )

    return run
