"""Storage and transport of dead-letter notifications: the tenant's default in the Leases table, the
outbox writes on the run item, and SNS publishing (metered).

Outbox (attributes of the run item, names in :mod:`jobsched.aws.attempts`): a dead letter sets
``notify_pending`` = its ``dl_at``. A sender *claims* it with a conditional write (``notify_pending``
unchanged and no live ``notify_lease``), which sets the lease and counts the try; it sends, then
*settles* it (removes ``notify_pending`` and the lease, records ``notified``), conditional on its own
lease. Two senders therefore never send the same dead letter's notification at once, and a sender
that dies leaves the mark for the sweeper once its lease has expired.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.attempts import NOTIFIED, NOTIFY_LEASE, NOTIFY_PENDING, NOTIFY_TRIES
from jobsched.aws.errors import aws_call
from jobsched.aws.metering import ConditionFailed, Meter
from jobsched.core.models import to_iso
from jobsched.core.usage import sns_publish_requests
from jobsched.ports.tables import Table

#: Leases-table key prefix of a tenant's settings item (``tenant-settings#<tenant>``).
SETTINGS_PREFIX = "tenant-settings#"


class TenantSettingsStore:
    """A tenant's settings (today: its default ``notify``), one item in the Leases table."""

    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table

    def _key(self, tenant: str) -> dict[str, str]:
        return {"lease_key": SETTINGS_PREFIX + tenant}

    def get_notify(self, tenant: str) -> dict[str, str]:
        """The tenant's default ``notify`` (``{}`` when none was set)."""
        item = self.dynamo.get(self.table, self._key(tenant))
        notify = (item or {}).get("notify")
        return dict(notify) if isinstance(notify, dict) else {}

    def put_notify(self, tenant: str, notify: Mapping[str, str], now: datetime) -> dict[str, str]:
        """Replace the tenant's default ``notify`` (``{}`` removes it); returns what is stored."""
        if notify:
            self.dynamo.update(
                self.table,
                self._key(tenant),
                "SET notify = :n, tenant = :t, updated_at = :now",
                values={":n": dict(notify), ":t": tenant, ":now": to_iso(now)},
            )
        else:
            self.dynamo.update(
                self.table,
                self._key(tenant),
                "SET tenant = :t, updated_at = :now REMOVE notify",
                values={":t": tenant, ":now": to_iso(now)},
            )
        return dict(notify)


class NotifyOutbox:
    """The conditional claim and settle writes on a dead-lettered run item (Runs table)."""

    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table

    @staticmethod
    def _key(item: Mapping[str, Any]) -> dict[str, Any]:
        return {"job_id": item["job_id"], "run_key": item["run_key"]}

    def claim(self, item: Mapping[str, Any], now: datetime, lease_seconds: float) -> dict[str, Any] | None:
        """Take the item's pending notification for ``lease_seconds``: the item as written, or None when
        it is no longer pending with that mark, or another sender's lease is live."""
        try:
            return self.dynamo.update(
                self.table,
                self._key(item),
                f"SET {NOTIFY_LEASE} = :lease, {NOTIFY_TRIES} = if_not_exists({NOTIFY_TRIES}, :zero) + :one",
                condition=f"{NOTIFY_PENDING} = :p AND (attribute_not_exists({NOTIFY_LEASE}) "
                f"OR {NOTIFY_LEASE} < :now)",
                values={
                    ":p": item[NOTIFY_PENDING],
                    ":now": to_iso(now),
                    ":lease": to_iso(now + timedelta(seconds=lease_seconds)),
                    ":zero": 0,
                    ":one": 1,
                },
            )
        except ConditionFailed:
            return None

    def settle(self, item: Mapping[str, Any], outcome: Mapping[str, Any]) -> bool:
        """Done with the claimed notification (sent, given up, or nobody to tell): remove the mark and
        the lease, record ``outcome``; conditional on the claim's own lease. False if it was lost."""
        condition = f"{NOTIFY_PENDING} = :p"
        values: dict[str, Any] = {":p": item[NOTIFY_PENDING], ":outcome": dict(outcome)}
        if NOTIFY_LEASE in item:
            condition += f" AND {NOTIFY_LEASE} = :lease"
            values[":lease"] = item[NOTIFY_LEASE]
        try:
            self.dynamo.update(
                self.table,
                self._key(item),
                f"SET {NOTIFIED} = :outcome REMOVE {NOTIFY_PENDING}, {NOTIFY_LEASE}",
                condition=condition,
                values=values,
            )
        except ConditionFailed:
            return False
        return True

    def release(self, item: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        """A try that failed and will be retried: keep the mark, drop the lease, record ``outcome``
        (its error, and the destinations already reached, which a later try skips)."""
        try:
            self.dynamo.update(
                self.table,
                self._key(item),
                f"SET {NOTIFIED} = :outcome REMOVE {NOTIFY_LEASE}",
                condition=f"{NOTIFY_PENDING} = :p AND {NOTIFY_LEASE} = :lease",
                values={
                    ":p": item[NOTIFY_PENDING],
                    ":lease": item[NOTIFY_LEASE],
                    ":outcome": dict(outcome),
                },
            )
        except ConditionFailed:
            pass


class Publisher:
    """SNS ``Publish`` of one notification (client injected, calls metered as ``sns.Publish``); a
    publish that succeeded is counted for the notification's tenant as ``sns_publishes`` (one per
    started 64 KB of the message, subject and attributes, as SNS bills it; decision 0059 amended)."""

    def __init__(self, sns: Any, meter: Meter | None = None):
        self.sns = sns
        self.meter = meter

    def publish(self, topic_arn: str, body: Mapping[str, Any], subject: str) -> str:
        """Publish ``body`` as JSON; a FIFO topic gets the tenant as message group and a deduplication id
        derived from the notification id. Returns the SNS message id."""
        message = json.dumps(body, separators=(",", ":"), default=str)
        kwargs: dict[str, Any] = {
            "TopicArn": topic_arn,
            "Message": message,
            "Subject": subject,
            "MessageAttributes": {
                key: {"DataType": "String", "StringValue": str(body[key])}
                for key in ("type", "tenant", "job_id", "reason")
                if body.get(key)
            },
        }
        if topic_arn.endswith(".fifo"):
            kwargs["MessageGroupId"] = str(body.get("tenant") or "jobsched")
            kwargs["MessageDeduplicationId"] = hashlib.sha256(str(body["id"]).encode()).hexdigest()
        try:
            response = aws_call(self.sns.publish, **kwargs)
        finally:
            if self.meter is not None:
                self.meter.record_request("sns", "Publish")
        if self.meter is not None:
            tenant = body.get("tenant")
            self.meter.record_billed(
                "sns_publishes",
                sns_publish_requests(_published_bytes(message, subject, kwargs["MessageAttributes"])),
                tenant=str(tenant) if tenant else None,
            )
        return str(response.get("MessageId", ""))


def _published_bytes(message: str, subject: str, attributes: Mapping[str, Any]) -> int:
    """The bytes SNS bills a publish by: the message, the subject and the attributes' names, types
    and values."""
    size = len(message.encode()) + len(subject.encode())
    for name, value in attributes.items():
        size += len(name.encode()) + len(value["DataType"].encode()) + len(str(value["StringValue"]).encode())
    return size
