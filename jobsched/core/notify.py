"""Who is told about a dead letter, and what they are told. Pure.

A job's ``notify`` (and a tenant's default, ``PUT /settings/notify``) is an object with one or both of

- ``sns_topic_arn``: ``arn:<partition>:sns:<region>:<12-digit account>:<topic name>`` — the deployment
  publishes there only if the ARN matches its ``notify_topic_arns`` allow-list (checked when the job
  or the default is written, see :func:`topic_allowed`);
- ``webhook``: an absolute ``http://`` or ``https://`` URL without embedded credentials, POSTed a JSON
  body (the SSRF guard of HTTP targets applies when it is called).

``{}`` (the default) names nobody: the tenant's default applies. A job's ``notify`` travels in the run's
message snapshot (:class:`jobsched.core.messages.RunMessage`), so the worker needs no job read.

A dead-letter notification (:func:`notification_of`) says which run of which job failed, why, after
how many attempts, and the API paths to read and to replay it. Its ``id`` (``<run id>@<dead-lettered
at>``) is the same on every delivery try of one dead letter and differs for a later dead letter of the
same run (a replay that failed again), so a receiver can deduplicate by it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from jobsched.core.errors import ValidationError

NOTIFY_FIELDS = ("sns_topic_arn", "webhook")
MAX_URL_LENGTH = 2048
#: SNS topic ARN: partition, region, 12-digit account, 1-256 name characters (``.fifo`` allowed).
TOPIC_ARN = re.compile(
    r"^arn:aws(?:-[a-z]+)*:sns:[a-z]{2}(?:-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,251}(?:\.fifo)?$"
)
NOTIFICATION_TYPE = "dead_letter"


def validate_notify(value: Any, field: str = "notify") -> dict[str, str]:
    """The normalized ``notify`` object; :class:`ValidationError` naming the field otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            f'{field} must be an object: {{"sns_topic_arn": "arn:aws:sns:..."}} and/or '
            '{"webhook": "https://..."}',
            field=field,
        )
    unknown = set(value) - set(NOTIFY_FIELDS)
    if unknown:
        raise ValidationError(
            f"unknown {field} fields: {', '.join(sorted(unknown))}; allowed: {', '.join(NOTIFY_FIELDS)}",
            field=f"{field}.{sorted(unknown)[0]}",
        )
    out: dict[str, str] = {}
    arn = value.get("sns_topic_arn")
    if arn is not None:
        if not isinstance(arn, str) or not TOPIC_ARN.match(arn):
            raise ValidationError(
                f"{field}.sns_topic_arn {arn!r} is not an SNS topic ARN "
                "(arn:aws:sns:<region>:<12-digit account>:<topic name>)",
                field=f"{field}.sns_topic_arn",
            )
        out["sns_topic_arn"] = arn
    url = value.get("webhook")
    if url is not None:
        out["webhook"] = _webhook_url(url, f"{field}.webhook")
    return out


def _webhook_url(url: Any, field: str) -> str:
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise ValidationError(f"{field} must be a URL of 1-{MAX_URL_LENGTH} characters", field=field)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a malformed port)
    except ValueError as exc:
        raise ValidationError(f"{field} {url!r} is not a valid URL: {exc}", field=field) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"{field} {url!r} must be an absolute http:// or https:// URL", field=field)
    if parts.username or parts.password:
        raise ValidationError(f"{field} must not embed credentials (user:password@)", field=field)
    return url


def topic_allowed(arn: str, patterns: Iterable[str]) -> bool:
    """Whether ``arn`` matches one of the deployment's allow-list patterns (IAM resource syntax:
    ``*`` any run of characters, ``?`` one character), the same patterns its IAM policy grants."""
    return any(_pattern(p).fullmatch(arn) for p in patterns if p)


def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


def notify_of_snapshot(message: str | None) -> dict[str, str]:
    """The job's ``notify`` kept in a dead letter's message snapshot (``{}`` when none or unreadable)."""
    if not message:
        return {}
    try:
        data = json.loads(message)
    except ValueError:
        return {}
    notify = data.get("notify") if isinstance(data, dict) else None
    return {k: v for k, v in notify.items() if k in NOTIFY_FIELDS} if isinstance(notify, dict) else {}


def notification_id(run_id: str, dead_lettered_at: str) -> str:
    """Same for every delivery try of one dead letter; new for a later dead letter of the run."""
    return f"{run_id}@{dead_lettered_at}"


def notification_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of the notification for a dead-lettered run item (its stored attributes)."""
    run_id = f"{item['job_id']}.{item['run_key']}"
    failed_at = str(item.get("dl_at", ""))
    return {
        "type": NOTIFICATION_TYPE,
        "id": notification_id(run_id, failed_at),
        "tenant": item.get("tenant"),
        "job_id": item["job_id"],
        "run_id": run_id,
        "reason": item.get("dl_reason"),
        "error": item.get("error"),
        "attempts": int(item.get("attempt", 0)),
        "failed_at": failed_at,
        "run": f"/runs/{run_id}",
        "replay": {"method": "POST", "path": f"/dead-letters/{run_id}/replay"},
    }


def subject_of(notification: Mapping[str, Any]) -> str:
    """An SNS subject (ASCII, at most 100 characters) for an e-mail subscriber."""
    text = f"jobsched: run of job {notification['job_id']} dead-lettered ({notification.get('reason')})"
    return text.encode("ascii", "replace").decode()[:100]
