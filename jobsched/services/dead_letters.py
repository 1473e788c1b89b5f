"""Dead letters: failed runs kept with payload, error and attempt history; list, replay, discard.

A run enters the dead letters when it fails for good (permanent error, attempts used up, a lost
worker with no attempts left, a poison message). Its item then carries the sparse
``dead_letter_index`` keys (``dl_tenant``, ``dl_at``) plus ``dl_reason`` and ``dl_message`` (the
delivery: target, payload, timeout, retry), so listing is a Query on that index and a replay needs
no job read. Replay and discard take the run out of the index; every replay and discard is appended
to the run's ``replays`` history, so the run shows what was done to it and when.

A run being replayed keeps its index keys until its message is sent (``replay_pending_at`` set, see
:mod:`jobsched.services.runs`); it is no dead letter any more: listings skip it (filling the page from the
following items, :func:`jobsched.core.paging.filtered_page`), and a replay or discard of it
answers 404.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobsched.aws.attempts import NOTIFIED, NOTIFY_PENDING, NOTIFY_STATE, REPLAY_PENDING
from jobsched.aws.metering import ConditionFailed
from jobsched.aws.runs_store import DEAD_LETTER_INDEX
from jobsched.core.errors import ConflictError, NotFoundError, ValidationError
from jobsched.core.models import Run, to_iso
from jobsched.core.paging import filtered_page
from jobsched.services.runs import RunService

MAX_PAGE = 100
MAX_BULK = 1000


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters a list or a bulk replay covers (all optional, combined with AND)."""

    job_id: str | None = None
    reason: str | None = None  # permanent | exhausted | lease_expired | poison | stranded | lost
    error_contains: str | None = None
    since: datetime | None = None  # failed at or after
    until: datetime | None = None  # failed before


def dead_letter_view(item: dict[str, Any]) -> dict[str, Any]:
    """The JSON shape of one dead letter: the run's identity, why and when it failed, its attempts,
    and the payload/target it failed with."""
    run = Run.from_item(item)
    message = json.loads(item["dl_message"]) if item.get("dl_message") else {}
    return {
        "run_id": run.id,
        "job_id": run.job_id,
        "tenant": run.tenant,
        "scheduled_at": to_iso(run.scheduled_at),
        "failed_at": item.get("dl_at"),
        "reason": item.get("dl_reason"),
        "error": run.error,
        "attempt": run.attempt,
        "attempts": [a.to_dict() for a in run.attempts],
        "payload": run.payload_override if run.payload_override is not None else message.get("payload"),
        "target": message.get("target"),
        "replays": run.replays,
        "notification": notification_view(item),
    }


def notification_view(item: dict[str, Any]) -> dict[str, Any]:
    """Where the dead letter's notification stands: ``pending`` (owed, not delivered yet),
    ``retrying`` (a try failed; the sweeper tries again), ``sent``, ``failed`` (given up) or ``none``
    (neither the job nor the tenant names anyone), with the destinations and the last error."""
    notified = item.get(NOTIFIED) or {}
    state = notified.get("state") or ("pending" if NOTIFY_PENDING in item else "none")
    view: dict[str, Any] = {"state": state}
    for key in ("to", "sent", "at", "error"):
        if notified.get(key) not in (None, []):
            view[key] = notified[key]
    if notified.get("tries") is not None:
        view["tries"] = int(notified["tries"])
    return view


def _index_key(item: dict[str, Any]) -> dict[str, Any]:
    """The ``dead_letter_index`` key of an item (what DynamoDB returns as ``LastEvaluatedKey``)."""
    return {k: item[k] for k in ("dl_tenant", "dl_at", "job_id", "run_key")}


def encode_cursor(key: dict[str, Any] | None) -> str | None:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode() if key else None


def decode_cursor(cursor: str | None) -> dict[str, Any] | None:
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError as exc:
        raise ValidationError("invalid cursor", field="cursor") from exc
    if not isinstance(key, dict):
        raise ValidationError("invalid cursor", field="cursor")
    return key


class DeadLetterService:
    """List, inspect, replay and discard a tenant's dead letters."""

    def __init__(self, run_service: RunService):
        self.service = run_service
        self.dynamo = run_service.runs.dynamo
        self.table = run_service.runs.table

    def list(
        self, tenant: str, *, flt: DeadLetterFilter | None = None, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of dead letters, newest first, and the cursor of the next page (None at the end).
        A filtered page may hold fewer than ``limit`` items while more follow."""
        flt = flt or DeadLetterFilter()
        limit = max(1, min(limit, MAX_PAGE))
        condition, values = "dl_tenant = :t", {":t": tenant}
        if flt.since and flt.until:
            condition += " AND dl_at BETWEEN :since AND :until"
            values |= {":since": to_iso(flt.since), ":until": to_iso(flt.until)}
        elif flt.since:
            condition += " AND dl_at >= :since"
            values[":since"] = to_iso(flt.since)
        elif flt.until:
            condition += " AND dl_at < :until"
            values[":until"] = to_iso(flt.until)
        filters, names = [], {}
        if flt.job_id:
            filters.append("job_id = :job")
            values[":job"] = flt.job_id
        if flt.reason:
            filters.append("dl_reason = :reason")
            values[":reason"] = flt.reason
        if flt.error_contains:
            filters.append("contains(#error, :needle)")
            values[":needle"] = flt.error_contains
            names["#error"] = "error"

        def fetch(n: int, after: dict[str, Any] | None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
            return self.dynamo.query(
                self.table,
                condition,
                values,
                names=names or None,
                index=DEAD_LETTER_INDEX,
                limit=n,
                forward=False,
                start_key=after,
                filter_expression=" AND ".join(filters) or None,
            )

        items, last = filtered_page(
            fetch,  # page keys here are index keys (dicts), not strings
            _index_key,
            lambda item: REPLAY_PENDING not in item,
            limit=limit,
            start_after=decode_cursor(cursor),
        )
        return [dead_letter_view(i) for i in items], encode_cursor(last)

    def get(self, tenant: str, run_id: str) -> dict[str, Any]:
        item = self._dead_item(tenant, run_id)
        return dead_letter_view(item)

    def replay(self, tenant: str, run_id: str, now: datetime, payload: dict[str, Any] | None = None) -> Run:
        """Queue the dead letter's run again (optionally with a corrected payload); recorded on the run."""
        self._dead_item(tenant, run_id)
        return self.service.replay(tenant, run_id, now, payload=payload, action="replay")

    def discard(self, tenant: str, run_id: str, now: datetime) -> Run:
        """Take the run out of the dead letters for good (it stays ``failed`` in the history)."""
        item = self._dead_item(tenant, run_id)
        record = {"action": "discard", "at": to_iso(now), "from_attempt": item.get("attempt", 0)}
        try:
            updated = self.dynamo.update(
                self.table,
                {"job_id": item["job_id"], "run_key": item["run_key"]},
                "SET discarded_at = :now, replays = list_append(if_not_exists(replays, :empty), :record) "
                "REMOVE dl_tenant, dl_at, dl_message, " + ", ".join([NOTIFY_PENDING, *NOTIFY_STATE]),
                condition="#state = :failed AND dl_at = :dl_at",
                names={"#state": "state"},
                values={
                    ":now": to_iso(now),
                    ":empty": [],
                    ":record": [record],
                    ":failed": "failed",
                    ":dl_at": item["dl_at"],
                },
            )
        except ConditionFailed:
            raise ConflictError(f"dead letter {run_id} changed meanwhile; read it and try again") from None
        return Run.from_item(updated)

    def replay_matching(
        self, tenant: str, now: datetime, flt: DeadLetterFilter | None = None, *, max_runs: int = MAX_BULK
    ) -> dict[str, Any]:
        """Replay every dead letter matching ``flt`` (at most ``max_runs``); a run that cannot be
        replayed (changed meanwhile) is reported, not fatal."""
        # A tenant over its monthly budget: refused before anything is replayed (409 budget_exhausted).
        self.service.refuse_if_capped(tenant, now, "replay of dead letters")
        replayed: list[str] = []
        errors: list[dict[str, str]] = []
        cursor: str | None = None
        while len(replayed) + len(errors) < max_runs:
            page, cursor = self.list(tenant, flt=flt, limit=MAX_PAGE, cursor=cursor)
            for view in page:
                if len(replayed) + len(errors) >= max_runs:
                    break
                try:
                    self.service.replay(tenant, view["run_id"], now, action="replay")
                    replayed.append(view["run_id"])
                except (ConflictError, NotFoundError) as exc:
                    errors.append({"run_id": view["run_id"], "error": exc.message})
            if cursor is None:
                break
        return {"replayed": len(replayed), "run_ids": replayed, "errors": errors, "more": cursor is not None}

    def _dead_item(self, tenant: str, run_id: str) -> dict[str, Any]:
        item = self.service.attempts.get_item(run_id)
        if item is None or item.get("tenant") != tenant or "dl_at" not in item or REPLAY_PENDING in item:
            raise NotFoundError(f"dead letter {run_id} not found")
        return item
