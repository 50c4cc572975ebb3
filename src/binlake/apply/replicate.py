"""``binlake replicate``: the receiver (a thread) and the applier (this thread) in one process.

The process takes the state folder's lock once, for both: the receiver writes the relay log,
the applier writes the checkpoint record and purges old relay files. The receiver recovers the
relay log at its start (design "Recovery routine", step 1), once it has logged in to the source;
meanwhile a thread of its own starts Spark and warms it for the first batch
(``binlake.lake.tables.warm``); a recovery that fails is reported at once, without waiting for
Spark. This thread then checks the target (``binlake.lake.spark.target_check``: the master, an
executor, the catalog, the namespaces, the warehouse's space; a problem stops the run with its
fix). The
applier then reads the lake's positions and starts at the recorded checkpoint (steps 2-4, see
``binlake.apply.applier``). A source that cannot be reached or a refused login is reported
before Spark starts; a lost source position (``SourcePositionLostError``, step 5), known only
once the dump starts, is raised here as soon as the receiver meets it.

Stopping: ``request_stop`` (SIGINT/SIGTERM) stops the applier after the commit in progress (an
open batch is abandoned: never half committed) and the receiver at a transaction boundary;
then the session stops and the lock is released. With ``until_caught_up`` the receiver stops
once the relay log holds the source's binlog end as it was at start, and the applier once it
has applied everything up to the relay log's end.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass

from binlake.apply.applier import Applier, build_applier
from binlake.apply.progress import ApplyResult
from binlake.config import Config
from binlake.console import Console, ReceiverProgress
from binlake.lake.catalog.target import LakeTarget, lake_target
from binlake.lake.spark.session import SparkSession, build_session, spark_settings, stop_session
from binlake.lake.spark.target_check import require_target
from binlake.lake.tables.warm import warm_up
from binlake.metrics import Metrics, MetricsServer
from binlake.relay.handoff import RelayProgress
from binlake.source.receiver import Receiver, ReceiveResult
from binlake.storage.lock import lock_state_folder

#: The Spark application name of `binlake replicate`.
APP_NAME = "binlake-replicate"
#: Longest wait for the receiver's thread to end after a stop.
RECEIVER_JOIN_S = 30.0


@dataclass
class ReplicateResult:
    applied: ApplyResult
    received: ReceiveResult | None


class Replicator:
    """One ``binlake replicate`` run; ``spark`` may be given (tests share a session)."""

    def __init__(
        self,
        config: Config,
        *,
        until_caught_up: bool = False,
        spark: SparkSession | None = None,
        console: Console | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.config = config
        self.until_caught_up = until_caught_up
        self.console = console or Console(interval_s=config.receiver.progress_interval_s)
        self.metrics = metrics or Metrics()
        self.relay = RelayProgress()
        self.target = lake_target(config)
        self._spark = spark
        self._stop = threading.Event()
        self._applier: Applier | None = None
        self.receiver = Receiver(
            config,
            until_caught_up=until_caught_up,
            progress=ReceiverProgress(
                self.console, self.metrics, config.receiver.progress_interval_s
            ),
            relay_progress=self.relay,
            take_lock=False,
        )
        self._received: ReceiveResult | None = None

    def request_stop(self) -> None:
        """Stop cleanly (safe from a signal handler)."""
        self._stop.set()
        self.receiver.request_stop()
        if self._applier is not None:
            self._applier.request_stop()

    def run(self) -> ReplicateResult:
        with lock_state_folder(self.config.state.dir), self._metrics_server():
            thread = threading.Thread(target=self._receive, name="binlake-receiver", daemon=True)
            thread.start()
            try:
                applied = self._apply()
            except BaseException as error:
                self.metrics.record_error(error)
                raise
            finally:
                self.receiver.request_stop()
                thread.join(RECEIVER_JOIN_S)
                self.console.close()
        return ReplicateResult(applied, self._received)

    def _receive(self) -> None:
        try:
            self._received = self.receiver.run()
        except BaseException as error:  # handed to the applier, which raises it
            self.relay.finish(error=error)
        else:
            self.relay.finish(outcome=self._received.outcome.value)

    def _apply(self) -> ApplyResult:
        own = self._spark is None
        spark = self._spark or self._start_spark()
        if spark is None:
            return ApplyResult(commits=Counter(), zero_dates=Counter())  # stopped early
        try:
            require_target(spark, self.target)
            state = self.relay.state()
            while state.durable is None and not state.finished and not self._stop.is_set():
                state = self.relay.wait_past(None, 0.5)
            if state.durable is None and state.error is not None:
                raise state.error
            applier = self._applier = build_applier(
                self.config,
                spark,
                self.relay,
                self.target,
                console=self.console,
                metrics=self.metrics,
            )
            if self._stop.is_set():
                applier.request_stop()
            result = applier.run()
        finally:
            if own:
                stop_session(spark)
        if not self.until_caught_up:
            return result
        state = self.relay.state()
        if state.error is not None:
            raise state.error
        return result

    def _start_spark(self) -> SparkSession | None:
        """The session, started once the receiver has logged in to the source (so that a source
        that cannot be reached or a refused login is reported before Spark starts, which takes
        seconds), while the receiver recovers the relay log; then warmed for the first batch
        (``binlake.lake.tables.warm``). None when the run ended (or was stopped) before that. A
        recovery that fails meanwhile is raised at once: the start goes on in its own thread,
        given up (``_SessionStart``)."""
        state = self.relay.state()
        while not self.receiver.connected.is_set() and not self._stop.is_set():
            if state.finished:
                if state.error is not None:
                    raise state.error
                return None
            state = self.relay.wait_past(None, 0.1)
        if self._stop.is_set():
            return None
        starting = _SessionStart(self.target, self.console)
        try:
            while not starting.done.wait(0.1):
                state = self.relay.state()
                if state.finished and state.error is not None and state.durable is None:
                    raise state.error
                if self._stop.is_set():
                    starting.give_up()
                    return None
        except BaseException:
            starting.give_up()
            raise
        return starting.result()

    def _metrics_server(self) -> _Serving:
        return _Serving(self.metrics, self.config.applier.metrics_port, self.console)


class _Serving:
    """The Prometheus endpoint for the run, when ``metrics_port`` is set."""

    def __init__(self, metrics: Metrics, port: int, console: Console) -> None:
        self.metrics, self.port, self.console = metrics, port, console
        self.server: MetricsServer | None = None

    def __enter__(self) -> _Serving:
        if self.port:
            try:
                self.server = MetricsServer(self.metrics, self.port).start()
            except OSError as exc:
                from binlake.errors import ConfigError

                raise ConfigError(
                    f"cannot serve metrics on port {self.port}: {exc.strerror}",
                    field="applier.metrics_port",
                    hint="choose a free port, or 0 for no metrics endpoint",
                ) from None
            self.console.message("apply", f"metrics at {self.server.url}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.stop()


class _SessionStart:
    """Spark's start and warm-up, in a thread of its own (``spark-start``). The run waits for
    it, unless the relay log's recovery fails or a stop is asked for first: the error is then
    reported at once, not once Spark is up (seconds later), and a session the thread starts
    after it was given up is stopped by the thread. Started outside the main thread, pyspark
    leaves the process's SIGINT handler alone (binlake's clean stop)."""

    def __init__(self, target: LakeTarget, console: Console) -> None:
        self.target, self.console = target, console
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._session: SparkSession | None = None
        self._error: BaseException | None = None
        self._given_up = False
        threading.Thread(target=self._run, name="spark-start", daemon=True).start()

    def result(self) -> SparkSession:
        """The warmed session, once ``done`` (the start's error raised), made the active one of
        the calling thread (on its JVM side), as if that thread had built it. JVM code reads
        the active session: a compaction (Iceberg's rewrite) defines the catalog of its file
        groups, ``default_cache_iceberg``, in it, and its worker threads (which inherit the
        caller's) look that catalog up in it; with none active, a fresh replicate's first
        scheduled compaction failed ("Catalog 'default_cache_iceberg' plugin class not
        found")."""
        if self._error is not None:
            raise self._error
        assert self._session is not None
        jvm = self._session.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(self._session._jsparkSession)
        return self._session

    def give_up(self) -> None:
        """No session is wanted any more: the one started is stopped, now or once it is up."""
        with self._lock:
            self._given_up = True
            session, self._session = self._session, None
        if session is not None:
            stop_session(session)

    def _run(self) -> None:
        try:
            spark = self._start()
        except BaseException as error:
            self._error = error
            self.done.set()
            return
        with self._lock:
            if self._given_up:
                stop_session(spark)
            else:
                self._session = spark
            self.done.set()

    def _start(self) -> SparkSession:
        started = time.monotonic()
        spark = build_session(spark_settings(self.target, APP_NAME))
        ready = time.monotonic()
        try:
            warmed = warm_up(spark, self.target)
        except BaseException:
            stop_session(spark)
            raise
        self.console.message(
            "apply",
            f"Spark started in {ready - started:.1f} s, warmed in {time.monotonic() - ready:.1f} s "
            f"({warmed})",
        )
        return spark
