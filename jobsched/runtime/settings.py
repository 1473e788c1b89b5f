"""One settings object per function, built once from the environment.

The variable names live in :mod:`jobsched.runtime.resources` (shared with infra/ and the local mode). A
missing required variable raises :class:`ConfigurationError` naming it, at cold start rather than on
the first request that needs it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from jobsched.core.backpressure import QueueLimit
from jobsched.core.errors import JobschedError, ValidationError
from jobsched.core.ids import DUE_PARTITIONS
from jobsched.core.shares import check_share, format_tenant_slots, parse_tenant_slots
from jobsched.runtime import resources as r


class ConfigurationError(JobschedError):
    """Raised when the deployment is misconfigured: a required environment variable is missing or
    malformed. Not a client error: the function cannot serve any request."""

    code = "configuration_error"


@dataclass(frozen=True)
class Settings:
    """Physical names and tunables for one deployment (or one local/moto environment)."""

    jobs_table: str
    runs_table: str
    leases_table: str
    queue_urls: Mapping[str, str]  # kind (high/default/low/long) -> URL
    idempotency_table: str | None = None
    bucket: str | None = None
    dlq_urls: Mapping[str, str] = field(default_factory=dict)
    shards: int = r.DEFAULT_SHARDS
    lookahead_seconds: int = r.DEFAULT_LOOKAHEAD_SECONDS
    enqueue_horizon_seconds: int = r.DEFAULT_ENQUEUE_HORIZON_SECONDS
    #: Backpressure per priority of ``r.BACKPRESSURE_PRIORITIES`` (``JOBSCHED_BACKPRESSURE_DEPTH_<P>``,
    #: ``JOBSCHED_BACKPRESSURE_AGE_SECONDS_<P>``); a priority absent here is never held back.
    backpressure: Mapping[str, QueueLimit] = field(default_factory=lambda: default_backpressure())
    state_machine_arn: str | None = None
    allowed_http_hosts: tuple[str, ...] = ()
    #: SNS topic ARN patterns dead-letter notifications may go to (``JOBSCHED_NOTIFY_TOPIC_ARNS``).
    notify_topic_arns: tuple[str, ...] = ()
    auth_mode: str = "iam"
    tenant_tokens: str | None = None
    #: Records of one SQS batch the worker handles at once (``JOBSCHED_WORKER_CONCURRENCY``).
    worker_concurrency: int = r.DEFAULT_WORKER_CONCURRENCY
    #: Jobs of a due page a dispatcher tick writes at once (``JOBSCHED_DISPATCH_CONCURRENCY``).
    dispatch_concurrency: int = r.DEFAULT_DISPATCH_CONCURRENCY
    #: How late a tick's aligned send may land a run, in ms (``JOBSCHED_SEND_ALIGN_MS``; 0: no alignment).
    send_align_ms: int = r.DEFAULT_SEND_ALIGN_MS
    #: Modules that register job handlers (``JOBSCHED_HANDLER_MODULES``, comma-separated).
    handler_modules: tuple[str, ...] = ()
    #: The deployment's code version (``JOBSCHED_CODE_VERSION``): the Lambda asset's hash in the stack,
    #: the git revision in ``jobsched dev``; recorded on every attempt. None when unset.
    code_version: str | None = None
    retention_days: int = r.DEFAULT_RETENTION_DAYS  # run items (TTL) and bucket objects (lifecycle)
    #: The embedded mode's retention in seconds, in place of the days (``JOBSCHED_RETENTION_SECONDS``).
    retention_seconds: int | None = None
    run_log_group: str | None = None  # the worker's log group (AWS): the run view's logs.log_group
    run_log_file: str | None = None  # the embedded mode's log file: GET /runs/{id}/logs reads it
    #: Default per-tenant limits (0: none): concurrent runs, runs started per second, its burst.
    tenant_max_running: int = 0
    tenant_runs_per_second: float = 0.0
    tenant_burst: int = 1
    #: Per Lambda queue, the invocations one tenant may hold (``JOBSCHED_TENANT_SLOTS``, decision 0057);
    #: empty: no fair share is enforced.
    tenant_slots: Mapping[str, int] = field(default_factory=dict)
    #: The deployment's fair share (``JOBSCHED_FAIR_SHARE``): a tenant's slots follow the capacity
    #: function's ceilings; None: they stay ``tenant_slots``.
    fair_share: float | None = None
    #: Lambda's limit on an invocation, in seconds (``JOBSCHED_LAMBDA_TIME_LIMIT_SECONDS``, embedded mode
    #: only; 900 on AWS): the longest timeout the API accepts on the ``lambda`` and ``long`` pools.
    lambda_time_limit_seconds: int = r.LAMBDA_TIME_LIMIT_SECONDS
    #: The sweeper's grace in seconds (``JOBSCHED_SWEEPER_GRACE_SECONDS``, embedded mode only; 120 on AWS).
    sweeper_grace_seconds: int = r.DEFAULT_SWEEPER_GRACE_SECONDS

    @property
    def retention(self) -> timedelta:
        """How long a run (and its output) is kept: ``retention_seconds`` if set, else the days."""
        if self.retention_seconds is not None:
            return timedelta(seconds=self.retention_seconds)
        return timedelta(days=self.retention_days)

    def queue_url(self, priority: str) -> str:
        try:
            return self.queue_urls[priority]
        except KeyError:
            raise ConfigurationError(
                f"no queue URL for {priority!r}: set {r.ENV_QUEUE_URL_PREFIX}{priority.upper()}"
            ) from None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``env`` (default ``os.environ``); names the first missing variable."""
        env = os.environ if env is None else env

        def required(name: str) -> str:
            value = env.get(name, "").strip()
            if not value:
                raise ConfigurationError(f"environment variable {name} is not set")
            return value

        def integer(name: str, default: int, minimum: int) -> int:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            try:
                value = int(raw)
            except ValueError:
                raise ConfigurationError(
                    f"environment variable {name} must be an integer, got {raw!r}"
                ) from None
            if value < minimum:
                raise ConfigurationError(f"environment variable {name} must be >= {minimum}, got {value}")
            return value

        queue_urls = {spec.kind: required(spec.env_var) for spec in r.QUEUES}
        dlq_urls = {spec.kind: env[spec.dlq_env_var] for spec in r.QUEUES if env.get(spec.dlq_env_var)}
        hosts = tuple(h.strip() for h in env.get(r.ENV_ALLOWED_HTTP_HOSTS, "").split(",") if h.strip())
        lookahead = integer(r.ENV_LOOKAHEAD_SECONDS, r.DEFAULT_LOOKAHEAD_SECONDS, 0)
        if lookahead > r.MAX_SQS_DELAY_SECONDS:
            raise ConfigurationError(
                f"environment variable {r.ENV_LOOKAHEAD_SECONDS} must be <= {r.MAX_SQS_DELAY_SECONDS} "
                "(the SQS delay cap)"
            )
        horizon = integer(r.ENV_ENQUEUE_HORIZON_SECONDS, r.DEFAULT_ENQUEUE_HORIZON_SECONDS, 0)
        if horizon > r.MAX_SQS_DELAY_SECONDS:
            raise ConfigurationError(
                f"environment variable {r.ENV_ENQUEUE_HORIZON_SECONDS} must be <= {r.MAX_SQS_DELAY_SECONDS} "
                "(the SQS delay cap)"
            )
        shards = integer(r.ENV_SHARDS, r.DEFAULT_SHARDS, 1)
        if shards > DUE_PARTITIONS:
            raise ConfigurationError(
                f"environment variable {r.ENV_SHARDS} must be <= {DUE_PARTITIONS} (the due partitions), "
                f"got {shards}"
            )
        send_align_ms = integer(r.ENV_SEND_ALIGN_MS, r.DEFAULT_SEND_ALIGN_MS, 0)
        if send_align_ms > r.MAX_SEND_ALIGN_MS:
            raise ConfigurationError(
                f"environment variable {r.ENV_SEND_ALIGN_MS} must be <= {r.MAX_SEND_ALIGN_MS} (ms), "
                f"got {send_align_ms}"
            )
        retention = integer(r.ENV_RETENTION_DAYS, r.DEFAULT_RETENTION_DAYS, 1)
        if retention > r.MAX_RETENTION_DAYS:
            raise ConfigurationError(
                f"environment variable {r.ENV_RETENTION_DAYS} must be <= {r.MAX_RETENTION_DAYS} days, "
                f"got {retention}"
            )
        retention_seconds = None
        if env.get(r.ENV_RETENTION_SECONDS):
            retention_seconds = integer(
                r.ENV_RETENTION_SECONDS, r.MIN_RETENTION_SECONDS, r.MIN_RETENTION_SECONDS
            )
        lambda_time_limit = integer(r.ENV_LAMBDA_TIME_LIMIT, r.LAMBDA_TIME_LIMIT_SECONDS, 1)
        if lambda_time_limit > r.LAMBDA_TIME_LIMIT_SECONDS:
            raise ConfigurationError(
                f"environment variable {r.ENV_LAMBDA_TIME_LIMIT} must be <= {r.LAMBDA_TIME_LIMIT_SECONDS} "
                f"(Lambda's own limit), got {lambda_time_limit}"
            )
        sweeper_grace = integer(
            r.ENV_SWEEPER_GRACE_SECONDS, r.DEFAULT_SWEEPER_GRACE_SECONDS, r.MIN_SWEEPER_GRACE_SECONDS
        )
        return cls(
            jobs_table=required(r.ENV_JOBS_TABLE),
            runs_table=required(r.ENV_RUNS_TABLE),
            leases_table=required(r.ENV_LEASES_TABLE),
            queue_urls=queue_urls,
            idempotency_table=env.get(r.ENV_IDEMPOTENCY_TABLE) or None,
            bucket=env.get(r.ENV_BUCKET) or None,
            dlq_urls=dlq_urls,
            shards=shards,
            lookahead_seconds=lookahead,
            enqueue_horizon_seconds=horizon,
            backpressure=backpressure_from(env),
            state_machine_arn=env.get(r.ENV_STATE_MACHINE_ARN) or None,
            allowed_http_hosts=hosts,
            notify_topic_arns=tuple(
                a.strip() for a in env.get(r.ENV_NOTIFY_TOPIC_ARNS, "").split(",") if a.strip()
            ),
            auth_mode=env.get(r.ENV_AUTH_MODE, "iam") or "iam",
            tenant_tokens=env.get(r.ENV_TENANT_TOKENS) or None,
            worker_concurrency=worker_concurrency_from(env.get(r.ENV_WORKER_CONCURRENCY)),
            dispatch_concurrency=concurrency_from(
                env.get(r.ENV_DISPATCH_CONCURRENCY),
                r.DEFAULT_DISPATCH_CONCURRENCY,
                r.MAX_DISPATCH_CONCURRENCY,
            ),
            send_align_ms=send_align_ms,
            handler_modules=handler_modules_from(env.get(r.ENV_HANDLER_MODULES)),
            code_version=env.get(r.ENV_CODE_VERSION, "").strip() or None,
            retention_days=retention,
            retention_seconds=retention_seconds,
            run_log_group=env.get(r.ENV_RUN_LOG_GROUP) or None,
            run_log_file=env.get(r.ENV_RUN_LOG_FILE) or None,
            tenant_max_running=integer(r.ENV_TENANT_MAX_RUNNING, 0, 0),
            tenant_runs_per_second=rate_setting(env.get(r.ENV_TENANT_RUNS_PER_SECOND)),
            tenant_burst=integer(r.ENV_TENANT_BURST, 1, 1),
            tenant_slots=tenant_slots_from(env.get(r.ENV_TENANT_SLOTS)),
            fair_share=fair_share_from(env.get(r.ENV_FAIR_SHARE)),
            lambda_time_limit_seconds=lambda_time_limit,
            sweeper_grace_seconds=sweeper_grace,
        )

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces these settings (used by the local mode and tests)."""
        env = {
            r.ENV_JOBS_TABLE: self.jobs_table,
            r.ENV_RUNS_TABLE: self.runs_table,
            r.ENV_LEASES_TABLE: self.leases_table,
            r.ENV_SHARDS: str(self.shards),
            r.ENV_LOOKAHEAD_SECONDS: str(self.lookahead_seconds),
            r.ENV_ENQUEUE_HORIZON_SECONDS: str(self.enqueue_horizon_seconds),
            r.ENV_AUTH_MODE: self.auth_mode,
            r.ENV_WORKER_CONCURRENCY: str(self.worker_concurrency),
            r.ENV_DISPATCH_CONCURRENCY: str(self.dispatch_concurrency),
            r.ENV_SEND_ALIGN_MS: str(self.send_align_ms),
            r.ENV_RETENTION_DAYS: str(self.retention_days),
            **({r.ENV_RETENTION_SECONDS: str(self.retention_seconds)} if self.retention_seconds else {}),
            r.ENV_TENANT_MAX_RUNNING: str(self.tenant_max_running),
            r.ENV_TENANT_RUNS_PER_SECOND: str(self.tenant_runs_per_second),
            r.ENV_TENANT_BURST: str(self.tenant_burst),
            **({r.ENV_TENANT_SLOTS: format_tenant_slots(self.tenant_slots)} if self.tenant_slots else {}),
            **({r.ENV_FAIR_SHARE: str(self.fair_share)} if self.fair_share is not None else {}),
            **(
                {r.ENV_LAMBDA_TIME_LIMIT: str(self.lambda_time_limit_seconds)}
                if self.lambda_time_limit_seconds != r.LAMBDA_TIME_LIMIT_SECONDS
                else {}
            ),
            **(
                {r.ENV_SWEEPER_GRACE_SECONDS: str(self.sweeper_grace_seconds)}
                if self.sweeper_grace_seconds != r.DEFAULT_SWEEPER_GRACE_SECONDS
                else {}
            ),
        }
        for kind, url in self.queue_urls.items():
            env[r.ENV_QUEUE_URL_PREFIX + kind.upper()] = url
        for priority in r.BACKPRESSURE_PRIORITIES:
            limit = self.backpressure.get(priority, QueueLimit())
            env[r.ENV_BACKPRESSURE_DEPTH_PREFIX + priority.upper()] = str(limit.depth)
            env[r.ENV_BACKPRESSURE_AGE_PREFIX + priority.upper()] = str(limit.age_seconds)
        for kind, url in self.dlq_urls.items():
            env[r.ENV_DLQ_URL_PREFIX + kind.upper()] = url
        optional = {
            r.ENV_IDEMPOTENCY_TABLE: self.idempotency_table,
            r.ENV_BUCKET: self.bucket,
            r.ENV_STATE_MACHINE_ARN: self.state_machine_arn,
            r.ENV_TENANT_TOKENS: self.tenant_tokens,
            r.ENV_ALLOWED_HTTP_HOSTS: ",".join(self.allowed_http_hosts) or None,
            r.ENV_NOTIFY_TOPIC_ARNS: ",".join(self.notify_topic_arns) or None,
            r.ENV_HANDLER_MODULES: ",".join(self.handler_modules) or None,
            r.ENV_CODE_VERSION: self.code_version,
        }
        env.update({k: v for k, v in optional.items() if v})
        return env


def default_backpressure() -> dict[str, QueueLimit]:
    """The deployment defaults (``r.DEFAULT_BACKPRESSURE_DEPTH``/``..._AGE_SECONDS``) per priority."""
    return {
        p: QueueLimit(r.DEFAULT_BACKPRESSURE_DEPTH[p], r.DEFAULT_BACKPRESSURE_AGE_SECONDS[p])
        for p in r.BACKPRESSURE_PRIORITIES
    }


def backpressure_from(env: Mapping[str, str]) -> dict[str, QueueLimit]:
    """Each priority's limits from ``JOBSCHED_BACKPRESSURE_DEPTH_<P>`` (0..1,000,000) and
    ``JOBSCHED_BACKPRESSURE_AGE_SECONDS_<P>`` (0, or 120..43,200); unset gives the default."""
    defaults = default_backpressure()
    limits: dict[str, QueueLimit] = {}
    for priority in r.BACKPRESSURE_PRIORITIES:
        depth = _bounded(
            env,
            r.ENV_BACKPRESSURE_DEPTH_PREFIX + priority.upper(),
            defaults[priority].depth,
            0,
            r.MAX_BACKPRESSURE_DEPTH,
        )
        age_name = r.ENV_BACKPRESSURE_AGE_PREFIX + priority.upper()
        age = _bounded(env, age_name, defaults[priority].age_seconds, 0, r.MAX_BACKPRESSURE_AGE_SECONDS)
        if 0 < age < r.MIN_BACKPRESSURE_AGE_SECONDS:
            raise ConfigurationError(
                f"environment variable {age_name} must be 0 (off) or >= {r.MIN_BACKPRESSURE_AGE_SECONDS}, "
                f"got {age}"
            )
        limits[priority] = QueueLimit(depth, age)
    return limits


def _bounded(env: Mapping[str, str], name: str, default: int, minimum: int, maximum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"environment variable {name} must be an integer, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ConfigurationError(
            f"environment variable {name} must be between {minimum} and {maximum}, got {value}"
        )
    return value


def tenant_slots_from(raw: str | None) -> dict[str, int]:
    """``JOBSCHED_TENANT_SLOTS`` (``default=20,low=5``) as a mapping; a bad value names the variable."""
    try:
        return parse_tenant_slots(raw, r.ENV_TENANT_SLOTS)
    except ValidationError as exc:
        raise ConfigurationError(f"environment variable {exc}") from None


def fair_share_from(raw: str | None) -> float | None:
    """``JOBSCHED_FAIR_SHARE``: a share from 0.1 to 1; unset or empty: None. A bad value names it."""
    if raw is None or not raw.strip():
        return None
    try:
        return check_share(float(raw), r.ENV_FAIR_SHARE)
    except (ValueError, ValidationError):
        raise ConfigurationError(
            f"environment variable {r.ENV_FAIR_SHARE} must be a number from 0.1 to 1, got {raw!r}"
        ) from None


def worker_concurrency_from(raw: str | None) -> int:
    """``JOBSCHED_WORKER_CONCURRENCY``: at least 1; unset or not a number gives the default (a tuning
    knob, never a reason for the worker to refuse its batch)."""
    return concurrency_from(raw, r.DEFAULT_WORKER_CONCURRENCY)


def concurrency_from(raw: str | None, default: int, most: int | None = None) -> int:
    """A thread count from the environment: at least 1 (at most ``most``); unset or not a number gives
    ``default`` (a tuning knob, never a reason for a function to refuse its work)."""
    try:
        value = max(1, int((raw or "").strip() or default))
    except ValueError:
        return default
    return min(value, most) if most is not None else value


def handler_modules_from(raw: str | None) -> tuple[str, ...]:
    """``JOBSCHED_HANDLER_MODULES``: the comma-separated module names, blanks dropped."""
    return tuple(m.strip() for m in (raw or "").split(",") if m.strip())


def rate_setting(raw: str | None) -> float:
    """``JOBSCHED_TENANT_RUNS_PER_SECOND``: a number >= 0 (0 or unset: no default rate)."""
    text = (raw or "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(
            f"environment variable {r.ENV_TENANT_RUNS_PER_SECOND} must be a number, got {text!r}"
        ) from None
    if not 0 <= value <= 1000:
        raise ConfigurationError(f"environment variable {r.ENV_TENANT_RUNS_PER_SECOND} must be 0..1000")
    return value
