"""Each function's EMF metrics carry its own ``service``, even when the functions share a process.

On AWS each function has a process of its own; the embedded mode runs them all in one. Powertools
``Metrics`` instances share one class-level metric set and dimension set, so there a dispatcher tick
flushed the worker's metrics under ``"service": "dispatcher"``.
"""

from __future__ import annotations

import importlib
import json

import pytest

FUNCTIONS = ("dispatcher", "worker", "dlq_consumer", "sweeper")


@pytest.fixture
def metrics_of(monkeypatch):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    objects = {name: importlib.import_module(f"functions.{name}").metrics for name in FUNCTIONS}
    for metrics in objects.values():  # data points an earlier test's invocation left behind
        metrics.clear_metrics()
    yield objects
    for metrics in objects.values():
        metrics.clear_metrics()


def test_each_function_flushes_only_its_own_metrics_under_its_own_service(metrics_of, capsys):
    # Given every function has recorded a metric in the same process, none flushed yet
    for name, metrics in metrics_of.items():
        metrics.add_metric(name=f"Seen_{name}", unit="Count", value=1)
    # When each flushes (the end of its invocation)
    blobs = {}
    for name, metrics in metrics_of.items():
        capsys.readouterr()
        metrics.flush_metrics()
        (line,) = capsys.readouterr().out.strip().splitlines()
        blobs[name] = json.loads(line)
    # Then each blob holds exactly that function's metric, under its own service dimension
    for name, blob in blobs.items():
        recorded = {m["Name"] for d in blob["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
        assert recorded == {f"Seen_{name}"}, name
        assert blob["service"] == name


def test_a_flush_with_metrics_disabled_still_forgets_the_data_points(metrics_of, monkeypatch, capsys):
    # Given metrics are disabled (the embedded mode's default) and a function recorded a data point
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics = metrics_of["worker"]
    metrics.add_metric(name="RunsSucceeded", unit="Count", value=1)
    # When its invocation ends (flush)
    metrics.flush_metrics()
    # Then nothing was printed and nothing is kept for the next invocation (memory stays flat)
    assert capsys.readouterr().out == ""
    assert metrics.metric_set == {}
