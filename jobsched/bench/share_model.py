"""The fair share in a model of Lambda's SQS event source mapping (issue 31 §7, decision 0057).

Deterministic, like ``jobsched bench --peak``'s model (:mod:`jobsched.bench.peak`): one ``default``
queue played in steps of :data:`STEP` seconds, its mapping in standard mode. What the model takes
from AWS's documentation: the mapping starts :data:`~jobsched.bench.peak.START_INVOKES` (5) concurrent
invocations when messages are available and adds up to
:data:`~jobsched.bench.peak.RAMP_PER_MINUTE` (300) a minute, up to its ``MaximumConcurrency``; an
invocation takes a batch of up to 10 messages (our batch size) and runs them together (the worker's
10 threads), so it lasts as long as its longest run; SQS fair queues hand a quiet group's message to
whichever receive comes next while another group is noisy. Assumptions (not published by AWS): a
receive that finds messages starts its invocation :data:`RECEIVE_SECONDS` later; an invocation's own
overhead is :data:`OVERHEAD_SECONDS`.

The share gate is modelled as :mod:`jobsched.services.shares` decides: a batch of the bursting tenant
is admitted while fewer than ``slots`` of its invocations are counted; an invocation is counted once it
registered (:data:`~jobsched.services.shares.REGISTER_AFTER_SECONDS` after it started, or at once when
the tenant held half its slots or more); a batch refused is held up to
:data:`~jobsched.services.shares.HOLD_SECONDS`, looking every
:data:`~jobsched.services.shares.POLL_SECONDS`, takes a slot the tenant freed meanwhile, else its
messages are made visible again and the invocation ends.

Four plays: with the share (``MaximumConcurrency`` = ``ceil(slots / fair_share)``) and without
(``slots``), each with the quiet tenant (one run every ``quiet_interval_seconds``, by default
spread over one run length, from :data:`QUIET_FROM_SECONDS`, once the ramp has filled the pool) and
with the bursting tenant alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from jobsched.bench.lag import percentile
from jobsched.bench.peak import RAMP_PER_MINUTE, START_INVOKES
from jobsched.core.prices import US_EAST_1
from jobsched.core.shares import MEASURED_FAIR_SHARE, pool_ceiling
from jobsched.runtime.resources import WORKER_MEMORY_MB
from jobsched.services.shares import HOLD_SECONDS, POLL_SECONDS, REGISTER_AFTER_SECONDS, SHARE_LEASE_SECONDS

STEP = 0.01
BATCH = 10
RECEIVE_SECONDS = 0.05
OVERHEAD_SECONDS = 0.05
QUIET_RUN_SECONDS = 0.05
QUIET_FROM_SECONDS = 5.0
NOISY, QUIET = "noisy", "quiet"


@dataclass(frozen=True)
class ShareModelConfig:
    burst_runs: int = 300
    run_seconds: float = 10.0
    slots: int = 20  # the default queue's max_concurrency: what one tenant may hold
    fair_share: float = MEASURED_FAIR_SHARE
    quiet_runs: int = 20
    #: None: the quiet runs are spread over one run length (``run_seconds / quiet_runs``, at least 0.5 s).
    quiet_interval_seconds: float | None = None

    @property
    def quiet_every(self) -> float:
        if self.quiet_interval_seconds is not None:
            return self.quiet_interval_seconds
        return max(0.5, self.run_seconds / max(1, self.quiet_runs))


@dataclass
class _Invocation:
    tenant: str
    started: float
    ends: float
    runs: list[float]  # due instants of its runs
    registered_at: float
    held_until: float | None = None  # a refused batch waiting for its tenant's slot
    next_look: float = 0.0


@dataclass
class _Play:
    config: ShareModelConfig
    share: bool
    quiet: bool
    queue: list[tuple[float, str]] = field(default_factory=list)  # (due, tenant), visible messages
    running: list[_Invocation] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    noisy_last_end: float = 0.0
    noisy_done: int = 0
    refusals: int = 0
    holds_converted: int = 0
    looks: int = 0
    registrations: int = 0
    writes: int = 0
    held_seconds: float = 0.0
    refused_messages: int = 0
    invocations: int = 0

    @property
    def ceiling(self) -> int:
        c = self.config
        return pool_ceiling(c.slots, c.fair_share) if self.share else c.slots

    def counted(self, now: float) -> int:
        return sum(
            1 for i in self.running if i.tenant == NOISY and i.held_until is None and i.registered_at <= now
        )

    def play(self) -> dict[str, Any]:
        c = self.config
        self.queue = [(0.0, NOISY)] * c.burst_runs
        quiet_runs = c.quiet_runs if self.quiet else 0
        pending_quiet = [QUIET_FROM_SECONDS + k * c.quiet_every for k in range(quiet_runs)]
        steps = int((math.ceil(c.burst_runs / (c.slots * BATCH)) + 3) * (c.run_seconds + 2) / STEP) + 20000
        receive_at: float | None = None
        for n in range(steps):
            now = n * STEP
            while pending_quiet and pending_quiet[0] <= now + 1e-9:
                self.queue.append((pending_quiet.pop(0), QUIET))
            self._end_and_look(now)
            allowed = min(self.ceiling, START_INVOKES + int(now * RAMP_PER_MINUTE / 60))
            if self.queue and len(self.running) < allowed:
                if receive_at is None:
                    receive_at = now + RECEIVE_SECONDS
                if now + 1e-9 >= receive_at:
                    self._start(now)
                    receive_at = None
            else:
                receive_at = None
            if not self.queue and not self.running and not pending_quiet and self.noisy_done == c.burst_runs:
                break
        return {
            "pool_ceiling": self.ceiling,
            "quiet_p50_seconds": _r(percentile(self.lags, 50)),
            "quiet_p99_seconds": _r(percentile(self.lags, 99)),
            "quiet_max_seconds": _r(max(self.lags) if self.lags else None),
            "quiet_started": len(self.lags),
            "noisy_drain_seconds": _r(self.noisy_last_end),
            "invocations": self.invocations,
            "refused_batches": self.refusals,
            "held_batches_that_took_a_freed_slot": self.holds_converted,
            "share_reads": self.looks,
            "share_writes": self.writes,
            "share_usd": round(self.share_usd(), 6),
        }

    def share_usd(self) -> float:
        """What the share itself cost in the play, at list prices: its reads (0.5 RRU), its writes, and
        per refused batch an invocation of its hold at the worker's memory, its receive and the one
        ``ChangeMessageVisibilityBatch`` that makes its messages visible again."""
        p = US_EAST_1
        lambda_gb_seconds = self.held_seconds * WORKER_MEMORY_MB / 1024
        return (
            self.looks * 0.5 * p.dynamodb_rru
            + self.writes * p.dynamodb_wru
            + self.refusals * (p.lambda_request + 2 * p.sqs_request)
            + lambda_gb_seconds * p.lambda_gb_second
        )

    def _start(self, now: float) -> None:
        quiet = [m for m in self.queue if m[1] == QUIET]
        tenant = QUIET if quiet else NOISY
        batch = [m for m in self.queue if m[1] == tenant][:BATCH]
        for m in batch:
            self.queue.remove(m)
        self.invocations += 1
        dues = [due for due, _ in batch]
        if tenant == QUIET:
            self.lags.extend(now - due for due in dues)
            ends = now + QUIET_RUN_SECONDS + OVERHEAD_SECONDS
            self.running.append(_Invocation(QUIET, now, ends, dues, now))
            return
        invocation = _Invocation(NOISY, now, now, dues, math.inf)
        if self.share:
            self.looks += 1
            counted = self.counted(now)
            if counted >= self.config.slots:
                invocation.held_until = now + HOLD_SECONDS
                invocation.next_look = now + POLL_SECONDS
                invocation.ends = math.inf
                self.running.append(invocation)
                return
            self._admit(invocation, now, eager=counted * 2 >= self.config.slots)
        else:
            self._admit(invocation, now, eager=False)
        self.running.append(invocation)

    def _admit(self, invocation: _Invocation, now: float, *, eager: bool) -> None:
        invocation.held_until = None
        invocation.started = now
        invocation.ends = now + self.config.run_seconds + OVERHEAD_SECONDS
        lasts = self.config.run_seconds + OVERHEAD_SECONDS
        if self.share and (eager or lasts > REGISTER_AFTER_SECONDS):
            invocation.registered_at = now if eager else now + REGISTER_AFTER_SECONDS
            self.registrations += 1
            self.writes += 2 + int((lasts - (invocation.registered_at - now)) // (SHARE_LEASE_SECONDS / 3))

    def _end_and_look(self, now: float) -> None:
        for invocation in list(self.running):
            if invocation.held_until is not None:
                if now + 1e-9 >= invocation.next_look:
                    self.looks += 1
                    if self.counted(now) < self.config.slots:
                        self.holds_converted += 1
                        self._admit(invocation, now, eager=True)
                        continue
                    invocation.next_look = now + POLL_SECONDS
                if now + 1e-9 >= invocation.held_until:
                    self.refusals += 1
                    self.refused_messages += len(invocation.runs)
                    self.held_seconds += HOLD_SECONDS
                    self.queue.extend((due, NOISY) for due in invocation.runs)
                    self.running.remove(invocation)
                continue
            if now + 1e-9 >= invocation.ends:
                self.running.remove(invocation)
                if invocation.tenant == NOISY:
                    self.noisy_done += len(invocation.runs)
                    self.noisy_last_end = max(self.noisy_last_end, invocation.ends)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def run_share_model(config: ShareModelConfig | None = None) -> dict[str, Any]:
    """The four plays' figures (deterministic)."""
    config = config or ShareModelConfig()
    return {
        "burst_runs": config.burst_runs,
        "run_seconds": config.run_seconds,
        "slots": config.slots,
        "fair_share": config.fair_share,
        "quiet_runs": config.quiet_runs,
        "quiet_interval_seconds": config.quiet_every,
        "share": _Play(config, share=True, quiet=True).play(),
        "no_share": _Play(config, share=False, quiet=True).play(),
        "share_alone": _Play(config, share=True, quiet=False).play(),
        "no_share_alone": _Play(config, share=False, quiet=False).play(),
    }
