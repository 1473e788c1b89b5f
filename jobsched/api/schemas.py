"""Pydantic request and response models of the HTTP API (they also make the OpenAPI document).

Request models check shape and ranges (types, lengths, enums); the services check meaning (a cron
expression, a time zone, a registered handler, the payload size) and raise the domain errors.
Unknown fields are rejected so a typo is an error, not a silently ignored setting. Instants leave the
API as ISO 8601 UTC strings ending in ``Z``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    field_validator,
    model_validator,
)

from jobsched.api.auth import TENANT_PATTERN
from jobsched.api.storable import check_storable
from jobsched.core.deadlines import MAX_DEADLINE_SECONDS
from jobsched.core.limits import KEY_PATTERN as LIMIT_KEY_PATTERN
from jobsched.core.pools import MAX_CONTAINER_TIMEOUT_SECONDS

Priority = Literal["high", "default", "low"]
#: Where a job's runs execute (docs/pools.md; :mod:`jobsched.core.pools`).
Pool = Literal["lambda", "long", "container"]
POOL_DESCRIPTION = (
    "where its runs execute: lambda (the priority's queue), long (the long queue's own function) or "
    "container (container workers); absent: container when timeout_seconds is beyond the Lambda limit "
    "(900 s), long for a chunked job, else lambda. Timeouts: up to the Lambda limit on lambda and long, "
    "up to 43200 s on container (docs/pools.md)"
)
MAX_DEADLINE = MAX_DEADLINE_SECONDS
DEADLINE_DESCRIPTION = (
    "seconds after each scheduled instant by which its run must have succeeded; a run that has not is "
    "reported once (deadline_missed_at, the notify channels, RunsMissedDeadline); 0 = none"
)
#: The schema's bound on a timeout: the container pool's; the service checks the job's own pool.
MAX_TIMEOUT = MAX_CONTAINER_TIMEOUT_SECONDS
MisfirePolicy = Literal["run_once", "run_all", "skip"]
OverlapPolicy = Literal["allow", "skip", "buffer_one", "replace"]
DstGap = Literal["shift", "skip"]
DstOverlap = Literal["first", "both"]
JobStateName = Literal["active", "paused", "completed"]
RunStateName = Literal["queued", "running", "retrying", "succeeded", "failed", "cancelled", "skipped"]


def iso_z(value: datetime) -> str:
    """Aware datetime -> ``2026-11-29T20:45:00.123Z`` (UTC, millisecond precision)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()} cannot be sent: instants are aware")
    utc = value.astimezone(UTC)
    return f"{utc.year:04d}" + utc.strftime("-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


class _In(BaseModel):
    """A request body: unknown fields refused, and types as JSON has them (strict: ``"3"`` or
    ``true`` is not an integer, ``0`` not an instant), so the body means what the schema says."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, strict=True)


def _json_integer(value: Any) -> Any:
    """JSON's integer: an int, or a number with no fraction (``3.0``); never a boolean or a string."""
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_LAX_INSTANT: TypeAdapter[datetime] = TypeAdapter(datetime)


#: RFC 3339's date-time (the OpenAPI ``format: date-time``), the offset left to the callers' own check
#: (a naive time is refused with "needs a UTC offset or Z"). Pydantic alone also takes a number of
#: seconds ("0", "-1", "123.5"), a date, or a time without seconds.
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$")


def _json_instant(value: Any) -> Any:
    """An instant is an RFC 3339 date-time string (not a number of seconds, in a body or a query)."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _DATE_TIME.match(value):
        raise ValueError(
            f"must be an RFC 3339 date-time with an offset or Z, e.g. 2026-11-01T00:00:00Z, not {value!r:.40}"
        )
    return _LAX_INSTANT.validate_python(value)


JsonInt = Annotated[int, BeforeValidator(_json_integer)]
#: A JSON object of the caller's, kept as sent: the models strip their own strings, but a payload's
#: keys are data (``{" a": 1}`` was stored as ``{"a": 1}``, ``{"\u00a0": 1}`` refused as an empty key).
Payload = dict[Annotated[str, StringConstraints(strip_whitespace=False)], Any]
Instant = Annotated[datetime, BeforeValidator(_json_instant)]


def _storable_payload(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None:
        check_storable(value)
    return value


# --- errors, health --------------------------------------------------------------------------------


class ErrorOut(BaseModel):
    error: str = Field(description="machine-readable code, e.g. validation_error, not_found")
    message: str = Field(description="what is wrong and what to fix")


class HealthOut(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    time: str = Field(description="the server's current instant (ISO 8601 UTC)")


# --- schedules -------------------------------------------------------------------------------------


class FireOut(BaseModel):
    at: str = Field(description="the fire instant, ISO 8601 UTC")
    local: str = Field(description="the same instant on the schedule's wall clock, with its offset")
    note: str | None = Field(description="dst_gap_shifted, dst_overlap_first, dst_overlap_second or null")


class PreviewOut(BaseModel):
    schedule: str
    timezone: str
    fire_times: list[FireOut] = Field(description="the next occurrences, soonest first")


# --- jobs -----------------------------------------------------------------------------------------


class HttpTargetIn(_In):
    url: str = Field(min_length=1, max_length=2048, description="https URL the run POSTs to")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[Annotated[str, Field(min_length=1)], str] = Field(default_factory=dict, max_length=50)
    body: Payload | list[Any] | str | None = Field(default=None, description="request body (JSON or text)")
    timeout_seconds: JsonInt | None = Field(
        default=None, ge=1, le=MAX_TIMEOUT, description="up to the job's pool's limit (900 s off container)"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.lower().startswith(("http://", "https://")):
            raise ValueError("must start with https:// (or http://)")
        return value

    @field_validator("body")
    @classmethod
    def _storable_body(cls, value: Any) -> Any:
        if value is not None:
            check_storable(value)
        return value


class TargetIn(_In):
    handler: str | None = Field(
        default=None, min_length=1, max_length=200, description="a registered handler"
    )
    version: JsonInt | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="the handler version to pin (absent: each run binds to the newest version registered "
        "when its first attempt starts; GET /handlers lists the versions and their payload schemas)",
    )
    http: HttpTargetIn | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TargetIn:
        if (self.handler is None) == (self.http is None):
            raise ValueError('give exactly one of {"handler": "<name>"} or {"http": {...}}')
        if self.version is not None and self.handler is None:
            raise ValueError("version pins a handler's version: give it with handler")
        return self

    def to_domain(self) -> dict[str, Any]:
        if self.handler is not None:
            pinned = {} if self.version is None else {"version": self.version}
            return {"handler": self.handler, **pinned}
        assert self.http is not None
        return {"http": self.http.model_dump(exclude_none=True)}


class NotifyIn(_In):
    """Who is told when a run is dead-lettered: an SNS topic and/or a webhook (``{}``: nobody here)."""

    sns_topic_arn: str | None = Field(
        default=None,
        max_length=300,
        description="arn:aws:sns:<region>:<account>:<topic>; must match the deployment's notify_topic_arns",
    )
    webhook: str | None = Field(
        default=None, max_length=2048, description="http(s) URL POSTed the notification (SSRF-guarded)"
    )

    def to_domain(self) -> dict[str, str]:
        return self.model_dump(exclude_none=True)


class ConcurrencyIn(_In):
    """At most ``limit`` runs holding ``key`` execute at once (``{}``: no limit). The key is scoped to
    the tenant; it defaults to the job's id (a limit on this job alone)."""

    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=LIMIT_KEY_PATTERN.pattern,
        description="shared by the jobs naming it; default: the job id",
    )
    limit: JsonInt | None = Field(
        default=None, ge=1, le=1000, description="runs of the key executing at once"
    )

    @model_validator(mode="after")
    def _limit_given(self) -> ConcurrencyIn:
        if self.limit is None and self.key is not None:
            raise ValueError('give a limit: {"key": "...", "limit": N} (or {} for no limit)')
        return self

    def to_domain(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class RateLimitIn(_In):
    """A token bucket shared by the jobs naming ``key``: at most ``per_second`` runs start per second,
    ``burst`` at once after a quiet spell (``{}``: no limit)."""

    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=LIMIT_KEY_PATTERN.pattern,
        description="shared by the jobs naming it; default: the job id",
    )
    per_second: float | None = Field(default=None, ge=0.001, le=1000, description="runs started per second")
    burst: JsonInt | None = Field(
        default=None, ge=1, le=1000, description="runs that may start at once (default 1)"
    )

    @model_validator(mode="after")
    def _rate_given(self) -> RateLimitIn:
        if self.per_second is None and (self.key is not None or self.burst is not None):
            raise ValueError('give per_second: {"key": "...", "per_second": R, "burst": B} (or {} for none)')
        return self

    def to_domain(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class RetryIn(_In):
    max_attempts: JsonInt = Field(default=3, ge=1, le=100)
    base_seconds: float = Field(default=2.0, ge=0, le=86400)
    max_seconds: float = Field(default=300.0, ge=0, le=86400)

    @field_validator("base_seconds", "max_seconds")
    @classmethod
    def _storable_seconds(cls, value: float) -> float:
        # 5e-324 passed the bounds, then failed the DynamoDB write (a 500, found by schemathesis)
        check_storable(value)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> RetryIn:
        if self.base_seconds > self.max_seconds:
            raise ValueError("base_seconds must be <= max_seconds")
        return self


class JobIn(_In):
    """``POST /jobs``: a new job. Defaults are the documented ones (docs/semantics)."""

    name: str = Field(min_length=1, max_length=200)
    schedule: str = Field(
        min_length=1, max_length=256, description="cron, @macro, cron(...), rate(...), at(...)"
    )
    timezone: str = Field(default="UTC", min_length=1, max_length=64, description="IANA time zone")
    target: TargetIn
    payload: Payload = Field(default_factory=dict)
    priority: Priority = Field(
        default="default",
        description="orders runs within the lambda pool; recorded, not used, on long and container",
    )
    pool: Pool | None = Field(default=None, description=POOL_DESCRIPTION)
    timeout_seconds: JsonInt = Field(
        default=300, ge=1, le=MAX_TIMEOUT, description="up to 900 s on lambda and long, 43200 s on container"
    )
    retry: RetryIn = Field(default_factory=RetryIn)
    misfire_policy: MisfirePolicy = "run_once"
    misfire_grace_seconds: JsonInt = Field(default=60, ge=0, le=86400 * 7)
    max_catchup: JsonInt = Field(default=100, ge=1, le=10000)
    overlap_policy: OverlapPolicy = "allow"
    dst_gap: DstGap = "shift"
    dst_overlap: DstOverlap = "first"
    jitter_seconds: JsonInt = Field(default=0, ge=0, le=3600)
    deadline_seconds: JsonInt = Field(default=0, ge=0, le=MAX_DEADLINE, description=DEADLINE_DESCRIPTION)
    description: str = Field(default="", max_length=1000)
    notify: NotifyIn = Field(
        default_factory=NotifyIn,
        description="who is told when a run of this job is dead-lettered ({} = the tenant's default)",
    )
    concurrency: ConcurrencyIn = Field(
        default_factory=ConcurrencyIn,
        description='{"key", "limit"}: at most limit runs holding key execute at once (semantics/limits.md)',
    )
    rate_limit: RateLimitIn = Field(
        default_factory=RateLimitIn,
        description='{"key", "per_second", "burst"}: a token bucket shared by the jobs naming key',
    )

    def to_domain(self) -> dict[str, Any]:
        """The job definition as the job service takes it."""
        data = self.model_dump()
        data["target"] = self.target.to_domain()
        data["notify"] = self.notify.to_domain()
        data["concurrency"] = self.concurrency.to_domain()
        data["rate_limit"] = self.rate_limit.to_domain()
        return data

    _payload_storable = field_validator("payload")(_storable_payload)


class JobPatch(_In):
    """``PATCH /jobs/{id}``: the fields to change (absent = unchanged)."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    schedule: str | None = Field(default=None, min_length=1, max_length=256)
    timezone: str | None = Field(default=None, min_length=1, max_length=64)
    target: TargetIn | None = None
    payload: Payload | None = None
    priority: Priority | None = None
    pool: Pool | None = Field(
        default=None,
        description="moves the job (and its runs queued ahead) to this pool; a timeout beyond the Lambda "
        "limit needs container",
    )
    timeout_seconds: JsonInt | None = Field(default=None, ge=1, le=MAX_TIMEOUT)
    retry: RetryIn | None = None
    misfire_policy: MisfirePolicy | None = None
    misfire_grace_seconds: JsonInt | None = Field(default=None, ge=0, le=86400 * 7)
    max_catchup: JsonInt | None = Field(default=None, ge=1, le=10000)
    overlap_policy: OverlapPolicy | None = None
    dst_gap: DstGap | None = None
    dst_overlap: DstOverlap | None = None
    jitter_seconds: JsonInt | None = Field(default=None, ge=0, le=3600)
    deadline_seconds: JsonInt | None = Field(default=None, ge=0, le=MAX_DEADLINE, description="0 removes it")
    description: str | None = Field(default=None, max_length=1000)
    notify: NotifyIn | None = Field(default=None, description="replaces the job's notify; {} removes it")
    concurrency: ConcurrencyIn | None = Field(default=None, description="replaces the limit; {} removes it")
    rate_limit: RateLimitIn | None = Field(default=None, description="replaces the limit; {} removes it")

    def to_domain(self) -> dict[str, Any]:
        changes = self.model_dump(exclude_unset=True)
        if any(v is None for v in changes.values()):
            nulls = ", ".join(sorted(k for k, v in changes.items() if v is None))
            raise ValueError(f"{nulls}: null is not a value; leave the field out to keep it")
        if self.target is not None:
            changes["target"] = self.target.to_domain()
        if self.notify is not None:
            changes["notify"] = self.notify.to_domain()
        if self.concurrency is not None:
            changes["concurrency"] = self.concurrency.to_domain()
        if self.rate_limit is not None:
            changes["rate_limit"] = self.rate_limit.to_domain()
        return changes

    _payload_storable = field_validator("payload")(_storable_payload)


class PauseIn(_In):
    note: str | None = Field(default=None, max_length=500)


class ResumeIn(_In):
    misfire_policy: MisfirePolicy | None = Field(
        default=None, description="overrides the job's misfire policy for what was missed while paused"
    )


class BackfillIn(_In):
    from_: Instant = Field(alias="from", description="first instant (inclusive), with an offset or Z")
    to: Instant = Field(description="last instant (inclusive), with an offset or Z")

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    @field_validator("from_", "to")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("needs a UTC offset or Z (e.g. 2026-11-01T00:00:00Z)")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> BackfillIn:
        if self.from_ > self.to:
            raise ValueError("from must not be after to")
        return self


class JobOut(BaseModel):
    id: str
    state: JobStateName
    version: int
    name: str
    schedule: str
    timezone: str
    target: dict[str, Any]
    payload: dict[str, Any]
    priority: str
    pool: str = Field(
        default="lambda", description="where its runs execute: lambda, long or container (docs/pools.md)"
    )
    timeout_seconds: int
    retry: dict[str, Any]
    misfire_policy: str
    misfire_grace_seconds: int
    max_catchup: int
    overlap_policy: str
    dst_gap: str
    dst_overlap: str
    jitter_seconds: int
    deadline_seconds: int = Field(default=0, description=DEADLINE_DESCRIPTION)
    description: str = ""
    notify: dict[str, str] = Field(
        default_factory=dict, description="who is told of its dead letters: sns_topic_arn and/or webhook"
    )
    concurrency: dict[str, Any] = Field(
        default_factory=dict, description="{key, limit} ({} = none); key is the job id unless named"
    )
    rate_limit: dict[str, Any] = Field(
        default_factory=dict,
        description="{key, per_second, burst} ({} = none); key is the job id unless named",
    )
    paused_note: str | None = None
    created_at: str
    updated_at: str
    next_fire_times: list[str] = Field(description="the next 5 fire instants (ISO 8601 UTC)")
    payload_version: int | None = Field(
        default=None,
        description="the handler version whose payload contract the payload was checked against "
        "(null: an HTTP or workflow target, or a job written before handlers had versions)",
    )


class PausedOut(JobOut):
    withdrawn_runs: list[str] = Field(
        description="runs queued ahead of their due instant, now skipped (paused)"
    )


class DeletedOut(BaseModel):
    id: str
    deleted: bool
    withdrawn_runs: list[str] = Field(
        description="runs queued ahead of their due instant, now skipped (deleted)"
    )


class TriggerIn(_In):
    payload: Payload | None = Field(default=None, description="overrides the job's payload for this run")

    _payload_storable = field_validator("payload")(_storable_payload)


class JobList(BaseModel):
    items: list[JobOut]
    next_cursor: str | None


# --- runs -----------------------------------------------------------------------------------------


class AttemptOut(BaseModel):
    attempt: int
    started_at: str
    finished_at: str | None = None
    outcome: str | None = None
    error: str | None = None
    handler: str | None = Field(
        default=None,
        description="the handler the attempt ran (null: an HTTP target, or an attempt recorded "
        "before attempts named it)",
    )
    handler_version: int | None = Field(
        default=None,
        description="the handler version it ran: the version its run is bound to (decision 0048)",
    )
    code_version: str | None = Field(
        default=None,
        description="the code version of the deployment whose worker ran it (JOBSCHED_CODE_VERSION: the "
        "Lambda asset's hash, or the git revision in jobsched dev)",
    )


class ProgressOut(BaseModel):
    done: int = Field(ge=0)
    total: int | None = Field(default=None, ge=0, description="null when not known (yet)")
    unit: str = Field(description="chunks (a chunked run) or the unit its handler named (default steps)")


class RunOut(BaseModel):
    id: str
    job_id: str
    state: RunStateName
    trigger: str
    scheduled_at: str
    started_at: str | None = None
    finished_at: str | None = None
    pool: str = Field(
        default="lambda", description="where the run executes: lambda, long or container (docs/pools.md)"
    )
    priority: str = Field(
        default="default", description="the job's priority when the run was made: high, default or low"
    )
    handler: str | None = Field(
        default=None, description="the handler the run executes (null: an HTTP target)"
    )
    handler_version: int | None = Field(
        default=None,
        description="the handler version the run executes: its job's pinned version from creation, else "
        "the newest registered when its first attempt started (null until then); kept for its retries, "
        "a takeover and a replay",
    )
    attempt: int
    attempts: list[AttemptOut]
    output: Any = Field(
        default=None,
        description="the handler's result; in listings an output kept in S3 shows as {ref: <key>}, "
        "GET /runs/{id} returns the output itself (null when output_expired)",
    )
    output_expired: bool = Field(
        default=False,
        description="GET /runs/{id} only: true when the run's output was stored in S3 and the bucket's "
        "retention has removed it; output is then null",
    )
    expires_at: str | None = Field(
        default=None,
        description="when the run's record becomes eligible for deletion (the later of its creation and "
        "its due instant, or its last replay, + the deployment's retention_days); DynamoDB removes it "
        "within a few days of that instant",
    )
    error: str | None = None
    skip_reason: str | None = None
    skipped_count: int | None = None
    cancel_requested: bool = False
    progress: ProgressOut | None = Field(
        default=None,
        description="chunked runs: {done, total, unit: chunks} (total null until the plan step has run); "
        "a running plain run: what its handler last reported with ctx.heartbeat(progress); else null",
    )
    replays: list[dict[str, Any]] = Field(
        default_factory=list,
        description="each replay, retry and discard of the run: {action, at, from_attempt, payload_changed}",
    )
    logs: RunLogsLink | None = Field(
        default=None,
        description="GET /runs/{id} only: where the run's log lines are (null in listings)",
    )
    waiting_for: str | None = Field(
        default=None,
        description="a queued or retrying run held back by a limit: concurrency:<key>, rate:<key>, "
        "concurrency:@tenant or rate:@tenant (null once it starts)",
    )
    waiting_until: str | None = Field(
        default=None,
        description="when its delivery next looks (a freed slot wakes it sooner); null once it starts",
    )
    waits: int = Field(default=0, description="how many times its deliveries waited for a limit (kept)")
    first_waited_at: str | None = Field(default=None, description="when it first waited (kept)")
    deadline_at: str | None = Field(
        default=None,
        description="a scheduled run of a job with deadline_seconds: when it must have succeeded "
        "(null: none)",
    )
    deadline_missed_at: str | None = Field(
        default=None,
        description="when the sweeper found the run had not succeeded by deadline_at and told the owners "
        "(null: not missed, or not found yet)",
    )


class RunLogsLink(BaseModel):
    log_group: str | None = Field(
        default=None,
        description="the CloudWatch Logs group of the worker function, where the run's lines are (AWS; "
        "null in the embedded mode)",
    )
    insights_query: str = Field(
        description="a CloudWatch Logs Insights query for the run's lines (every line carries run_id)"
    )
    lines: str | None = Field(
        default=None,
        description="the path that serves the run's lines, GET /runs/{id}/logs: embedded mode only "
        "(null where the route does not serve them)",
    )


class RunLogLines(BaseModel):
    run_id: str
    items: list[dict[str, Any]] = Field(
        description="the run's JSON log lines as written, oldest first (each has job_id, run_id, "
        "attempt, tenant)"
    )
    truncated: bool = Field(description="true when the run has more lines than the 5000 returned")


class RunList(BaseModel):
    items: list[RunOut]
    next_cursor: str | None


class RunsOut(BaseModel):
    runs: list[RunOut]


class BackfillOut(BaseModel):
    """An asynchronous backfill (more than 100 occurrences): what ``202`` answers and ``GET
    /jobs/{job_id}/backfills/{backfill_id}`` shows while its runs are made."""

    id: str
    job_id: str
    from_: str = Field(alias="from", serialization_alias="from", description="first instant of the range")
    to: str = Field(description="last instant of the range")
    state: Literal["running", "succeeded", "failed"] = Field(
        description="running: occurrences left to decide; succeeded: every run made (or found) and "
        "queued; failed: stopped for good (error says why)"
    )
    planned: int = Field(description="occurrences in the range (one run each)")
    done: int = Field(description="occurrences decided so far, in order from the first")
    created: int = Field(description="runs this backfill created")
    existing: int = Field(
        description="runs found already there (an earlier backfill of the instant, or an interrupted "
        "attempt of this one), not created again"
    )
    sent: int = Field(description="run messages queued (the created runs and the existing ones still queued)")
    error: str | None = None
    created_at: str
    updated_at: str = Field(description="when the record last moved")
    finished_at: str | None = None
    runs: str = Field(description="where the runs appear as they are made: GET /jobs/{job_id}/runs")

    model_config = ConfigDict(populate_by_name=True)


# --- dead letters ----------------------------------------------------------------------------------


class DeadLetterOut(BaseModel):
    run_id: str
    job_id: str
    scheduled_at: str | None = None
    failed_at: str | None = None
    reason: str | None = Field(
        default=None,
        description="permanent, exhausted, lease_expired, poison, stranded (given up by the sweeper) "
        "or lost (its job deleted before it ran)",
    )
    error: str | None = None
    attempt: int = 0
    attempts: list[AttemptOut]
    payload: dict[str, Any] | None = None
    target: dict[str, Any] | None = None
    replays: list[dict[str, Any]]
    notification: dict[str, Any] = Field(
        default_factory=dict,
        description="the dead letter's notification: state (pending, retrying, sent, failed, none), "
        "to, sent, tries, at, error",
    )


class DeadLetterList(BaseModel):
    items: list[DeadLetterOut]
    next_cursor: str | None


class ReplayIn(_In):
    payload: Payload | None = Field(default=None, description="a corrected payload (default: the same)")

    _payload_storable = field_validator("payload")(_storable_payload)


class RetryRunIn(_In):
    payload: Payload | None = Field(default=None, description="a corrected payload (default: the same)")

    _payload_storable = field_validator("payload")(_storable_payload)


DeadLetterReason = Literal["permanent", "exhausted", "lease_expired", "poison", "stranded", "lost"]


class ReplayFilterIn(_In):
    """Which dead letters to replay (all optional, combined with AND)."""

    job_id: str | None = Field(default=None, min_length=1, max_length=64)
    reason: DeadLetterReason | None = None
    error_contains: str | None = Field(default=None, min_length=1, max_length=200)
    since: Instant | None = Field(default=None, description="failed at or after (with an offset or Z)")
    until: Instant | None = Field(default=None, description="failed before (with an offset or Z)")
    max_runs: JsonInt = Field(default=1000, ge=1, le=1000)

    @field_validator("since", "until")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            raise ValueError("needs a UTC offset or Z (e.g. 2026-11-01T00:00:00Z)")
        return value


class ReplayErrorOut(BaseModel):
    run_id: str
    error: str


class ReplayResultOut(BaseModel):
    replayed: int
    run_ids: list[str]
    errors: list[ReplayErrorOut]
    more: bool = Field(description="true when more dead letters matched than max_runs")


class DiscardedOut(BaseModel):
    run_id: str
    discarded: bool


# --- admin ----------------------------------------------------------------------------------------


class NotifySettingsOut(BaseModel):
    notify: dict[str, str] = Field(
        description="the tenant's default recipients of dead-letter notifications ({} = none)"
    )


#: A mapped principal is a DynamoDB key (at most 2048 bytes with its prefix): ASCII, at most 1024
#: characters (IAM ARNs are far shorter).
MAX_PRINCIPAL_LENGTH = 1024
PRINCIPAL_PATTERN = r"^(arn:aws[a-z-]*:(iam|sts)::\d{12}:[!-~]+|account:\d{12}|org:o-[a-z0-9]{10,32})$"


class PrincipalIn(_In):
    principal: str = Field(
        min_length=1,
        max_length=MAX_PRINCIPAL_LENGTH,
        pattern=PRINCIPAL_PATTERN,
        description="an IAM ARN (a role ARN covers its sessions), account:<id> or org:<o-id>",
    )
    tenant: str = Field(min_length=1, max_length=128, pattern=TENANT_PATTERN.pattern)


class PrincipalOut(BaseModel):
    principal: str
    tenant: str
    updated_at: str


class PrincipalList(BaseModel):
    items: list[PrincipalOut]
    next_cursor: str | None
