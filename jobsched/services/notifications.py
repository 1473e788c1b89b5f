"""Dead letters alert the owning team: one notification per dead letter, to the job's ``notify`` or
the tenant's default (docs/decisions/0015-dead-letter-notifications.md). Missed deadlines take the
same path: the sweeper's deadline marker carries the same outbox mark (decision 0058,
:mod:`jobsched.services.deadlines`) and gets a ``deadline_missed`` body; so does a tenant's 80 %
budget warning (decision 0062, :mod:`jobsched.services.budgets`), a ``budget_warning`` body.

The dead-letter write itself sets the outbox mark ``notify_pending`` (:mod:`jobsched.aws.attempts`),
so a notification is owed the instant the run is failed, in the same conditional write: nothing can
dead-letter a run without owing its notification, and a redelivered failure or a second path that
finds the run already failed writes no second mark. :meth:`DeadLetterNotifier.deliver` pays it:

1. claim the mark (a conditional write: the mark unchanged, no live lease of another sender);
2. find who to tell: the job's ``notify`` from the dead letter's message snapshot, else the tenant's
   default (one read of the Leases table), else nobody (the mark is settled ``none``);
3. publish to the SNS topic and/or POST the webhook (SSRF-guarded like HTTP targets, with the
   notification id as ``Idempotency-Key``);
4. settle: remove the mark and record ``notified`` (``sent``, ``failed`` or ``none``), conditional on
   the claim. A retryable failure releases the claim with the error and keeps the mark (a destination
   already reached is not sent again); after :data:`MAX_TRIES` tries it is settled ``failed``.

The worker and the chunk runner deliver right after their dead-letter write (the store's listener);
the sweeper delivers every mark older than its grace (a sender that died, a failed try, the DLQ
consumer's poison dead letters, its own). A sender that dies between the send and the settle makes
the sweeper send again: receivers deduplicate by the notification ``id``.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from jobsched.aws.attempts import NOTIFIED, NOTIFY_PENDING, NOTIFY_TRIES
from jobsched.aws.errors import AwsRefused, AwsUnreachable
from jobsched.aws.notify_store import TenantSettingsStore
from jobsched.core.budgets import BUDGET_NOTIFICATION, budget_notification_of, budget_subject
from jobsched.core.budgets import MARKER_PREFIX as BUDGET_MARKER_PREFIX
from jobsched.core.deadlines import MARKER_PREFIX, deadline_notification_of, deadline_subject
from jobsched.core.errors import PermanentError, ValidationError
from jobsched.core.models import to_iso
from jobsched.core.notify import (
    NOTIFICATION_TYPE,
    notification_of,
    notify_of_snapshot,
    subject_of,
    topic_allowed,
    validate_notify,
)
from jobsched.core.retry import PERMANENT, classify_error
from jobsched.ports.stores import NotificationOutbox, NotificationPublisher
from jobsched.runtime import observability as obs
from jobsched.targets.ssrf import Resolver, forbidden_reason
from jobsched.targets.webhook import WebhookTarget, call_webhook

logger = logging.getLogger(__name__)

#: Tries of one notification before it is given up (the sweeper retries every sweep).
MAX_TRIES = 5
#: How long a sender holds a claimed notification before another may take it over.
CLAIM_SECONDS = 60.0
#: A webhook notification's request timeout.
WEBHOOK_TIMEOUT_SECONDS = 10.0
#: SNS error codes that no retry can fix.
PERMANENT_SNS_CODES = frozenset(
    {"NotFound", "InvalidParameter", "InvalidParameterValue", "AuthorizationError", "InvalidSecurity"}
)


class NotifyPolicy:
    """What this deployment lets a tenant name: SNS topics matching its ``notify_topic_arns``
    allow-list, and webhooks whose host is not, literally, an address or name the SSRF guard refuses
    (a host name is resolved and checked again when it is called)."""

    def __init__(self, topic_patterns: Iterable[str] = (), allowed_hosts: Iterable[str] = ()):
        self.topic_patterns = tuple(p for p in topic_patterns if p)
        self.allowed_hosts = frozenset(h.lower().rstrip(".") for h in allowed_hosts)

    def check(self, value: Any, field: str = "notify") -> dict[str, str]:
        """The normalized ``notify``; :class:`ValidationError` (a 4xx) naming what to fix."""
        notify = validate_notify(value, field)
        arn = notify.get("sns_topic_arn")
        if arn is not None and not topic_allowed(arn, self.topic_patterns):
            allowed = ", ".join(self.topic_patterns) or "none (notify_topic_arns is empty)"
            raise ValidationError(
                f"{field}.sns_topic_arn {arn} is not a topic this deployment may publish to; "
                f"allowed: {allowed}. Ask the operator to add it to notify_topic_arns.",
                field=f"{field}.sns_topic_arn",
            )
        url = notify.get("webhook")
        if url is not None:
            self._check_host(url, f"{field}.webhook")
        return notify

    def _check_host(self, url: str, field: str) -> None:
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
        if host in self.allowed_hosts:
            return
        if host == "localhost" or host.endswith(".localhost"):
            reason: str | None = "a loopback name"
        else:
            try:
                reason = forbidden_reason(str(ipaddress.ip_address(host)))
            except ValueError:  # a host name: checked when it is resolved, at send time
                reason = None
        if reason:
            raise ValidationError(
                f"{field} host {host} is {reason}; webhooks may not reach it unless the deployment "
                "allows the host by name",
                field=field,
            )


class TenantNotifySettings:
    """``GET``/``PUT /settings/notify``: the tenant's default recipients of dead-letter notifications."""

    def __init__(self, store: TenantSettingsStore, policy: NotifyPolicy):
        self.store = store
        self.policy = policy

    def get(self, tenant: str) -> dict[str, str]:
        return self.store.get_notify(tenant)

    def put(self, tenant: str, value: Any, now: datetime) -> dict[str, str]:
        """Validate and replace the default (``{}`` removes it)."""
        return self.store.put_notify(tenant, self.policy.check(value), now)


class DeadLetterNotifier:
    """Delivers the notification a dead letter owes (see the module docstring). Injected: the outbox
    and settings stores, the SNS publisher, the deployment's policy, metrics."""

    def __init__(
        self,
        *,
        outbox: NotificationOutbox,
        settings: TenantSettingsStore,
        publisher: NotificationPublisher,
        policy: NotifyPolicy,
        metrics: obs.MetricSink | None = None,
        claim_seconds: float = CLAIM_SECONDS,
        max_tries: int = MAX_TRIES,
        resolver: Resolver | None = None,
    ):
        self.outbox = outbox
        self.settings = settings
        self.publisher = publisher
        self.policy = policy
        self.metrics = metrics or obs.NullSink()
        self.claim_seconds = claim_seconds
        self.max_tries = max_tries
        self.resolver = resolver

    def deliver(self, item: Mapping[str, Any], now: datetime) -> str:
        """Pay the item's pending notification: ``sent``, ``failed``, ``none`` (nobody to tell),
        ``retrying`` (kept for a later try) or ``skipped`` (not pending, or another sender holds it)."""
        if NOTIFY_PENDING not in item:
            return "skipped"
        claimed = self.outbox.claim(item, now, self.claim_seconds)
        if claimed is None:
            return "skipped"
        notify = notify_of_snapshot(claimed.get("dl_message")) or self.settings.get_notify(claimed["tenant"])
        tries = int(claimed.get(NOTIFY_TRIES, 1))
        if not notify:
            self.outbox.settle(claimed, {"state": "none", "at": to_iso(now)})
            return "none"
        previous = claimed.get(NOTIFIED) or {}
        sent = [str(d) for d in previous.get("sent", [])]
        body = _body_of(claimed)
        errors: dict[str, str] = {}
        retry = False
        for destination in ("sns_topic_arn", "webhook"):
            if destination not in notify or destination in sent:
                continue
            try:
                self._send(destination, notify[destination], body, tries)
            except Exception as exc:  # classified: permanent ones are given up, others retried
                errors[destination] = f"{type(exc).__name__}: {exc}"[:1000]
                retry = retry or not _permanent(exc)
                logger.warning("notification %s to %s failed: %s", body["id"], destination, exc)
                continue
            sent.append(destination)
            self.metrics.add(obs.NOTIFICATIONS_SENT)
        outcome: dict[str, Any] = {"to": sorted(notify), "sent": sent, "tries": tries, "at": to_iso(now)}
        if errors:
            outcome["error"] = "; ".join(f"{d}: {e}" for d, e in errors.items())
        if retry and tries < self.max_tries:
            self.outbox.release(claimed, {**outcome, "state": "retrying"})
            return "retrying"
        state = "failed" if errors else "sent"
        if errors:
            self.metrics.add(obs.NOTIFICATIONS_FAILED)
            logger.error("notification %s given up after %s tries: %s", body["id"], tries, outcome["error"])
        self.outbox.settle(claimed, {**outcome, "state": state})
        return state

    def on_dead_letter(self, item: dict[str, Any], now: datetime) -> None:
        """The :class:`~jobsched.aws.attempts.AttemptStore` listener: deliver at once."""
        self.deliver(item, now)

    def _send(self, destination: str, address: str, body: Mapping[str, Any], tries: int) -> None:
        if destination == "sns_topic_arn":
            if not topic_allowed(address, self.policy.topic_patterns):
                raise PermanentError(f"topic {address} is no longer in this deployment's notify_topic_arns")
            subject = _subject_of(body)
            self.publisher.publish(address, body, subject)
            return
        target = WebhookTarget(
            url=address,
            method="POST",
            headers={"X-Jobsched-Event": str(body["type"])},
            timeout_seconds=WEBHOOK_TIMEOUT_SECONDS,
        )
        call_webhook(
            target,
            run_id=str(body["id"]),
            attempt=tries,
            envelope=body,
            allowed_hosts=self.policy.allowed_hosts,
            resolver=self.resolver,
        )


def _body_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """A dead letter's notification, a missed deadline's for a deadline marker (decision 0058), or
    the 80 % budget warning's for a budget marker (decision 0062)."""
    if str(item["job_id"]).startswith(MARKER_PREFIX):
        return deadline_notification_of(item)
    if str(item["job_id"]).startswith(BUDGET_MARKER_PREFIX):
        return budget_notification_of(dict(item))
    return notification_of(item)


def _subject_of(body: Mapping[str, Any]) -> str:
    if body["type"] == NOTIFICATION_TYPE:
        return subject_of(body)
    if body["type"] == BUDGET_NOTIFICATION:
        return budget_subject(dict(body))
    return deadline_subject(body)


def _permanent(exc: BaseException) -> bool:
    if isinstance(exc, AwsRefused):
        return exc.code in PERMANENT_SNS_CODES
    if isinstance(exc, AwsUnreachable):
        return False
    return classify_error(exc) == PERMANENT
