"""What the per-pool metrics add to the worker's EMF output (issue 31 §5, docs/performance.md).

``python -m jobsched.bench.emf_size``: the bytes of one worker invocation's EMF line (Powertools'
serializer, as ``functions/worker.py`` flushes it) for a batch of 1 and of 10 succeeded runs, with the
deployment's totals only and with each figure also per pool
(:func:`jobsched.runtime.observability.add_per_pool`).
CloudWatch Logs bills the line's bytes at ingestion; each metric name it carries is a custom metric.
"""

from __future__ import annotations

import json
import os

from jobsched.runtime import observability as obs


def emf_bytes(per_pool: bool, runs: int) -> tuple[int, list[str]]:
    """The EMF line of ``runs`` succeeded ``lambda``-pool runs (lag, duration, outcome each): its
    length and the metric names it defines."""
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", obs.NAMESPACE)
    metrics = obs.make_metrics("worker")
    sink = obs.PowertoolsSink(metrics)
    for i in range(runs):
        for name, value in ((obs.SCHEDULE_LAG, 0.25 + i / 100), (obs.RUN_DURATION, 1.5 + i / 100)):
            if per_pool:
                obs.add_per_pool(sink, name, "lambda", value)
            else:
                sink.add(name, value)
        if per_pool:
            obs.add_per_pool(sink, obs.RUNS_SUCCEEDED, "lambda")
        else:
            sink.add(obs.RUNS_SUCCEEDED)
    blob = metrics.serialize_metric_set()
    metrics.clear_metrics()
    names = [m["Name"] for m in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    return len(json.dumps(blob, separators=(",", ":"))), names


def main() -> int:
    for runs in (1, 10):
        (before, _), (after, names) = emf_bytes(False, runs), emf_bytes(True, runs)
        grown = f"EMF line {before} -> {after} bytes (+{after - before})"
        print(f"{runs} run(s) per invocation: {grown}; {len(names)} names")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
