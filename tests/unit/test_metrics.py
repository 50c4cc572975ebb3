"""The Prometheus registry the replicator updates and the endpoint that serves it."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from binlake.metrics import (
    CONTENT_TYPE,
    EVENTS_RECEIVED,
    LAG_SECONDS,
    ROWS_APPLIED,
    Metrics,
    MetricsServer,
)
from binlake.storage.durable import FSYNC_COUNTS


def test_render_is_prometheus_text_with_help_type_and_labels() -> None:
    metrics = Metrics()
    metrics.inc_counter(EVENTS_RECEIVED)
    metrics.inc_counter(EVENTS_RECEIVED, amount=4)
    metrics.inc_counter(ROWS_APPLIED, {"table": "shop.orders"}, 250)
    metrics.set_gauge(LAG_SECONDS, {"table": 'we"ird\\name'}, 1.5)
    text = metrics.render()
    assert "# TYPE binlake_events_received_total counter\nbinlake_events_received_total 5\n" in text
    assert 'binlake_rows_applied_total{table="shop.orders"} 250\n' in text
    assert 'binlake_lag_seconds{table="we\\"ird\\\\name"} 1.5\n' in text
    assert "# HELP binlake_lag_seconds " in text
    assert text.endswith("\n")


def test_counters_only_go_up_and_kinds_do_not_change() -> None:
    metrics = Metrics()
    with pytest.raises(ValueError, match="only goes up"):
        metrics.inc_counter(EVENTS_RECEIVED, amount=-1)
    with pytest.raises(ValueError, match="is a counter"):
        metrics.set_gauge(EVENTS_RECEIVED, None, 3)


def test_the_last_error_and_fsync_counts_are_exported() -> None:
    metrics = Metrics()
    metrics.record_error(RuntimeError("disk full\nsecond line"), when=1700000000.0)
    FSYNC_COUNTS["metrics-test"] += 2
    text = metrics.render()
    assert 'binlake_last_error_info{error="RuntimeError",message="disk full"} 1' in text
    assert "binlake_last_error_timestamp_seconds 1700000000\n" in text
    assert 'binlake_fsyncs_total{purpose="metrics-test"} 2\n' in text
    del FSYNC_COUNTS["metrics-test"]


def test_the_endpoint_serves_metrics_on_loopback_and_nothing_else() -> None:
    metrics = Metrics()
    server = MetricsServer(metrics, port=0).start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        metrics.set_gauge("binlake_lag_bytes", {"table": "shop.orders"}, 42)
        with urllib.request.urlopen(server.url, timeout=5) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == CONTENT_TYPE
            body = response.read().decode()
        assert 'binlake_lag_bytes{table="shop.orders"} 42\n' in body
        other = server.url.replace("/metrics", "/")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(other, timeout=5)
        assert caught.value.code == 404
    finally:
        server.stop()
