"""Turn a client's job definition (a JSON object) into a validated :class:`JobSpec`.

Everything is checked before anything is written (DESIGN §2.5): the schedule and zone through the
time core, the policies through :func:`jobsched.core.policies.validate_policies`, the target (a known
handler or an HTTP call), the payload size. Each error names the field and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.dispatch_plan import first_fire_after
from jobsched.core.errors import PayloadTooLargeError, ValidationError
from jobsched.core.limits import concurrency_from, rate_from
from jobsched.core.messages import MAX_PAYLOAD_BYTES, payload_size
from jobsched.core.models import PRIORITIES, JobSpec, RetrySpec
from jobsched.core.notify import validate_notify
from jobsched.core.policies import validate_policies
from jobsched.core.schedules import Schedule, parse_schedule

MAX_TIMEOUT_SECONDS = 900  # the worker function's own limit; longer work is a chunked job
MAX_NAME_LENGTH = 200
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
SPEC_FIELDS = frozenset(JobSpec.__dataclass_fields__)

KnownHandlers = Callable[[str], bool]
_EPSILON = timedelta(milliseconds=1)


@dataclass(frozen=True)
class CheckedSpec:
    """A job definition validated in full (:func:`check_spec`): its spec, its parsed schedule and, once
    asked for an instant (:meth:`due_from`), its first occurrence from then.

    A definition is validated once on its way in: the API checks it before it counts the job in the
    tenant's limit, and :meth:`jobsched.services.jobs.JobService.create` stores what was checked
    without checking it again."""

    spec: JobSpec
    schedule: Schedule
    checked_at: datetime | None = None
    first_due: datetime | None = None

    def due_from(self, now: datetime) -> CheckedSpec:
        """This definition with its first occurrence at or after ``now`` (:class:`ValidationError`
        when its schedule has none); asked again for the same instant, the answer already found."""
        if self.checked_at == now and self.first_due is not None:
            return self
        first = first_fire_after(self.schedule, now - _EPSILON)
        if first is None:
            raise ValidationError(
                f"schedule {self.spec.schedule!r} has no occurrence after {now.isoformat()}", field="schedule"
            )
        return replace(self, checked_at=now, first_due=first)


def spec_from_dict(data: Mapping[str, Any]) -> JobSpec:
    """Build a :class:`JobSpec` from a JSON object (unknown fields are an error, not ignored)."""
    if not isinstance(data, Mapping):
        raise ValidationError("a job definition must be a JSON object")
    unknown = set(data) - SPEC_FIELDS
    if unknown:
        raise ValidationError(
            f"unknown job fields: {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(SPEC_FIELDS))}",
            field=sorted(unknown)[0],
        )
    for required in ("name", "schedule", "target"):
        if required not in data:
            raise ValidationError(f"job field {required!r} is required", field=required)
    values = dict(data)
    values["retry"] = RetrySpec.from_dict(values.get("retry"))
    values["notify"] = validate_notify(values.get("notify"))
    values["concurrency"] = normalize_limit(values.get("concurrency"), "concurrency")
    values["rate_limit"] = normalize_limit(values.get("rate_limit"), "rate_limit")
    return JobSpec(**values)


def check_spec(data: JobSpec | Mapping[str, Any], known_handlers: KnownHandlers | None = None) -> CheckedSpec:
    """Validate a job definition (:func:`spec_from_dict`, then :func:`validate_spec`) into a
    :class:`CheckedSpec`."""
    spec = data if isinstance(data, JobSpec) else spec_from_dict(data)
    return CheckedSpec(spec, validate_spec(spec, known_handlers))


def normalize_limit(data: Any, field: str) -> dict[str, Any]:
    """A job's ``concurrency`` or ``rate_limit`` checked and in its stored form (``{}``: none; no
    ``key``: the job's own id, filled in when a run is sent)."""
    parse = concurrency_from if field == "concurrency" else rate_from
    spec = parse(data, "job")
    if spec is None:
        return {}
    stored = spec.to_dict()
    if isinstance(data, Mapping) and "key" not in data:
        del stored["key"]
    return stored


def validate_spec(spec: JobSpec, known_handlers: KnownHandlers | None = None) -> Schedule:
    """Check every field of ``spec``; return the parsed schedule. Raises ValidationError naming the field."""
    if not isinstance(spec.name, str) or not spec.name.strip() or len(spec.name) > MAX_NAME_LENGTH:
        raise ValidationError(f"name must be 1-{MAX_NAME_LENGTH} characters", field="name")
    if not isinstance(spec.description, str) or len(spec.description) > 1000:
        raise ValidationError("description must be a string of at most 1000 characters", field="description")
    schedule = parse_schedule(
        spec.schedule, spec.timezone, dst_gap=spec.dst_gap, dst_overlap=spec.dst_overlap
    )
    if spec.priority not in PRIORITIES:
        raise ValidationError(
            f"priority {spec.priority!r} is not allowed: use {', '.join(PRIORITIES)}", field="priority"
        )
    _int_in_range("timeout_seconds", spec.timeout_seconds, 1, MAX_TIMEOUT_SECONDS)
    validate_policies(
        misfire_policy=spec.misfire_policy,
        misfire_grace_seconds=spec.misfire_grace_seconds,
        max_catchup=spec.max_catchup,
        overlap_policy=spec.overlap_policy,
        jitter_seconds=spec.jitter_seconds,
        max_attempts=spec.retry.max_attempts,
        backoff_base_seconds=spec.retry.base_seconds,
        backoff_max_seconds=spec.retry.max_seconds,
    )
    validate_target(spec.target, known_handlers)
    validate_payload(spec.payload)
    validate_notify(spec.notify)
    normalize_limit(spec.concurrency, "concurrency")
    normalize_limit(spec.rate_limit, "rate_limit")
    return schedule


def validate_payload(payload: Any, field: str = "payload") -> None:
    if not isinstance(payload, dict):
        raise ValidationError(f"{field} must be a JSON object", field=field)
    try:
        size = payload_size(payload)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{field} is not JSON-serializable: {exc}", field=field) from exc
    if size > MAX_PAYLOAD_BYTES:
        raise PayloadTooLargeError(
            f"{field} is {size} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes (64 KiB) of JSON: "
            "store large inputs in S3 and pass their key",
        )


def validate_target(target: Any, known_handlers: KnownHandlers | None = None) -> None:
    """A target is ``{"handler": name}`` (registered) or ``{"http": {url, method, headers, ...}}``, or
    ``{"workflow": {"nodes": [...]}}`` (a DAG of such targets: :func:`jobsched.core.dag.parse_workflow`)."""
    if isinstance(target, dict) and set(target) == {"workflow"}:
        from jobsched.core.dag import parse_workflow  # dag validates its nodes' targets with this module

        parse_workflow(target["workflow"], lambda t: validate_target(t, known_handlers))
        return
    shape_ok = isinstance(target, dict) and (
        (len(target) == 1 and next(iter(target)) in ("handler", "http"))
        or (set(target) == {"handler", "version"})
    )
    if not shape_ok:
        raise ValidationError(
            'target must be {"handler": "<name>"} (optionally with "version": <n> to pin one) '
            'or {"http": {"url": ..., "method": ...}}',
            field="target",
        )
    if "handler" in target:
        name = target["handler"]
        if not isinstance(name, str) or not name:
            raise ValidationError("target.handler must be a handler name", field="target")
        version = target.get("version")
        if "version" in target and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
            raise ValidationError("target.version must be an integer >= 1 (the handler version to pin)",
                                  field="target.version")
        if known_handlers is not None and not known_handlers(name):
            raise ValidationError(
                f"unknown handler {name!r}: register it with @job({name!r})", field="target"
            )
        return
    http = target["http"]
    if not isinstance(http, dict):
        raise ValidationError("target.http must be an object", field="target")
    unknown = set(http) - {"url", "method", "headers", "body", "timeout_seconds"}
    if unknown:
        raise ValidationError(f"unknown target.http fields: {', '.join(sorted(unknown))}", field="target")
    url = http.get("url")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise ValidationError("target.http.url must be an http(s) URL", field="target")
    if http.get("method", "POST") not in HTTP_METHODS:
        raise ValidationError(f"target.http.method must be one of {', '.join(HTTP_METHODS)}", field="target")
    headers = http.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ValidationError("target.http.headers must map strings to strings", field="target")
    if "timeout_seconds" in http:
        _int_in_range("target.http.timeout_seconds", http["timeout_seconds"], 1, MAX_TIMEOUT_SECONDS)


def _int_in_range(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(
            f"{name} must be a whole number between {low} and {high}, got {value!r}", field=name
        )
