"""Prometheus metrics: a small registry the replicator updates and a stdlib HTTP endpoint.

The registry (``Metrics``) holds gauges and counters keyed by name and labels; it is thread-safe
and cheap (a dict update under a lock), so the receiver and the applier update it inline:

    metrics = Metrics()
    metrics.inc_counter(EVENTS_RECEIVED)
    metrics.inc_counter(ROWS_APPLIED, {"table": "shop.orders"}, 250)
    metrics.set_gauge(LAG_SECONDS, {"table": "shop.orders"}, 1.5)
    metrics.record_error(error)
    server = MetricsServer(metrics, port=9464)   # 127.0.0.1 unless host= says otherwise
    server.start(); ...; server.stop()

``GET /metrics`` answers in the Prometheus text format 0.0.4; binlake's fsync counts
(``binlake.storage.durable.FSYNC_COUNTS``) are read at each scrape as
``binlake_fsyncs_total{purpose=...}``. Every other path is 404. No pyspark here.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from binlake.storage.durable import FSYNC_COUNTS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_HOST = "127.0.0.1"

EVENTS_RECEIVED = "binlake_events_received_total"
TRANSACTIONS_APPLIED = "binlake_transactions_applied_total"
ROWS_APPLIED = "binlake_rows_applied_total"
COMMITS = "binlake_commits_total"
LAG_BYTES = "binlake_lag_bytes"
LAG_SECONDS = "binlake_lag_seconds"
FSYNCS = "binlake_fsyncs_total"
COMMIT_RETRIES = "binlake_commit_retries_total"
LAST_ERROR = "binlake_last_error_info"
LAST_ERROR_TIME = "binlake_last_error_timestamp_seconds"

#: name -> (type, help) of the metrics binlake documents; others may be added with ``describe``.
STANDARD: dict[str, tuple[str, str]] = {
    EVENTS_RECEIVED: ("counter", "Binlog events received from the source."),
    TRANSACTIONS_APPLIED: ("counter", "Source transactions applied to the lake."),
    ROWS_APPLIED: ("counter", "Row changes applied, per lake table."),
    COMMITS: (
        "counter",
        "Rows commits per lake table and write (row-delta, merge, append; reason: why merge).",
    ),
    LAG_BYTES: ("gauge", "Bytes of source binlog not yet in the table."),
    LAG_SECONDS: ("gauge", "Seconds since the oldest source change not yet in the table."),
    FSYNCS: ("counter", "fsync calls made by this process, by purpose."),
    COMMIT_RETRIES: (
        "counter",
        "Commits tried again because another writer committed to the table first, per table.",
    ),
    LAST_ERROR: ("gauge", "The last error (labels error and message); 1 while it is set."),
    LAST_ERROR_TIME: ("gauge", "When the last error happened (seconds since the epoch)."),
}

Labels = tuple[tuple[str, str], ...]


def _labels(labels: Mapping[str, str] | None) -> Labels:
    return tuple(sorted((str(k), str(v)) for k, v in (labels or {}).items()))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Metrics:
    """Gauges and counters by (name, labels); see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinds: dict[str, tuple[str, str]] = dict(STANDARD)
        self._values: dict[str, dict[Labels, float]] = {}

    def describe(self, name: str, kind: str, help_text: str) -> None:
        """Declare a metric (``kind``: counter or gauge) beyond the standard ones."""
        if kind not in ("counter", "gauge"):
            raise ValueError(f"metric kind {kind!r} is not counter or gauge")
        with self._lock:
            self._kinds[name] = (kind, help_text)

    def _check(self, name: str, kind: str) -> None:
        declared = self._kinds.get(name)
        if declared is None:
            self._kinds[name] = (kind, "")
        elif declared[0] != kind:
            raise ValueError(f"{name} is a {declared[0]}, not a {kind}")

    def set_gauge(self, name: str, labels: Mapping[str, str] | None, value: float) -> None:
        with self._lock:
            self._check(name, "gauge")
            self._values.setdefault(name, {})[_labels(labels)] = float(value)

    def inc_counter(
        self, name: str, labels: Mapping[str, str] | None = None, amount: float = 1.0
    ) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        with self._lock:
            self._check(name, "counter")
            series = self._values.setdefault(name, {})
            key = _labels(labels)
            series[key] = series.get(key, 0.0) + amount

    def remove(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """Forget one series (a dropped table's lag, say)."""
        with self._lock:
            self._values.get(name, {}).pop(_labels(labels), None)

    def record_error(self, error: BaseException, when: float | None = None) -> None:
        """The last error: its type and first message line as labels, and the time."""
        message = str(error).splitlines()[0][:200] if str(error) else ""
        with self._lock:
            self._values[LAST_ERROR] = {
                _labels({"error": type(error).__name__, "message": message}): 1.0
            }
            self._values[LAST_ERROR_TIME] = {(): time.time() if when is None else when}

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        with self._lock:
            return self._values.get(name, {}).get(_labels(labels))

    def render(self) -> str:
        """Every series in the Prometheus text format, fsync counts included."""
        with self._lock:
            values = {name: dict(series) for name, series in self._values.items()}
            kinds = dict(self._kinds)
        values[FSYNCS] = {_labels({"purpose": p}): float(n) for p, n in FSYNC_COUNTS.items()}
        lines: list[str] = []
        for name in sorted(values):
            kind, help_text = kinds.get(name, ("gauge", ""))
            if help_text:
                lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            for labels, value in sorted(values[name].items()):
                lines.append(f"{name}{_render_labels(labels)} {_number(value)}")
        return "\n".join(lines) + "\n"


def _render_labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


class MetricsServer:
    """``/metrics`` over HTTP on ``host:port`` (port 0: any free port), in a daemon thread."""

    def __init__(self, metrics: Metrics, port: int, host: str = DEFAULT_HOST) -> None:
        self.metrics = metrics
        handler = _handler(metrics)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self._server.server_address[0]
        text = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{text}:{self.port}/metrics"

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


def _handler(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            body = metrics.render().encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # scrapes are not worth a log line

    return Handler
