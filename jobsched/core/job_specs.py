"""Turn a client's job definition (a JSON object) into a validated :class:`JobSpec`.

Everything is checked before anything is written (DESIGN §2.5): the schedule and zone through the
time core, the policies through :func:`jobsched.core.policies.validate_policies`, the target (a known
handler or an HTTP call), the payload size. Each error names the field and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.deadlines import validate_deadline
from jobsched.core.dispatch_plan import first_fire_after
from jobsched.core.errors import PayloadTooLargeError, ValidationError
from jobsched.core.handlers import (
    HandlerCatalog,
    check_handler_version,
    check_node_payloads,
    checked_payload_version,
)
from jobsched.core.limits import concurrency_from, rate_from
from jobsched.core.messages import MAX_PAYLOAD_BYTES, payload_size
from jobsched.core.models import PRIORITIES, JobSpec, RetrySpec
from jobsched.core.notify import validate_notify
from jobsched.core.policies import validate_policies
from jobsched.core.pools import (
    LAMBDA_TIME_LIMIT_SECONDS,
    check_chunk_pool,
    check_pool,
    check_timeout,
    default_pool,
)
from jobsched.core.schedules import Schedule, parse_schedule

MAX_NAME_LENGTH = 200
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
SPEC_FIELDS = frozenset(JobSpec.__dataclass_fields__)

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
    #: The handler version the payload was checked against (None: an HTTP or workflow target, or no
    #: catalogue to check with): the job's ``payload_version``.
    payload_version: int | None = None
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


def check_spec(
    data: JobSpec | Mapping[str, Any],
    catalog: HandlerCatalog | None = None,
    *,
    time_limit: int = LAMBDA_TIME_LIMIT_SECONDS,
) -> CheckedSpec:
    """Validate a job definition (:func:`spec_from_dict`, :func:`with_pool`, then
    :func:`validate_spec`) into a :class:`CheckedSpec` whose spec names its pool; with ``catalog``,
    also its payload against the contract of the handler version it will run (:func:`check_contract`).
    ``time_limit`` is the deployment's Lambda limit (``Settings.lambda_time_limit_seconds``)."""
    spec = data if isinstance(data, JobSpec) else spec_from_dict(data)
    spec = with_pool(spec, catalog, time_limit)
    schedule = validate_spec(spec, catalog, time_limit=time_limit)
    return CheckedSpec(spec, schedule, check_contract(spec, catalog))


def is_chunked(target: Any, catalog: HandlerCatalog | None) -> bool:
    """Whether ``target`` names a chunked job (a handler the catalogue registers as one, at its pinned
    version or the newest). False without a catalogue, or for a handler it does not register."""
    if catalog is None or not isinstance(target, Mapping) or not isinstance(target.get("handler"), str):
        return False
    name = target["handler"]
    if catalog.newest_version(name) is None:
        return False
    version = target.get("version")
    try:
        entry = catalog.lookup(
            name, version if isinstance(version, int) and not isinstance(version, bool) else None
        )
    except ValidationError:
        return False
    return bool(entry.chunked)


def with_pool(
    spec: JobSpec, catalog: HandlerCatalog | None, time_limit: int = LAMBDA_TIME_LIMIT_SECONDS
) -> JobSpec:
    """``spec`` with the pool it runs on: its own, else :func:`~jobsched.core.pools.default_pool`
    (``long`` for a chunked job, ``container`` for a timeout beyond ``time_limit``, else ``lambda``);
    a workflow's nodes get theirs written in the same way (:func:`~jobsched.core.dag.with_node_pools`)."""
    target = spec.target
    if isinstance(target, dict) and set(target) == {"workflow"} and isinstance(target["workflow"], Mapping):
        from jobsched.core.dag import with_node_pools  # dag validates its nodes' targets with this module

        nodes = target["workflow"].get("nodes")
        if isinstance(nodes, list) and all(isinstance(n, Mapping) for n in nodes):
            target = {"workflow": with_node_pools(target["workflow"], time_limit)}
    if spec.pool is not None:
        return replace(spec, target=target) if target is not spec.target else spec
    pool = default_pool(spec.timeout_seconds, time_limit, chunked=is_chunked(spec.target, catalog))
    return replace(spec, pool=pool, target=target)


def check_contract(spec: JobSpec, catalog: HandlerCatalog | None) -> int | None:
    """The handler version ``spec``'s payload was checked against (its pinned version, else the
    newest registered): a 422 naming ``target.version`` for a version not registered and the payload's
    field (``payload.rows``) for a payload its contract refuses; a workflow's node payloads are checked
    the same way. None for an HTTP or workflow target, or without a catalogue."""
    if catalog is None:
        return None
    check_node_payloads(spec.target, catalog)
    return checked_payload_version(spec.target, spec.payload, catalog)


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


def validate_spec(
    spec: JobSpec,
    catalog: HandlerCatalog | None = None,
    *,
    versions: bool = True,
    time_limit: int = LAMBDA_TIME_LIMIT_SECONDS,
) -> Schedule:
    """Check every field of ``spec``; return the parsed schedule. Raises ValidationError naming the field.

    ``versions=False`` leaves out the check that a pinned version is registered (an edit that does
    not touch the target or the payload of a job written earlier). The timeouts (the job's, an HTTP
    target's, a workflow node's) are checked against the pool's limit (``time_limit`` on ``lambda``
    and ``long``); a spec that names no pool is checked as :func:`with_pool` would choose it."""
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
    if spec.pool is None:
        spec = with_pool(spec, catalog, time_limit)
    pool = check_pool(spec.pool)
    check_timeout(spec.timeout_seconds, pool, time_limit)
    if is_chunked(spec.target, catalog):
        check_chunk_pool(pool)
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
    validate_target(spec.target, catalog, versions=versions, pool=pool, time_limit=time_limit)
    validate_deadline(spec.deadline_seconds)
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


def validate_target(
    target: Any,
    catalog: HandlerCatalog | None = None,
    *,
    versions: bool = True,
    pool: str = "lambda",
    time_limit: int = LAMBDA_TIME_LIMIT_SECONDS,
) -> None:
    """A target is ``{"handler": name}`` (registered in ``catalog``, and with ``"version": n`` that
    version too unless ``versions`` is False) or ``{"http": {url, method, headers, ...}}`` (its own
    ``timeout_seconds`` within ``pool``'s limit), or ``{"workflow": {"nodes": [...]}}`` (a DAG of such
    targets, each node on its own pool: :func:`jobsched.core.dag.parse_workflow`)."""
    if isinstance(target, dict) and set(target) == {"workflow"}:
        from jobsched.core.dag import parse_workflow  # dag validates its nodes' targets with this module

        def node_target(node_target: Any, node_pool: str) -> None:
            validate_target(node_target, catalog, versions=versions, pool=node_pool, time_limit=time_limit)

        parse_workflow(target["workflow"], node_target, time_limit=time_limit)
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
            raise ValidationError(
                "target.version must be an integer >= 1 (the handler version to pin)", field="target.version"
            )
        if catalog is not None and catalog.newest_version(name) is None:
            raise ValidationError(
                f"unknown handler {name!r}: register it with @job({name!r})", field="target"
            )
        if catalog is not None and versions and "version" in target:
            check_handler_version(name, version, catalog)
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
        check_timeout(http["timeout_seconds"], pool, time_limit, field="target.http.timeout_seconds")
