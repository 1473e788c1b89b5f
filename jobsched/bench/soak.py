"""The soak benchmark (``jobsched bench --soak MINUTES``): the embedded mode's own footprint.

It starts ``jobsched dev`` (a child process, as ``make run`` does: its demo jobs, one tenant), adds
``per_second_jobs`` jobs firing every second (``demo.echo``), and for ``minutes`` of *real time*
samples, every ``sample_seconds``, the CPU time and the resident memory (RSS) of each process of the
embedded mode: ``dev`` (the API, the pollers, the workers, the ticks: one Python process), and its
children ``moto-dynamodb``, ``moto`` (SQS, Step Functions, S3; forked from ``moto-dynamodb``,
:mod:`jobsched.local.moto_child`) and ``container`` (the container worker process). Linux only
(``/proc``).

Figures (``--json``: one object on the last line):

- ``minutes``, ``per_second_jobs``, ``wall_seconds`` (measured span, from the end of the warm-up);
- ``cpu_percent``: CPU time of all its processes over the span, in % of one core (the average);
- ``processes``: per process, ``cpu_percent`` (same unit) and ``rss_mb`` ``{start, end, max}``;
- ``samples``: ``[{"t": seconds since the start of the span, "rss_mb": {process: MB},
  "cpu_percent": {process: % of one core since the previous sample}}]`` — memory over time;
- ``rss_growth_mb_per_minute``: per process, the least-squares slope of RSS over the second half of
  the samples (the first minutes include caches filling; a bounded process tends to 0);
- ``lag``: ``first_minute`` and ``last_minute``, each ``{runs, started, p50_ms, p99_ms, max_ms}``:
  the start lag (``started_at - scheduled_at``) of the per-second jobs' runs (the demo jobs' runs when
  there are none) scheduled in the first and in the last whole minute of the span (the first read
  a minute after it ended, the last at the end);
- ``goals``: ``cpu_under_5_percent`` (only meaningful with the demo jobs alone) and
  ``lag_p99_unchanged`` (the last minute's p99 within 1 s of the first's or under 1 s);
- ``ok``: the embedded mode answered ``/health`` at the end and ran runs in both minutes.

The warm-up (``warmup_seconds``, default 30, not measured) lets the embedded mode finish provisioning
and register the demo jobs before the span starts.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

TOKEN = "tok-soak"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class SoakConfig:
    minutes: float = 10.0
    per_second_jobs: int = 0
    retention_minutes: int | None = None  # jobsched dev --retention-minutes (None: its default, days)
    port: int | None = None  # the API port of the soak's jobsched dev (None: a free one); +1, +2: moto's
    sample_seconds: float = 10.0
    warmup_seconds: float = 30.0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended (or is ending) since listed
            continue
        out += [int(c) for c in text]
    return out


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15)


def _rss_mb(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE / 1e6


def _get(url: str, timeout: float = 10) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _lag(api: str, job_ids: list[str], start: datetime) -> dict[str, Any]:
    """Start lags of the jobs' runs scheduled in ``[start, start + 1 min)``."""
    end = start + timedelta(minutes=1)
    lags: list[float] = []
    runs = 0
    for job_id in job_ids:
        cursor = None
        while True:
            query = f"job_id={job_id}&since={start.strftime('%Y-%m-%dT%H:%M:%SZ')}&limit=200"
            page = _get(f"{api}/runs?{query}" + (f"&cursor={cursor}" if cursor else ""), timeout=300)
            for run in page["items"]:
                scheduled = datetime.fromisoformat(run["scheduled_at"].replace("Z", "+00:00"))
                if not start <= scheduled < end:
                    continue
                runs += 1
                if run.get("started_at"):
                    started = datetime.fromisoformat(run["started_at"].replace("Z", "+00:00"))
                    lags.append((started - scheduled).total_seconds() * 1000)
            cursor = page.get("next_cursor")
            if not cursor:
                break
    lags.sort()

    def pct(q: float) -> float | None:
        return round(lags[min(len(lags) - 1, int(q * len(lags)))], 1) if lags else None

    return {"runs": runs, "started": len(lags), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": pct(1.0)}


def _slope_per_minute(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] / 60 for p in points], [p[1] for p in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mean_x) ** 2 for x in xs)
    return (
        round(sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / den, 2) if den else 0.0
    )


def run_soak(config: SoakConfig = SoakConfig()) -> dict[str, Any]:
    """Start ``jobsched dev``, add the per-second jobs, sample for ``minutes``, stop it."""
    dev, api, ports = start_dev(config)
    try:
        return _measure(config, dev, api, ports)
    finally:
        _stop(dev)


#: The banner lines of ``jobsched dev`` that name its ports (docs/local.md).
_API_LINE = re.compile(r"^jobsched dev: API on (http://[\d.]+:\d+)", re.MULTILINE)
_EMULATOR_LINE = re.compile(r"^  (AWS|DynamoDB) +http://[\d.]+:(\d+)", re.MULTILINE)


def start_dev(config: SoakConfig) -> tuple[subprocess.Popen[bytes], str, dict[int, str]]:
    """``jobsched dev`` for the soak, answering ``/health``: the process, its API's URL and its
    emulators' names by port. With ``config.port`` the API listens on it and the emulators on the next
    two; without, the dev picks all three itself (the API on port 0, bound at once; its emulators'
    ports picked again if taken before they listen, docs/local.md) and the soak reads them from the
    dev's banner."""
    log_dir = tempfile.mkdtemp(prefix="jobsched-soak-")
    argv = [sys.executable, "-m", "jobsched.cli", "dev", "--port", str(config.port or 0)]
    if config.port:  # a developer's port range stays theirs: the emulators take the next two
        argv += ["--moto-port", str(config.port + 1), "--dynamodb-port", str(config.port + 2)]
    argv += ["--tenant", f"soak={TOKEN}", "--log-dir", log_dir]
    if config.retention_minutes is not None:
        argv += ["--retention-minutes", str(config.retention_minutes)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    output = Path(log_dir) / "dev.out"
    with output.open("wb") as out:
        dev = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        api, ports = _banner_ports(output, dev, 120)
        _wait_healthy(api, dev, 120)
    except RuntimeError:
        _stop(dev)
        raise
    return dev, api, ports


def _banner_ports(output: Path, dev: subprocess.Popen[bytes], seconds: float) -> tuple[str, dict[int, str]]:
    """The API's URL and the emulators' names by port, read from the dev's banner in ``output``."""
    names = {"AWS": "moto", "DynamoDB": "moto-dynamodb"}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = output.read_text(errors="replace")
        api = _API_LINE.search(text)
        ports = {int(port): names[label] for label, port in _EMULATOR_LINE.findall(text)}
        if api and len(ports) == len(names):
            return api.group(1), ports
        if dev.poll() is not None:
            raise RuntimeError(f"jobsched dev exited with {dev.returncode}: {text.strip()[-800:]}")
        time.sleep(0.2)
    raise RuntimeError(f"jobsched dev printed no banner within {seconds:.0f} s")


def _stop(dev: subprocess.Popen[bytes]) -> None:
    dev.terminate()
    try:
        dev.wait(30)
    except subprocess.TimeoutExpired:
        dev.kill()
        dev.wait(10)


def _wait_healthy(api: str, dev: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if dev.poll() is not None:
            raise RuntimeError(f"jobsched dev exited with {dev.returncode}")
        try:
            _get(f"{api}/health", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("jobsched dev did not answer /health")


def _started(pid: int) -> int:
    """When process ``pid`` started (clock ticks since boot: field 22 of its stat)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _processes(dev_pid: int, ports: dict[int, str]) -> dict[str, int]:
    """The embedded mode's processes by name: ``dev``, each emulator by its port's name in ``ports``,
    ``container``. An emulator serving ``--also PORT`` ports forks one child per such port, in their
    order (:mod:`jobsched.local.moto_child`); a forked child's command line is its parent's."""
    named = {"dev": dev_pid}
    for child in _children(dev_pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):  # a short-lived child that ended since listed
            continue
        if b"-p" in argv:
            port = int(argv[argv.index(b"-p") + 1])
            named[ports.get(port, f"child-{child}")] = child
            also = [int(argv[i + 1]) for i, arg in enumerate(argv[:-1]) if arg == b"--also"]
            for forked, port in zip(sorted(_children(child), key=_started), also, strict=False):
                named[ports.get(port, f"child-{forked}")] = forked
        elif b"--pool" in argv:  # the container worker process (jobsched/local/container.py)
            named["container"] = child
    return named


def _measure(
    config: SoakConfig, dev: subprocess.Popen[bytes], api: str, ports: dict[int, str]
) -> dict[str, Any]:
    job_ids = []
    for i in range(config.per_second_jobs):
        body = json.dumps(
            {
                "name": f"soak.{i}",
                "schedule": "* * * * * *",
                "target": {"handler": "demo.echo"},
                "payload": {"i": i},
            }
        ).encode()
        request = urllib.request.Request(
            f"{api}/jobs",
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        # A per-second job is dispatched at creation: its next 60 s of runs (look-ahead), written and sent.
        with urllib.request.urlopen(request, timeout=600) as response:
            job_ids.append(json.loads(response.read())["id"])
    time.sleep(config.warmup_seconds)
    if not job_ids:  # the demo jobs, registered by jobsched dev itself
        job_ids = [j["id"] for j in _get(f"{api}/jobs?limit=200")["items"]]
    procs = _processes(dev.pid, ports)
    started_at = time.monotonic()
    span_start = datetime.now(UTC)
    first = {name: _cpu_seconds(pid) for name, pid in procs.items()}
    last_cpu, last_t = dict(first), started_at
    samples: list[dict[str, Any]] = []
    end = started_at + config.minutes * 60
    first_minute = (span_start + timedelta(minutes=1)).replace(second=0, microsecond=0)
    # The first minute's lag is read once that minute's runs have started, not at the end: with a
    # retention in minutes (--soak-retention-minutes) they are deleted long before an hour is over.
    first_lag: dict[str, Any] | None = None
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if first_lag is None and datetime.now(UTC) >= first_minute + timedelta(seconds=65):
            first_lag = _lag(api, job_ids, first_minute)
        time.sleep(min(config.sample_seconds, end - now))
        t = time.monotonic()
        cpu = {name: _cpu_seconds(pid) for name, pid in procs.items()}
        rss = {name: round(_rss_mb(pid), 1) for name, pid in procs.items()}
        samples.append(
            {
                "t": round(t - started_at, 1),
                "rss_mb": rss,
                "cpu_percent": {n: round((cpu[n] - last_cpu[n]) / (t - last_t) * 100, 2) for n in procs},
            }
        )
        last_cpu, last_t = cpu, t
    wall = last_t - started_at
    span_end = span_start + timedelta(seconds=wall)
    last_minute = (span_end - timedelta(minutes=1, seconds=10)).replace(second=0, microsecond=0)
    time.sleep(5)  # let the last minute's runs start before their lag is read
    if first_lag is None:  # a span too short to have read it on the way
        first_lag = _lag(api, job_ids, first_minute)
    lag = {"first_minute": first_lag, "last_minute": _lag(api, job_ids, last_minute)}
    healthy = _get(f"{api}/health").get("status") == "ok"
    processes = {}
    growth = {}
    for name in procs:
        series = [s["rss_mb"][name] for s in samples]
        processes[name] = {
            "cpu_percent": round((last_cpu[name] - first[name]) / wall * 100, 2),
            "rss_mb": {"start": series[0], "end": series[-1], "max": max(series)},
        }
        half = samples[len(samples) // 2 :]
        growth[name] = _slope_per_minute([(s["t"], s["rss_mb"][name]) for s in half])
    total_cpu = round(sum(last_cpu[n] - first[n] for n in procs) / wall * 100, 2)
    p99 = [lag[k]["p99_ms"] for k in ("first_minute", "last_minute")]
    return {
        "minutes": config.minutes,
        "per_second_jobs": config.per_second_jobs,
        "retention_minutes": config.retention_minutes,
        "wall_seconds": round(wall, 1),
        "cpu_percent": total_cpu,
        "processes": processes,
        "rss_growth_mb_per_minute": growth,
        "lag": lag,
        "goals": {
            "cpu_under_5_percent": total_cpu < 5,
            "lag_p99_unchanged": None
            if None in p99
            else bool(
                p99[1] is not None and p99[0] is not None and (p99[1] <= p99[0] + 1000 or p99[1] < 1000)
            ),
        },
        "ok": healthy and all(lag[k]["started"] > 0 for k in lag),
        "samples": samples,
    }


def report(figures: dict[str, Any]) -> str:
    """The readable summary of :func:`run_soak`'s figures."""
    lines = [
        f"soak: jobsched dev with its demo jobs + {figures['per_second_jobs']} per-second job(s), "
        f"{figures['wall_seconds']} s measured",
        f"CPU {figures['cpu_percent']} % of one core (goal < 5 % with the demo jobs alone)",
        f"{'process':<14} {'cpu %':>7} {'rss start':>10} {'rss end':>8} {'rss max':>8} "
        f"{'MB/min (2nd half)':>18}",
    ]
    for name, p in figures["processes"].items():
        rss = p["rss_mb"]
        lines.append(
            f"{name:<14} {p['cpu_percent']:>7} {rss['start']:>10} {rss['end']:>8} {rss['max']:>8} "
            f"{figures['rss_growth_mb_per_minute'][name]:>18}"
        )
    for key in ("first_minute", "last_minute"):
        lag = figures["lag"][key]
        lines.append(
            f"lag {key.replace('_', ' ')}: {lag['started']}/{lag['runs']} runs started, "
            f"p50 {lag['p50_ms']} ms, p99 {lag['p99_ms']} ms, max {lag['max_ms']} ms"
        )
    return "\n".join(lines)


def main() -> int:
    """``python -m jobsched.bench.soak MINUTES [PER_SECOND_JOBS] [--json]``."""
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    figures = run_soak(
        SoakConfig(
            minutes=float(args[0]) if args else 10, per_second_jobs=int(args[1]) if len(args) > 1 else 0
        )
    )
    print(json.dumps(figures) if "--json" in sys.argv[1:] else report(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
