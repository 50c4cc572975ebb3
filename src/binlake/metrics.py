"""Prometheus metrics: binlake's counters and gauges, kept and served by ``prometheus_client``.

``Metrics`` owns a ``prometheus_client.CollectorRegistry`` of its own (never the library's global
one, so that tests and several pipelines in one process each count apart) holding binlake's
metrics (``STANDARD``: name, type, labels, help), its fsync counts
(``binlake.storage.durable.FSYNC_COUNTS``, read at each scrape as
``binlake_fsyncs_total{purpose=...}``), and the library's process, platform and garbage
collector collectors (``process_*``, ``python_info``, ``python_gc_*``). Its updates are
prometheus_client's (thread-safe, cheap), so the receiver and the applier update it inline:

    metrics = Metrics()
    metrics.inc_counter(EVENTS_RECEIVED)
    metrics.inc_counter(ROWS_APPLIED, {"table": "shop.orders"}, 250)
    metrics.set_gauge(LAG_SECONDS, None, 1.5)
    metrics.record_error(error)
    server = MetricsServer(metrics, port=9464)   # 127.0.0.1 unless host= says otherwise
    server.start(); ...; server.stop()

``GET /metrics`` is prometheus_client's WSGI app (the text format 0.0.4, or OpenMetrics when the
scraper asks for it; gzip when it accepts it); every other path is 404. No pyspark here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any, Literal
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    make_wsgi_app,
)
from prometheus_client.core import CounterMetricFamily, Metric

from binlake.storage.durable import FSYNC_COUNTS

#: What a scrape that asks for no particular format is answered with.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_HOST = "127.0.0.1"
METRICS_PATH = "/metrics"

EVENTS_RECEIVED = "binlake_events_received_total"
TRANSACTIONS_APPLIED = "binlake_transactions_applied_total"
ROWS_APPLIED = "binlake_rows_applied_total"
COMMITS = "binlake_commits_total"
LAG_BYTES = "binlake_lag_bytes"
LAG_SECONDS = "binlake_lag_seconds"
FSYNCS = "binlake_fsyncs_total"
COMMIT_RETRIES = "binlake_commit_retries_total"
BATCH_TABLES = "binlake_batch_tables"
BATCH_SECONDS = "binlake_batch_commit_seconds"
KEY_INDEX_REBUILDS = "binlake_key_index_rebuilds_total"
MAINTENANCE_STEPS = "binlake_maintenance_steps_total"
MAINTENANCE_REWRITTEN_BYTES = "binlake_maintenance_rewritten_bytes_total"
LAST_ERROR = "binlake_last_error_info"
LAST_ERROR_TIME = "binlake_last_error_timestamp_seconds"

# binlake's counters have no ``*_created`` series (prometheus_client's switch is process-wide).
disable_created_metrics()  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class MetricSpec:
    kind: Literal["counter", "gauge"]
    help_text: str
    labels: tuple[str, ...] = ()


#: The metrics binlake keeps, by name (docs/operations.md lists them).
STANDARD: dict[str, MetricSpec] = {
    EVENTS_RECEIVED: MetricSpec("counter", "Binlog events received from the source."),
    TRANSACTIONS_APPLIED: MetricSpec("counter", "Source transactions applied to the lake."),
    ROWS_APPLIED: MetricSpec("counter", "Row changes applied, per lake table.", ("table",)),
    COMMITS: MetricSpec(
        "counter",
        "Rows commits per lake table and write (row-delta, merge, append; reason: why merge).",
        ("table", "write", "reason"),
    ),
    LAG_BYTES: MetricSpec("gauge", "Bytes of source binlog not yet in the table."),
    LAG_SECONDS: MetricSpec(
        "gauge", "Seconds since the oldest source change not yet in the table."
    ),
    COMMIT_RETRIES: MetricSpec(
        "counter",
        "Commits tried again because another writer committed to the table first, per table.",
        ("table",),
    ),
    BATCH_TABLES: MetricSpec("gauge", "Tables the last batch committed (its width)."),
    BATCH_SECONDS: MetricSpec(
        "gauge", "Seconds the last batch took to commit (the next stays open as long)."
    ),
    KEY_INDEX_REBUILDS: MetricSpec(
        "counter",
        "Key indexes rebuilt from their table (missing, damaged, behind, moved), by table, reason.",
        ("table", "reason"),
    ),
    MAINTENANCE_STEPS: MetricSpec(
        "counter",
        "Maintenance steps run by replicate's scheduled rounds, per table and step.",
        ("table", "step"),
    ),
    MAINTENANCE_REWRITTEN_BYTES: MetricSpec(
        "counter",
        "Bytes of data and delete files maintenance rewrote, per table and step.",
        ("table", "step"),
    ),
    LAST_ERROR: MetricSpec(
        "gauge",
        "The last error (labels error and message); 1 while it is set.",
        ("error", "message"),
    ),
    LAST_ERROR_TIME: MetricSpec("gauge", "When the last error happened (seconds since the epoch)."),
}
FSYNCS_HELP = "fsync calls made by this process, by purpose."


class Metrics:
    """binlake's metrics on a registry of their own; see the module docstring."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}
        for name, spec in STANDARD.items():
            declared = (name, spec.help_text, spec.labels)
            if spec.kind == "counter":
                self._counters[name] = Counter(*declared, registry=self.registry)
            else:
                self._gauges[name] = Gauge(*declared, registry=self.registry)
        self.registry.register(_FsyncCounts())
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._lock = threading.Lock()

    def set_gauge(self, name: str, labels: Mapping[str, str] | None, value: float) -> None:
        gauge = self._gauges.get(name)
        if gauge is None:
            raise _not_a(name, "gauge")
        (gauge.labels(**labels) if labels else gauge).set(value)

    def inc_counter(
        self, name: str, labels: Mapping[str, str] | None = None, amount: float = 1.0
    ) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        counter = self._counters.get(name)
        if counter is None:
            raise _not_a(name, "counter")
        (counter.labels(**labels) if labels else counter).inc(amount)

    def record_error(self, error: BaseException, when: float | None = None) -> None:
        """The last error: its type and first message line as labels, and the time."""
        message = str(error).splitlines()[0][:200] if str(error) else ""
        last = self._gauges[LAST_ERROR]
        with self._lock:
            last.clear()
            last.labels(error=type(error).__name__, message=message).set(1)
            self._gauges[LAST_ERROR_TIME].set(time.time() if when is None else when)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """A series' value as a scrape would see it (None: no such series yet)."""
        return self.registry.get_sample_value(name, dict(labels or {}))

    def render(self) -> str:
        """Every metric in the Prometheus text format 0.0.4."""
        return generate_latest(self.registry).decode("utf-8")


def _not_a(name: str, kind: str) -> ValueError:
    spec = STANDARD.get(name)
    if spec is None:
        return ValueError(f"{name} is not one of binlake's metrics")
    return ValueError(f"{name} is a {spec.kind}, not a {kind}")


class _FsyncCounts:
    """``binlake_fsyncs_total{purpose}``: ``FSYNC_COUNTS`` as it is at the scrape."""

    def describe(self) -> Iterable[Metric]:
        yield CounterMetricFamily(FSYNCS, FSYNCS_HELP, labels=["purpose"])

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(FSYNCS, FSYNCS_HELP, labels=["purpose"])
        for purpose, count in sorted(FSYNC_COUNTS.items()):
            family.add_metric([purpose], count)
        yield family


class MetricsServer:
    """``/metrics`` over HTTP on ``host:port`` (port 0: any free port), in a daemon thread."""

    def __init__(self, metrics: Metrics, port: int, host: str = DEFAULT_HOST) -> None:
        app = _metrics_path_only(make_wsgi_app(metrics.registry))
        self._server = make_server(
            host, port, app, server_class=_ThreadingServer, handler_class=_QuietHandler
        )
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self._server.server_address[0]
        text = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{text}:{self.port}{METRICS_PATH}"

    def start(self) -> MetricsServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="binlake-metrics", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return  # scrapes are not worth a log line


def _metrics_path_only(app: WSGIApplication) -> WSGIApplication:
    def serve(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == METRICS_PATH:
            return app(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [f"only {METRICS_PATH} is served\n".encode()]

    return serve
