"""Schedules as code: create or update a job (or workflow) by its name (``PUT /jobs/by-name/{name}``,
``PUT /workflows/by-name/{name}``, ``jobsched apply``; docs/decisions/0060-schedules-as-code.md).

A declared name is unique per tenant: its *name item* in the Jobs table refers to one job id and is
written with a conditional put, so two ``PUT`` calls of a new name agree on one id, and the job is
created under that id with the job store's own conditional put: whichever call writes second finds
the job and compares against it. A ``PUT`` then:

- *creates* the job when the name refers to none (201);
- answers *unchanged* when the declared definition is the stored one, field by field, after the
  defaults and the pool are filled in as a create fills them: nothing is written, the version stays,
  the schedule's cursor is not touched, so no occurrence runs twice (200);
- *updates* otherwise, sending only the changed fields through :meth:`JobService.update` at the
  version it read: every rule of ``PATCH`` applies (a changed schedule starts from the edit, runs
  queued ahead are re-planned, a paused job stays paused) (200).

The definition is compared over every field of :class:`~jobsched.core.models.JobSpec`, so a field
added to jobs later is declared, compared and updated without a change here. A declaration is the
whole definition: a field left out takes its default (and so resets a value set by ``PATCH``).

A name that refers to no job: a claim younger than :data:`STALE_CLAIM` (longer than any API request
lives) belongs to a ``PUT`` still creating it (or one that died doing so), and the job is created
under that id; an older one is stale (the job was deleted, or renamed by ``PATCH``) and is replaced by
a claim of a new id, conditional on the old one. A name no item refers to adopts the tenant's one job
of that kind with that name created by ``POST`` (several: 409 naming them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from jobsched.aws.jobs_store import JobExistsError
from jobsched.core.dag import is_workflow_target
from jobsched.core.errors import (
    ConflictError,
    JobschedError,
    NotFoundError,
    PreconditionFailedError,
    ValidationError,
)
from jobsched.core.job_specs import (
    SPEC_FIELDS,
    CheckedSpec,
    check_contract,
    spec_from_dict,
    validate_spec,
    with_pool,
)
from jobsched.core.models import Job, JobSpec, require_aware
from jobsched.core.run_records import with_key
from jobsched.core.schedules import parse_schedule
from jobsched.services.jobs import JobService
from jobsched.services.workflow_service import job_definition

#: A name item older than this whose job is missing is stale: no API request lives this long (API
#: Gateway ends one after 30 s), so no ``PUT`` is still creating its job.
STALE_CLAIM = timedelta(seconds=60)
_ATTEMPTS = 4


class Outcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


class Slots(Protocol):
    """The tenant's job limit (:class:`jobsched.api.quotas.JobQuota`): a created job takes a slot."""

    def take(self, tenant: str) -> None: ...

    def give_back(self, tenant: str) -> None: ...


@dataclass(frozen=True)
class Declared:
    """What a ``PUT`` by name did (or, in a dry run, would do)."""

    name: str
    outcome: Outcome
    #: The definition fields an update changes (``nodes`` for a workflow's target); empty otherwise.
    changed: tuple[str, ...]
    #: The job as stored after the call; None in a dry run that would create it.
    job: Job | None


@dataclass(frozen=True)
class DeclaredName:
    name: str
    job: Job


class DeclaredService:
    def __init__(self, jobs: JobService, slots: Slots | None = None):
        self.jobs = jobs
        self.slots = slots

    def put(
        self,
        tenant: str,
        name: str,
        definition: Mapping[str, Any],
        now: datetime,
        *,
        workflow: bool = False,
        dry_run: bool = False,
    ) -> Declared:
        """Declare ``definition`` (a job's, or with ``workflow`` a workflow's, every field; ``name`` is
        the path's) under ``name``. With ``dry_run`` the definition is checked and the outcome worked
        out, and nothing is written."""
        require_aware(now, "now")
        data = dict(definition) | {"name": name}
        as_job = job_definition(data) if workflow else data
        _check_schedule(as_job)
        store = self.jobs.jobs
        for _ in range(_ATTEMPTS):
            ref = store.name_ref(tenant, name)
            if ref is None:
                adopted = self._adoptable(tenant, name, workflow)
                if adopted is not None:
                    if dry_run:
                        return self._dry_run(adopted, as_job, workflow)
                    if store.claim_name(tenant, name, adopted.id, now):
                        result = self._compare(tenant, adopted, as_job, now, workflow)
                        if result is not None:
                            return result
                    continue
                checked = self._checked(as_job, now)  # before the claim: a bad one writes nothing
                if dry_run:
                    return Declared(name, Outcome.CREATED, (), None)
                job_id = self.jobs.new_id()
                if store.claim_name(tenant, name, job_id, now):
                    created = self._create(tenant, job_id, checked, now)
                    if created is not None:
                        return created
                continue
            job_id, claimed_at = ref
            job = self._get(tenant, job_id)
            if job is not None and job.name == name:
                self._same_kind(job, name, workflow)
                if dry_run:
                    return self._dry_run(job, as_job, workflow)
                result = self._compare(tenant, job, as_job, now, workflow)
                if result is not None:
                    return result
                continue
            checked = self._checked(as_job, now)
            if dry_run:
                return Declared(name, Outcome.CREATED, (), None)
            if job is None and now - claimed_at < STALE_CLAIM:
                created = self._create(tenant, job_id, checked, now)  # a PUT in flight claimed it
            else:
                new_id = self.jobs.new_id()
                stale = store.claim_name(tenant, name, new_id, now, replacing=job_id)
                created = self._create(tenant, new_id, checked, now) if stale else None
            if created is not None:
                return created
        raise ConflictError(f"name {name!r} changed while it was being declared; send the request again")

    def names(self, tenant: str) -> list[DeclaredName]:
        """The tenant's declared names and their jobs, by name (a stale name item is left out)."""
        refs = self.jobs.jobs.declared_names(tenant)
        jobs = {j.id: j for j in self.jobs.jobs.get_many([(tenant, ref) for ref in refs.values()])}
        return [
            DeclaredName(name, jobs[ref])
            for name, ref in sorted(refs.items())
            if ref in jobs and jobs[ref].name == name
        ]

    # --- helpers -----------------------------------------------------------------------------------

    def _get(self, tenant: str, job_id: str) -> Job | None:
        try:
            return self.jobs.get(tenant, job_id)
        except NotFoundError:
            return None

    def _adoptable(self, tenant: str, name: str, workflow: bool) -> Job | None:
        """The tenant's one job of this kind named ``name`` that no name item refers to (created by
        ``POST``); 409 when there are several: the name cannot say which one it declares."""
        found = [j for j in self.jobs.jobs.named(tenant, name) if is_workflow_target(j.target) == workflow]
        if len(found) > 1:
            ids = ", ".join(sorted(j.id for j in found))
            raise ConflictError(
                f"{len(found)} {'workflows' if workflow else 'jobs'} are named {name!r} ({ids}): delete or "
                "rename all but one, then declare the name again"
            )
        return found[0] if found else None

    @staticmethod
    def _same_kind(job: Job, name: str, workflow: bool) -> None:
        if is_workflow_target(job.target) != workflow:
            kind, other = ("a job", "workflows") if workflow else ("a workflow", "jobs")
            raise ConflictError(
                f"name {name!r} is declared as {kind}; declare it under /{other}/by-name or use another name"
            )

    def _desired(self, as_job: Mapping[str, Any]) -> JobSpec:
        """The declared definition as the job service stores it: defaults and pool filled in."""
        return with_pool(spec_from_dict(as_job), self.jobs.catalog, self.jobs.time_limit)

    def _create(self, tenant: str, job_id: str, checked: CheckedSpec, now: datetime) -> Declared | None:
        """Create the job under ``job_id`` within the tenant's limit; None if a concurrent ``PUT``
        created it first (the caller reads it and compares). A create refused (the tenant's limit, a
        check at write time) releases the name again, so a refused ``PUT`` leaves nothing behind."""
        name = checked.spec.name
        if self.slots is not None:
            try:
                self.slots.take(tenant)
            except JobschedError:
                self.jobs.jobs.release_name(tenant, name, job_id)
                raise
        try:
            job = self.jobs.create(tenant, checked, now, job_id=job_id)
        except JobExistsError:
            if self.slots is not None:
                self.slots.give_back(tenant)
            return None
        except JobschedError:
            if self.slots is not None:
                self.slots.give_back(tenant)
            self.jobs.jobs.release_name(tenant, name, job_id)
            raise
        return Declared(job.name, Outcome.CREATED, (), job)

    def _plan(self, job: Job, as_job: Mapping[str, Any], workflow: bool) -> tuple[Declared, dict[str, Any]]:
        """What declaring ``as_job`` over ``job`` does, without writing: (unchanged or updated with
        the changed field names, the changes as ``PATCH`` takes them)."""
        desired = self._desired(as_job).spec_fields()
        changes = {k: v for k, v in desired.items() if _stored(job, k) != _stored_form(job, k, v)}
        if not changes:
            return Declared(job.name, Outcome.UNCHANGED, (), job), {}
        if "retry" in changes:
            changes["retry"] = changes["retry"].to_dict()
        changed = tuple(sorted("nodes" if workflow and k == "target" else k for k in changes))
        return Declared(job.name, Outcome.UPDATED, changed, job), changes

    def _checked(self, as_job: Mapping[str, Any], now: datetime) -> CheckedSpec:
        """A new job's definition checked as :meth:`JobService.create` checks it, notify included."""
        checked = self.jobs.check(as_job, now)
        self.jobs.notify_policy.check(checked.spec.notify)
        return checked

    def _dry_run(self, job: Job, as_job: Mapping[str, Any], workflow: bool) -> Declared:
        """What declaring ``as_job`` over ``job`` does, with the checks :meth:`JobService.update` makes
        of those changes (the payload contract and a draining pin only when the target or the payload
        changes, ``notify`` against the deployment's policy only when it changes)."""
        planned, changes = self._plan(job, as_job, workflow)
        if not changes:
            return planned
        spec = self._desired(as_job)
        contract = "target" in changes or "payload" in changes
        validate_spec(spec, self.jobs.catalog, versions=contract, time_limit=self.jobs.time_limit)
        if contract:
            check_contract(spec, self.jobs.catalog)
        if "target" in changes:
            self.jobs.check(spec)  # refuses a newly pinned draining version
        if "notify" in changes:
            self.jobs.notify_policy.check(spec.notify)
        return planned

    def _compare(
        self, tenant: str, job: Job, as_job: Mapping[str, Any], now: datetime, workflow: bool
    ) -> Declared | None:
        """Unchanged, or updated with the changed fields at the version read (None: the job changed
        meanwhile, the caller reads it again)."""
        planned, changes = self._plan(job, as_job, workflow)
        if not changes:
            return planned
        try:
            updated = self.jobs.update(tenant, job.id, changes, job.version, now)
        except (PreconditionFailedError, NotFoundError):
            return None
        return Declared(updated.name, Outcome.UPDATED, planned.changed, updated)


#: Limits whose key defaults to the job's id: a declaration naming that id (as ``GET`` shows it) is the
#: same limit as one leaving the key out.
_KEYED_LIMITS = ("concurrency", "rate_limit")


def _stored(job: Job, name: str) -> Any:
    return _stored_form(job, name, getattr(job, name))


def _stored_form(job: Job, name: str, value: Any) -> Any:
    """``value`` of field ``name`` as compared: a limit with its key filled in with the job's id."""
    return with_key(value, job.id) if name in _KEYED_LIMITS else value


def _check_schedule(as_job: Mapping[str, Any]) -> None:
    """Parse the declared schedule first, so its error names the job field (``schedule``, ``timezone``)
    rather than the part of the expression (``minute``) the parser names: a declaration's error is
    placed on the line of that field (``jobsched apply``)."""
    try:
        parse_schedule(
            str(as_job.get("schedule", "")),
            as_job.get("timezone", "UTC"),
            dst_gap=as_job.get("dst_gap", "shift"),
            dst_overlap=as_job.get("dst_overlap", "first"),
        )
    except ValidationError as error:
        if error.field not in SPEC_FIELDS:
            error.field = "schedule"
        raise
