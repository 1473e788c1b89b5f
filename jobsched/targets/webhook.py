"""HTTP webhook targets: one request per attempt, classified into success, retryable or permanent.

The request carries ``Idempotency-Key: <run id>`` (the same on every attempt of a run, so the receiver
can deduplicate) and ``X-Jobsched-Attempt``. 2xx is success; 429, 5xx, timeouts and connection
errors are retryable; any other status (other 4xx, and 3xx since redirects are not followed) is
permanent. The host is resolved and checked by :mod:`jobsched.targets.ssrf`, and the connection goes
to the checked address with the original name for the Host header, TLS SNI and certificate check.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urlsplit

import urllib3

from jobsched.core.errors import PermanentError, RetryableError, TimeoutExceeded, ValidationError
from jobsched.core.pools import MAX_CONTAINER_TIMEOUT_SECONDS
from jobsched.targets.ssrf import Resolver, resolve_checked

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
MAX_RESPONSE_BYTES = 1024 * 1024
#: The longest call the worker makes: the container pool's limit. The API checks a target's timeout
#: against its job's pool (:func:`jobsched.core.pools.check_timeout`: Lambda's limit on lambda and long).
MAX_TIMEOUT_SECONDS = float(MAX_CONTAINER_TIMEOUT_SECONDS)
USER_AGENT = "jobsched-webhook/1"


@dataclass(frozen=True)
class WebhookTarget:
    """A job's HTTP target: ``{"http": {"url", "method", "headers", "body", "timeout_seconds"}}``."""

    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    timeout_seconds: float = 30.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WebhookTarget:
        """Validate and build a target; :class:`ValidationError` names the bad field."""
        url = data.get("url")
        if not isinstance(url, str) or not url:
            _invalid("url", "is required")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            _invalid("url", f"{url!r} must be an absolute http:// or https:// URL")
        if parts.username or parts.password:
            _invalid("url", "must not embed credentials; send them in headers")
        method = str(data.get("method", "POST")).upper()
        if method not in METHODS:
            _invalid("method", f"{method!r} is not one of {', '.join(METHODS)}")
        headers = data.get("headers") or {}
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            _invalid("headers", "must map strings to strings")
        timeout = data.get("timeout_seconds", 30)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            _invalid("timeout_seconds", "must be a number")
        if not 0 < timeout <= MAX_TIMEOUT_SECONDS:
            _invalid("timeout_seconds", f"must be in (0, {MAX_TIMEOUT_SECONDS:g}]")
        body = data.get("body")
        return cls(url=url, method=method, headers=dict(headers), body=body, timeout_seconds=float(timeout))


def _invalid(name: str, problem: str) -> NoReturn:
    raise ValidationError(f"target.http.{name} {problem}", field=f"target.http.{name}")


def call_webhook(
    target: WebhookTarget,
    *,
    run_id: str,
    attempt: int,
    envelope: Mapping[str, Any],
    allowed_hosts: Iterable[str] = (),
    timeout_seconds: float | None = None,
    resolver: Resolver | None = None,
) -> dict[str, Any]:
    """Send the request once and return ``{"status": int, "body": <JSON or text>}`` on 2xx.

    ``envelope`` (run id, job id, attempt, scheduled instant, payload) is sent as the JSON body when the
    target defines no body of its own. ``timeout_seconds`` (the attempt's remaining time) caps the
    target's own timeout. Raises :class:`RetryableError`/:class:`TimeoutExceeded` or
    :class:`PermanentError` as described in the module docstring.
    """
    parts = urlsplit(target.url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    kwargs = {"resolver": resolver} if resolver else {}
    address = resolve_checked(host, port, allowed_hosts, **kwargs)[0]

    body, content_type = _encode_body(target.body if target.body is not None else envelope)
    headers = {"User-Agent": USER_AGENT, "Content-Type": content_type, **dict(target.headers)}
    headers["Host"] = parts.netloc.rsplit("@", 1)[-1]
    headers["Idempotency-Key"] = run_id
    headers["X-Jobsched-Attempt"] = str(attempt)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    limit = min(target.timeout_seconds, timeout_seconds) if timeout_seconds else target.timeout_seconds
    timeout = urllib3.Timeout(connect=min(limit, 10.0), read=limit)
    pool_kwargs: dict[str, Any] = {"timeout": timeout, "retries": False, "maxsize": 1}
    pool: urllib3.HTTPConnectionPool
    if parts.scheme == "https":
        tls: dict[str, Any] = {"server_hostname": host, "assert_hostname": host, "cert_reqs": "CERT_REQUIRED"}
        pool = urllib3.HTTPSConnectionPool(address, port, **tls, **pool_kwargs)
    else:
        pool = urllib3.HTTPConnectionPool(address, port, **pool_kwargs)
    try:
        response = pool.urlopen(
            target.method,
            path,
            body=None if target.method == "GET" else body,
            headers=headers,
            redirect=False,
            retries=False,
            assert_same_host=False,
            preload_content=False,
        )
        raw = response.read(MAX_RESPONSE_BYTES + 1, decode_content=True)
        response.release_conn()
    except urllib3.exceptions.TimeoutError as exc:
        raise TimeoutExceeded(f"webhook {target.method} {target.url} timed out after {limit:g}s") from exc
    except urllib3.exceptions.HTTPError as exc:
        raise RetryableError(f"webhook {target.method} {target.url} failed: {exc}") from exc
    finally:
        pool.close()
    return _classify(target, response.status, raw)


def _encode_body(body: Any) -> tuple[bytes, str]:
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), "text/plain; charset=utf-8"
    return json.dumps(body, separators=(",", ":"), default=str).encode(), "application/json"


def _classify(target: WebhookTarget, status: int, raw: bytes) -> dict[str, Any]:
    text = raw[:MAX_RESPONSE_BYTES].decode("utf-8", errors="replace")
    snippet = text[:300]
    if 200 <= status < 300:
        try:
            parsed: Any = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return {"status": status, "body": parsed}
    message = f"webhook {target.method} {target.url} answered {status}: {snippet}"
    if status == 429 or status >= 500:
        raise RetryableError(message)
    raise PermanentError(message)
