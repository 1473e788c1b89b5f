"""``jobsched bench --peak``: what pre-warming buys at a known peak, in a model (issue 31 §2, decision 0055).

A day of runs on the ``default`` queue is played through a model of Lambda's SQS event source mapping
in steps of :data:`STEP` seconds, three times:

* ``baseline``: the mapping in standard mode at the deployment's ``MaximumConcurrency`` (20), no
  provisioned concurrency;
* ``prewarm``: each minute the capacity plan (:func:`jobsched.core.capacity.plan`, the same code the
  capacity service runs) sets ``MaximumConcurrency`` and the provisioned concurrency from the forecast's
  needs (:func:`jobsched.core.forecast.needed_concurrency`) of the next ``lead_minutes``;
* ``prewarm_pollers``: as ``prewarm``, with the mapping in provisioned mode, its minimum pollers sized
  so the planned invocations are ready when the peak arrives;
* ``prewarm_share``: as ``prewarm`` with the fair share on (decision 0057, :data:`SHARE`): the
  mapping's base is ``ceil(20 / 0.8)`` = 25 and the day's one tenant may hold
  :func:`~jobsched.core.shares.tenant_slots_at` of the ceiling in force (its slots follow the raises);
* ``prewarm_share_fixed``: the same, with the tenant's slots fixed at 20 whatever the ceiling (the
  share before they followed it: every raise was head-room the lone tenant could not use);
* ``prewarm_pollers_share``: ``prewarm_pollers`` with the share on, the slots following the ceiling:
  where the ceiling, not the mapping's ramp, bounds the peak, the lone tenant gets all of a raise but
  its head-room (a fifth).

With the share, an invocation the tenant cannot hold is not started (the gate's hold and refusal of
a head-room batch, at most 0.5 s each, are not modelled: the head-room's invocations simply stay
idle for a lone tenant).

What the model takes from AWS's documentation (the Lambda developer guide, "Configuring scaling
behavior for SQS event source mappings", and the AWS News Blog announcing provisioned mode): in
standard mode a mapping with messages available starts five concurrent invocations and adds up to 300
a minute, up to 1,250; with no backlog it scales back (modelled at the same rate) to five. Provisioned
mode keeps its minimum pollers ready and scales up to 1,000 concurrent executions a minute;
:data:`INVOKES_PER_POLLER` (10) turns pollers into invocations (an assumption: AWS states a poller's
throughput, about 5 MB/s, not its invocations). Each invocation takes a batch of up to 10 records
(our mappings' batch size) and runs them together (the worker's ``JOBSCHED_WORKER_CONCURRENCY``, 10).
An invocation on a new execution environment first pays the cold start: the worker entry module's
import time, measured here (:func:`measure_cold_start`, the median of five fresh interpreters); a
provisioned or recently used (within :data:`KEEP_WARM_SECONDS`) environment does not.

The day (:func:`daily_shape`): 200 per-minute crons firing at second 0 of every minute, 2,000 hourly
jobs at hh:00:00 from 06:00 to 20:00, and the peak: 10,000 runs due at 09:00:00; each run takes
``run_seconds`` (1 s). Start lag = the handler's start - the run's due instant. The warm capacity is
priced at Lambda's list price for provisioned concurrency (Arm, US East: $0.0000033334 per GB-second,
billed in five-minute blocks while configured) at the worker's memory.
"""

from __future__ import annotations

import heapq
import math
import statistics
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.capacity import CapacityPolicy, QueueCaps, plan
from jobsched.core.forecast import WINDOW_MINUTES, needed_concurrency
from jobsched.core.shares import MEASURED_FAIR_SHARE, pool_ceiling, tenant_slots_at
from jobsched.runtime.resources import WORKER_MEMORY_MB

STEP = 0.1
DAY_SECONDS = 24 * 3600
PEAK_AT = 9 * 3600
#: Standard mode (AWS docs): first concurrent invocations, the added ones a minute, the most.
START_INVOKES = 5
RAMP_PER_MINUTE = 300
MAX_INVOKES = 1250
#: Provisioned mode (AWS News Blog): the scale-up rate; invocations per poller (an assumption).
PROVISIONED_RAMP_PER_MINUTE = 1000
INVOKES_PER_POLLER = 10
BATCH = 10
#: An idle execution environment is assumed reused within this long, then reclaimed.
KEEP_WARM_SECONDS = 300
PROVISIONED_USD_PER_GB_SECOND = 0.0000033334
PROVISIONED_BLOCK_SECONDS = 300
#: The default queue's max_concurrency (infra/config.py): the mapping's MaximumConcurrency with the
#: share off, the slots one tenant may hold at the base with it on.
BASE_CEILING = 20
#: The fair share of the ``prewarm_share`` variants (the deployment's default).
SHARE = MEASURED_FAIR_SHARE
VARIANTS = (
    "baseline",
    "prewarm",
    "prewarm_pollers",
    "prewarm_share",
    "prewarm_share_fixed",
    "prewarm_pollers_share",
)


@dataclass(frozen=True)
class PeakConfig:
    peak_runs: int = 10_000
    run_seconds: float = 1.0
    cold_start_seconds: float = 1.0
    start_within_seconds: float = 5.0
    lead_minutes: int = 10
    ceiling_cap: int = MAX_INVOKES
    provisioned_cap: int = 1000
    memory_mb: int = WORKER_MEMORY_MB


def daily_shape(peak_runs: int) -> list[tuple[float, int]]:
    """``(due second of the day, runs)``, in order: see the module docstring."""
    dues: dict[float, int] = {}
    for minute in range(24 * 60):
        dues[minute * 60.0] = 200
    for hour in range(6, 21):
        dues[hour * 3600.0] += 2000
    dues[float(PEAK_AT)] += peak_runs
    return sorted(dues.items())


def measure_cold_start(samples: int = 5) -> float:
    """Median seconds to import the worker's entry module (``functions.worker``) in a fresh interpreter."""
    code = "import time; t = time.perf_counter(); import functions.worker; print(time.perf_counter() - t)"
    times = []
    for _ in range(samples):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


@dataclass
class Outcome:
    lags: list[tuple[float, int]] = field(default_factory=list)  # (lag, runs) per batch
    peak_lags: list[tuple[float, int]] = field(default_factory=list)
    cold_starts: int = 0
    most_invokes: int = 0
    provisioned_gb_seconds: float = 0.0


def _plans(
    shape: list[tuple[float, int]], config: PeakConfig, base: int = BASE_CEILING
) -> list[tuple[int, int]]:
    """``(MaximumConcurrency, provisioned concurrency)`` the capacity plan sets at each minute."""
    counts = [0] * (24 * 60 + WINDOW_MINUTES)
    bursts = [0] * len(counts)
    for due, runs in shape:
        minute = int(due // 60)
        counts[minute] += runs
        bursts[minute] = max(bursts[minute], runs)
    needs = [
        needed_concurrency(c, b, config.run_seconds, config.start_within_seconds)
        for c, b in zip(counts, bursts, strict=True)
    ]
    policy = CapacityPolicy(
        queues={"default": QueueCaps(base, config.ceiling_cap)},
        provisioned_cap=config.provisioned_cap,
        lead_minutes=config.lead_minutes,
        provisioned_queues=("default",),
        runs_per_unit={"default": BATCH},
    )
    plans = []
    current = base
    for minute in range(24 * 60):
        chosen = plan(policy, {"default": needs[minute : minute + WINDOW_MINUTES]}, {}, {"default": current})
        current = chosen.ceilings["default"]
        plans.append((current, chosen.provisioned))
    return plans


def simulate(variant: str, shape: list[tuple[float, int]], config: PeakConfig) -> Outcome:
    """Play the day through the mapping model under ``variant`` (see the module docstring)."""
    shared = "share" in variant
    base = pool_ceiling(BASE_CEILING, SHARE) if shared else BASE_CEILING
    plans = _plans(shape, config, base) if variant != "baseline" else [(BASE_CEILING, 0)] * (24 * 60)
    pollers = variant.startswith("prewarm_pollers")
    ramp = (PROVISIONED_RAMP_PER_MINUTE if pollers else RAMP_PER_MINUTE) / 60.0
    arrivals = deque(shape)
    pending: deque[list[float]] = deque()  # [due, runs left]
    backlog = 0
    running: list[tuple[float, bool]] = []  # heap of (end, on a provisioned environment)
    idle: deque[float] = deque()  # idle on-demand environments: when each became idle
    limit = float(START_INVOKES)
    out = Outcome()
    prov_busy = 0
    # what the day's one tenant may hold each minute: the whole ceiling without the share
    if variant in ("prewarm_share", "prewarm_pollers_share"):
        tenants = [tenant_slots_at(BASE_CEILING, SHARE, ceiling) for ceiling, _ in plans]
    elif variant == "prewarm_share_fixed":
        tenants = [BASE_CEILING] * len(plans)
    else:
        tenants = [ceiling for ceiling, _ in plans]
    steps = int(DAY_SECONDS / STEP) + int(600 / STEP)  # the day, then ten minutes to drain
    for step in range(steps):
        t = step * STEP
        minute = min(int(t // 60), 24 * 60 - 1)
        ceiling, provisioned = plans[minute]
        tenant = tenants[minute]
        out.provisioned_gb_seconds += provisioned * config.memory_mb / 1024 * STEP
        while running and running[0][0] <= t:
            _, warm_slot = heapq.heappop(running)
            if warm_slot:
                prov_busy -= 1
            else:
                idle.append(t)
        while idle and t - idle[0] > KEEP_WARM_SECONDS:
            idle.popleft()
        while arrivals and arrivals[0][0] <= t:
            due, runs = arrivals.popleft()
            pending.append([due, runs])
            backlog += runs
        cap = min(ceiling, MAX_INVOKES) if not pollers else ceiling
        floor = ceiling if pollers else START_INVOKES
        if backlog:
            limit = min(cap, max(limit, floor) + ramp * STEP)
        else:
            limit = max(min(floor, cap), limit - ramp * STEP)
        while backlog and len(running) < min(int(limit), tenant):
            take = min(BATCH, backlog)
            warm_slot = prov_busy < provisioned
            if warm_slot:
                prov_busy += 1
                start = t
            elif idle:
                idle.pop()
                start = t
            else:
                out.cold_starts += 1
                start = t + config.cold_start_seconds
            heapq.heappush(running, (start + config.run_seconds, warm_slot))
            backlog -= take
            while take:
                head = pending[0]
                used = min(take, int(head[1]))
                out.lags.append((start - head[0], used))
                if head[0] == PEAK_AT:
                    out.peak_lags.append((start - head[0], used))
                head[1] -= used
                take -= used
                if head[1] == 0:
                    pending.popleft()
        out.most_invokes = max(out.most_invokes, len(running))
    return out


def percentile(weighted: list[tuple[float, int]], q: float) -> float:
    """The ``q`` quantile (0..1) of values given with their counts (nearest rank)."""
    total = sum(n for _, n in weighted)
    if not total:
        return 0.0
    rank = max(1, math.ceil(q * total))
    seen = 0
    for value, n in sorted(weighted):
        seen += n
        if seen >= rank:
            return value
    return sorted(weighted)[-1][0]


def run_peak(config: PeakConfig | None = None, *, measure: bool = True) -> dict[str, Any]:
    """The three variants' figures (start lag of the peak and of the day, warm capacity and its cost)."""
    config = config or PeakConfig()
    if measure:
        config = PeakConfig(**{**config.__dict__, "cold_start_seconds": measure_cold_start()})
    shape = daily_shape(config.peak_runs)
    figures: dict[str, Any] = {
        "assumptions": {
            "peak_runs": config.peak_runs,
            "runs_per_day": sum(n for _, n in shape),
            "run_seconds": config.run_seconds,
            "cold_start_seconds": round(config.cold_start_seconds, 3),
            "lead_minutes": config.lead_minutes,
            "memory_mb": config.memory_mb,
        }
    }
    for variant in VARIANTS:
        out = simulate(variant, shape, config)
        blocks = math.ceil(out.provisioned_gb_seconds / (config.memory_mb / 1024) / PROVISIONED_BLOCK_SECONDS)
        billed = (
            blocks * PROVISIONED_BLOCK_SECONDS * config.memory_mb / 1024
            if out.provisioned_gb_seconds
            else 0.0
        )
        figures[variant] = {
            "peak_lag_p50": round(percentile(out.peak_lags, 0.50), 2),
            "peak_lag_p99": round(percentile(out.peak_lags, 0.99), 2),
            "day_lag_p50": round(percentile(out.lags, 0.50), 2),
            "day_lag_p99": round(percentile(out.lags, 0.99), 2),
            "cold_starts": out.cold_starts,
            "most_invocations": out.most_invokes,
            "provisioned_gb_seconds": round(out.provisioned_gb_seconds, 1),
            "warm_usd_per_day": round(billed * PROVISIONED_USD_PER_GB_SECOND, 4),
        }
    return figures


def peak_text(figures: dict[str, Any]) -> str:
    a = figures["assumptions"]
    lines = [
        f"peak model: {a['peak_runs']} runs due at 09:00:00 in a day of {a['runs_per_day']} runs, "
        f"{a['run_seconds']} s each, cold start {a['cold_start_seconds']} s, "
        f"lead {a['lead_minutes']} min",
        f"{'variant':<20} {'peak p50':>9} {'peak p99':>9} {'day p50':>8} {'day p99':>8} {'cold':>6} "
        f"{'invokes':>8} {'warm USD/day':>12}",
    ]
    for variant in VARIANTS:
        v = figures[variant]
        lines.append(
            f"{variant:<20} {v['peak_lag_p50']:>8.2f}s {v['peak_lag_p99']:>8.2f}s {v['day_lag_p50']:>7.2f}s "
            f"{v['day_lag_p99']:>7.2f}s {v['cold_starts']:>6} {v['most_invocations']:>8} "
            f"{v['warm_usd_per_day']:>12.4f}"
        )
    return "\n".join(lines)
