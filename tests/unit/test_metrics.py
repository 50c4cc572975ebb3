"""binlake's Prometheus metrics (prometheus_client on a registry of binlake's own) and the
endpoint that serves them, scraped for real."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from binlake.metrics import (
    COMMITS,
    CONTENT_TYPE,
    EVENTS_RECEIVED,
    FSYNCS,
    LAG_BYTES,
    LAG_SECONDS,
    LAST_ERROR,
    LAST_ERROR_TIME,
    ROWS_APPLIED,
    STANDARD,
    Metrics,
    MetricsServer,
)
from binlake.storage.durable import FSYNC_COUNTS


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_render_is_prometheus_text_with_help_type_and_escaped_labels() -> None:
    metrics = Metrics()
    metrics.inc_counter(EVENTS_RECEIVED)
    metrics.inc_counter(EVENTS_RECEIVED, amount=4)
    metrics.inc_counter(ROWS_APPLIED, {"table": "shop.orders"}, 250)
    metrics.inc_counter(ROWS_APPLIED, {"table": 'we"ird\\name'}, 3)
    metrics.set_gauge(LAG_SECONDS, None, 1.5)
    text = metrics.render()
    assert (
        "# TYPE binlake_events_received_total counter\nbinlake_events_received_total 5.0\n" in text
    )
    assert 'binlake_rows_applied_total{table="shop.orders"} 250.0\n' in text
    assert 'binlake_rows_applied_total{table="we\\"ird\\\\name"} 3.0\n' in text
    assert "# HELP binlake_lag_seconds Seconds since the oldest source change" in text
    assert "_created" not in text
    found = samples(text)
    assert found[(ROWS_APPLIED, (("table", 'we"ird\\name'),))] == 3
    assert found[(LAG_SECONDS, ())] == 1.5
    assert metrics.value(EVENTS_RECEIVED) == 5
    assert metrics.value(ROWS_APPLIED, {"table": "shop.orders"}) == 250
    assert metrics.value(ROWS_APPLIED, {"table": "shop.other"}) is None


def test_every_metric_keeps_its_name_type_labels_and_help() -> None:
    families = {f.name: f for f in text_string_to_metric_families(Metrics().render())}
    for name, spec in STANDARD.items():
        family = families[name.removesuffix("_total") if spec.kind == "counter" else name]
        assert (family.type, family.documentation) == (spec.kind, spec.help_text), name
    assert {name: spec.labels for name, spec in STANDARD.items() if spec.labels} == {
        ROWS_APPLIED: ("table",),
        COMMITS: ("table", "write", "reason"),
        "binlake_commit_retries_total": ("table",),
        "binlake_key_index_rebuilds_total": ("table", "reason"),
        "binlake_maintenance_steps_total": ("table", "step"),
        "binlake_maintenance_rewritten_bytes_total": ("table", "step"),
        LAST_ERROR: ("error", "message"),
    }
    assert families["binlake_fsyncs"].type == "counter"


def test_counters_only_go_up_and_kinds_do_not_change() -> None:
    metrics = Metrics()
    with pytest.raises(ValueError, match="only goes up"):
        metrics.inc_counter(EVENTS_RECEIVED, amount=-1)
    with pytest.raises(ValueError, match="is a counter"):
        metrics.set_gauge(EVENTS_RECEIVED, None, 3)
    with pytest.raises(ValueError, match="is a gauge"):
        metrics.inc_counter(LAG_BYTES)
    with pytest.raises(ValueError, match="not one of binlake's metrics"):
        metrics.inc_counter("binlake_batches_total")


def test_the_last_error_replaces_the_one_before_and_fsync_counts_are_exported() -> None:
    metrics = Metrics()
    metrics.record_error(ValueError("first"), when=1600000000.0)
    metrics.record_error(RuntimeError("disk full\nsecond line"), when=1700000000.0)
    FSYNC_COUNTS["metrics-test"] += 2
    try:
        found = samples(metrics.render())
    finally:
        del FSYNC_COUNTS["metrics-test"]
    errors = {labels: value for (name, labels), value in found.items() if name == LAST_ERROR}
    assert errors == {(("error", "RuntimeError"), ("message", "disk full")): 1}
    assert found[(LAST_ERROR_TIME, ())] == 1700000000
    assert found[(FSYNCS, (("purpose", "metrics-test"),))] == 2


def test_two_registries_in_one_process_count_apart() -> None:
    first, second = Metrics(), Metrics()
    first.inc_counter(EVENTS_RECEIVED, amount=7)
    assert (first.value(EVENTS_RECEIVED), second.value(EVENTS_RECEIVED)) == (7, 0)


def test_a_real_scrape_of_the_endpoint_on_loopback() -> None:
    metrics = Metrics()
    server = MetricsServer(metrics, port=0).start()
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        metrics.set_gauge(LAG_BYTES, None, 42)
        metrics.inc_counter(COMMITS, {"table": "shop.orders", "write": "merge", "reason": "x"})
        with urllib.request.urlopen(server.url, timeout=5) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == CONTENT_TYPE
            body = response.read().decode()
        found = samples(body)
        assert found[(LAG_BYTES, ())] == 42
        labels = (("reason", "x"), ("table", "shop.orders"), ("write", "merge"))
        assert found[(COMMITS, labels)] == 1
        assert found[("process_cpu_seconds_total", ())] >= 0
        assert found[("process_resident_memory_bytes", ())] > 0
        assert any(name.startswith("python_gc_") for name, _ in found)
        other = server.url.replace("/metrics", "/")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(other, timeout=5)
        assert caught.value.code == 404
    finally:
        server.stop()
