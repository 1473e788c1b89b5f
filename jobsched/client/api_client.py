"""The HTTP client of the jobsched API (:mod:`jobsched.client` re-exports it).

It speaks the API contract (docs/api.md): JSON in and out, lists as ``{"items", "next_cursor"}``,
errors as ``{"error", "message"}``. Two ways to authenticate:

* a bearer token (the embedded mode, ``jobsched dev``): ``Authorization: Bearer <token>``;
* AWS SigV4 (a deployed API behind API Gateway IAM auth): each request is signed with botocore's
  ``SigV4Auth`` for the ``execute-api`` service, with credentials from the standard AWS chain
  (environment, shared config/profile, SSO, instance role...).

Configuration precedence is explicit argument > environment variable > default, as in Powertools:
``JOBSCHED_URL`` (default ``http://127.0.0.1:8080``) and ``JOBSCHED_TOKEN``. Stdlib ``urllib`` only:
no dependency beyond botocore, which boto3 already brings.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from jobsched.core.errors import JobschedError

ENV_URL = "JOBSCHED_URL"
ENV_TOKEN = "JOBSCHED_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_SECONDS = 30.0
SIGV4_SERVICE = "execute-api"

# https://{api-id}.execute-api.{region}.amazonaws.com[.cn]
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


class ApiError(JobschedError):
    """Raised when the API answers with an error status, or cannot be reached at all.

    ``status`` is the HTTP status (0 when no response arrived), ``code`` the API's error code
    (``not_found``, ``validation_error``...; ``connection_error`` when unreachable, ``http_<status>``
    when the body was not the API's error shape), ``message`` what to fix."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code


def region_from_host(host: str) -> str | None:
    """The AWS region of an API Gateway ``execute-api`` host name, or None for any other host."""
    match = _EXECUTE_API_HOST.match(host.lower())
    return match.group(1) if match else None


class SigV4Signer:
    """Signs requests for API Gateway IAM auth with botocore's SigV4 implementation.

    Credentials are resolved once, lazily, from botocore's standard chain; frozen credentials are
    read on every request so refreshable ones (SSO, assumed roles) stay valid."""

    def __init__(self, region: str, *, profile: str | None = None, credentials: Any = None):
        self.region = region
        self._profile = profile
        self._credentials = credentials

    def _resolve_credentials(self) -> Any:
        if self._credentials is None:
            import botocore.exceptions
            import botocore.session

            try:
                session = botocore.session.Session(profile=self._profile)
                self._credentials = session.get_credentials()
            except botocore.exceptions.BotoCoreError as exc:
                raise ApiError(0, "no_credentials", f"cannot load AWS credentials: {exc}") from None
            if self._credentials is None:
                raise ApiError(
                    0,
                    "no_credentials",
                    "SigV4 signing needs AWS credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                    "AWS_PROFILE, or run `aws sso login`",
                )
        return self._credentials

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> dict[str, str]:
        """Headers to send: the given ones plus ``Authorization``, ``X-Amz-Date`` and, for temporary
        credentials, ``X-Amz-Security-Token``."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self._resolve_credentials()
        if hasattr(credentials, "get_frozen_credentials"):
            credentials = credentials.get_frozen_credentials()
        request = AWSRequest(method=method, url=url, data=body or b"", headers=dict(headers))
        SigV4Auth(credentials, SIGV4_SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())


class ApiClient:
    """A small, synchronous client of the jobsched API.

    ``request`` is the one place that talks HTTP; the named methods below are thin conveniences that
    map one-to-one onto the API's routes, so scripts read like the API reference."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        signer: SigV4Signer | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        user_agent: str = "jobsched-cli",
    ):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.signer = signer
        self.timeout = timeout
        self.user_agent = user_agent

    # --- the one HTTP call ------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON body (None for an empty body).

        Raises :class:`ApiError` for any status >= 400 and when the server cannot be reached."""
        url = self.base_url + path
        params = {k: _query_value(v) for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = None if body is None else json.dumps(body).encode()
        send_headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if data is not None:
            send_headers["Content-Type"] = "application/json"
        send_headers.update(headers or {})
        if self.signer is not None:
            send_headers = self.signer.sign(method, url, send_headers, data)
        elif self.token:
            send_headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(url, data=data, headers=send_headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                return _decode(response.read())
        except urllib.error.HTTPError as exc:
            raise _api_error(exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, "connection_error", f"cannot reach {self.base_url}: {reason}") from None

    def pages(self, path: str, query: Mapping[str, Any] | None = None) -> Iterator[dict]:
        """Yield each page (``{"items", "next_cursor"}``) of a list route, following ``next_cursor``."""
        params = dict(query or {})
        while True:
            page = self.request("GET", path, query=params)
            yield page
            cursor = page.get("next_cursor")
            if not cursor:
                return
            params["cursor"] = cursor

    def list_all(self, path: str, query: Mapping[str, Any] | None = None) -> list[dict]:
        """Every item of a list route, all pages concatenated (newest first, as the API returns)."""
        return [item for page in self.pages(path, query) for item in page.get("items", [])]

    # --- jobs -------------------------------------------------------------------------------------

    def create_job(self, spec: Mapping[str, Any], *, idempotency_key: str | None = None) -> dict:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self.request("POST", "/jobs", body=dict(spec), headers=headers)

    def list_jobs(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> dict:
        return self.request("GET", "/jobs", query={"limit": limit, "cursor": cursor, **filters})

    def get_job(self, job_id: str) -> dict:
        return self.request("GET", f"/jobs/{_seg(job_id)}")

    def update_job(self, job_id: str, changes: Mapping[str, Any], *, version: int | str) -> dict:
        return self.request(
            "PATCH", f"/jobs/{_seg(job_id)}", body=dict(changes), headers={"If-Match": str(version)}
        )

    def delete_job(self, job_id: str, *, version: int | str) -> Any:
        return self.request("DELETE", f"/jobs/{_seg(job_id)}", headers={"If-Match": str(version)})

    def put_job_by_name(self, name: str, spec: Mapping[str, Any], *, dry_run: bool = False) -> dict:
        """Create or update the job ``name`` (``outcome``: created, updated or unchanged)."""
        query = {"dry_run": True} if dry_run else None
        return self.request("PUT", f"/jobs/by-name/{_seg(name)}", body=dict(spec), query=query)

    def put_workflow_by_name(self, name: str, spec: Mapping[str, Any], *, dry_run: bool = False) -> dict:
        """Create or update the workflow ``name`` (``outcome``: created, updated or unchanged)."""
        query = {"dry_run": True} if dry_run else None
        return self.request("PUT", f"/workflows/by-name/{_seg(name)}", body=dict(spec), query=query)

    def declared(self) -> dict:
        """The tenant's declared names: ``{"items": [{"name", "kind", "id", "version"}]}``."""
        return self.request("GET", "/declared")

    def pause_job(self, job_id: str, *, note: str | None = None) -> dict:
        return self.request("POST", f"/jobs/{_seg(job_id)}/pause", body=_without_none({"note": note}))

    def resume_job(self, job_id: str, *, misfire_policy: str | None = None) -> dict:
        body = _without_none({"misfire_policy": misfire_policy})
        return self.request("POST", f"/jobs/{_seg(job_id)}/resume", body=body)

    def trigger_job(
        self, job_id: str, *, payload: Mapping[str, Any] | None = None, idempotency_key: str | None = None
    ) -> dict:
        body = {} if payload is None else {"payload": dict(payload)}
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self.request("POST", f"/jobs/{_seg(job_id)}/trigger", body=body, headers=headers)

    def backfill_job(
        self, job_id: str, *, start: str, end: str, idempotency_key: str | None = None, wait: bool = False
    ) -> dict:
        """``{"runs": [...]}`` for a backfill made at once (up to 100 occurrences), else the backfill
        record the API answered with 202 — or, with ``wait``, that record once it is no longer
        running (:meth:`wait_backfill`)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        result = self.request(
            "POST", f"/jobs/{_seg(job_id)}/backfill", body={"from": start, "to": end}, headers=headers
        )
        if wait and is_backfill(result):
            return self.wait_backfill(job_id, result["id"])
        return result

    def get_backfill(self, job_id: str, backfill_id: str) -> dict:
        return self.request("GET", f"/jobs/{_seg(job_id)}/backfills/{_seg(backfill_id)}")

    def wait_backfill(
        self,
        job_id: str,
        backfill_id: str,
        *,
        timeout: float = 600.0,
        interval: float = 0.5,
        on_progress: Any = None,
    ) -> dict:
        """Poll the backfill until it is no longer ``running`` (or ``timeout`` seconds pass: then the
        last record read); ``on_progress(record)`` is called after each read."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.get_backfill(job_id, backfill_id)
            if on_progress is not None:
                on_progress(record)
            if record.get("state") != "running" or time.monotonic() >= deadline:
                return record
            time.sleep(interval)

    def job_runs(
        self, job_id: str, *, limit: int | None = None, cursor: str | None = None, upcoming: str | None = None
    ) -> dict:
        query = {"limit": limit, "cursor": cursor, "upcoming": upcoming}
        return self.request("GET", self.job_runs_path(job_id), query=query)

    @staticmethod
    def job_runs_path(job_id: str) -> str:
        return f"/jobs/{_seg(job_id)}/runs"

    def job_history(
        self,
        job_id: str,
        *,
        until: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        upcoming: int | None = None,
    ) -> dict:
        """A page of the job's history as a grid (``GET /jobs/{id}/history``, decision 0063)."""
        query = {"until": until, "limit": limit, "cursor": cursor, "upcoming": upcoming}
        return self.request("GET", f"/jobs/{_seg(job_id)}/history", query=query)

    # --- runs -------------------------------------------------------------------------------------

    def list_runs(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> dict:
        return self.request("GET", "/runs", query={"limit": limit, "cursor": cursor, **filters})

    def get_run(self, run_id: str) -> dict:
        return self.request("GET", f"/runs/{_seg(run_id)}")

    def get_run_logs(self, run_id: str) -> dict:
        """The run's log lines (``GET /runs/{id}/logs``: the embedded mode only)."""
        return self.request("GET", f"/runs/{_seg(run_id)}/logs")

    def cancel_run(self, run_id: str) -> dict:
        return self.request("POST", f"/runs/{_seg(run_id)}/cancel", body={})

    def retry_run(self, run_id: str, *, payload: Mapping[str, Any] | None = None) -> dict:
        body = {} if payload is None else {"payload": dict(payload)}
        return self.request("POST", f"/runs/{_seg(run_id)}/retry", body=body)

    # --- dead letters -----------------------------------------------------------------------------

    def list_dead_letters(
        self, *, limit: int | None = None, cursor: str | None = None, **filters: Any
    ) -> dict:
        return self.request("GET", "/dead-letters", query={"limit": limit, "cursor": cursor, **filters})

    def replay_dead_letter(self, run_id: str, *, payload: Any = None) -> dict:
        body = {} if payload is None else {"payload": payload}
        return self.request("POST", f"/dead-letters/{_seg(run_id)}/replay", body=body)

    def replay_dead_letters(self, filters: Mapping[str, Any]) -> dict:
        return self.request("POST", "/dead-letters/replay", body=dict(filters))

    def discard_dead_letter(self, run_id: str) -> Any:
        return self.request("DELETE", f"/dead-letters/{_seg(run_id)}")

    # --- the tenant's settings -----------------------------------------------------------------------

    def get_notify_settings(self) -> dict:
        return self.request("GET", "/settings/notify")

    def put_notify_settings(self, notify: Mapping[str, Any]) -> dict:
        return self.request("PUT", "/settings/notify", body=dict(notify))

    # --- admin: IAM principal -> tenant mappings --------------------------------------------------

    def list_principals(self) -> dict:
        return self.request("GET", "/admin/principals")

    def map_principal(self, principal: str, tenant: str) -> dict:
        return self.request("PUT", "/admin/principals", body={"principal": principal, "tenant": tenant})

    def unmap_principal(self, principal: str) -> Any:
        return self.request("DELETE", "/admin/principals", query={"principal": principal})

    def usage(self, start: str | None = None, end: str | None = None, tenant: str | None = None) -> dict:
        return self.request(
            "GET", "/usage", query=_without_none({"from": start, "to": end, "tenant": tenant})
        )

    def forecast(self, tenant: str | None = None) -> dict:
        return self.request("GET", "/forecast", query=_without_none({"tenant": tenant}))

    def stats(self, start: str | None = None, end: str | None = None, bucket: str = "minute") -> dict:
        return self.request(
            "GET", "/stats", query=_without_none({"from": start, "to": end, "bucket": bucket})
        )

    def queue_stats(self, start: str | None = None, end: str | None = None, bucket: str = "minute") -> dict:
        return self.request(
            "GET", "/stats/queues", query=_without_none({"from": start, "to": end, "bucket": bucket})
        )

    def own_limits(self) -> dict:
        return self.request("GET", "/limits")

    def list_tenant_limits(self) -> dict:
        return self.request("GET", "/admin/tenants/limits")

    def get_tenant_limits(self, tenant: str) -> dict:
        return self.request("GET", f"/admin/tenants/{_seg(tenant)}/limits")

    def put_tenant_limits(self, tenant: str, limits: Mapping[str, Any]) -> dict:
        return self.request("PUT", f"/admin/tenants/{_seg(tenant)}/limits", body=dict(limits))

    def delete_tenant_limits(self, tenant: str) -> Any:
        return self.request("DELETE", f"/admin/tenants/{_seg(tenant)}/limits")

    # --- spend caps (docs/semantics/limits.md "Spend caps") ------------------------------------------

    def own_budget(self) -> dict:
        return self.request("GET", "/budget")

    def list_budgets(self) -> dict:
        return self.request("GET", "/admin/tenants/budgets")

    def get_budget(self, tenant: str) -> dict:
        return self.request("GET", f"/admin/tenants/{_seg(tenant)}/budget")

    def put_budget(self, tenant: str, monthly_usd: float) -> dict:
        return self.request("PUT", f"/admin/tenants/{_seg(tenant)}/budget", body={"monthly_usd": monthly_usd})

    def delete_budget(self, tenant: str) -> Any:
        return self.request("DELETE", f"/admin/tenants/{_seg(tenant)}/budget")

    # --- handler versions (docs/api.md "Handlers") --------------------------------------------------

    def list_handlers(self, *, all_tenants: bool = False) -> dict:
        """``GET /handlers``: the registered versions and what refers to each (``all_tenants``: every
        tenant's jobs and runs, administrators only)."""
        return self.request("GET", "/handlers", query={"scope": "all"} if all_tenants else None)

    def drain_handler(self, name: str, version: int) -> dict:
        return self.request("POST", f"/handlers/{_seg(name)}/versions/{int(version)}/drain")

    def undrain_handler(self, name: str, version: int) -> dict:
        return self.request("DELETE", f"/handlers/{_seg(name)}/versions/{int(version)}/drain")

    def record_deploy_check(self, code_version: str, problems: list[dict[str, Any]]) -> dict:
        """``POST /handlers/deploy-checks``: record a deploy forced past the pre-deploy check."""
        body = {"forced": True, "code_version": code_version, "problems": list(problems)}
        return self.request("POST", "/handlers/deploy-checks", body=body)

    def deploy_checks(self) -> dict:
        return self.request("GET", "/handlers/deploy-checks")

    # --- misc -------------------------------------------------------------------------------------

    def health(self) -> dict:
        return self.request("GET", "/health")


def build_client(
    url: str | None = None,
    *,
    token: str | None = None,
    sigv4: bool | None = None,
    region: str | None = None,
    profile: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> ApiClient:
    """Build a client: explicit argument > environment (``JOBSCHED_URL``, ``JOBSCHED_TOKEN``) > default.

    SigV4 is used when ``sigv4`` is True, or when it is None and the URL is an ``execute-api`` host;
    the region comes from ``region``, else the host name, else ``AWS_REGION``/``AWS_DEFAULT_REGION``."""
    import os

    env = os.environ if environ is None else environ
    base_url = url or env.get(ENV_URL) or DEFAULT_URL
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ApiError(0, "bad_url", f"--url must be an http(s) URL like {DEFAULT_URL}, got {base_url!r}")
    host_region = region_from_host(parsed.hostname)
    use_sigv4 = sigv4 if sigv4 is not None else host_region is not None
    signer = None
    if use_sigv4:
        signing_region = region or host_region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if not signing_region:
            raise ApiError(0, "no_region", "SigV4 signing needs a region: pass --region or set AWS_REGION")
        signer = SigV4Signer(signing_region, profile=profile)
    return ApiClient(
        base_url,
        token=None if use_sigv4 else (token or env.get(ENV_TOKEN)),
        signer=signer,
        timeout=timeout,
    )


def is_backfill(result: object) -> bool:
    """Whether an answer of ``POST /jobs/{id}/backfill`` is an asynchronous backfill's record (202)."""
    return isinstance(result, dict) and "planned" in result and "state" in result


def _seg(value: str) -> str:
    """One URL path segment, percent-encoded (ids are URL-safe, but user input may not be)."""
    return urllib.parse.quote(str(value), safe="")


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _without_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _decode(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise ApiError(0, "bad_response", f"the server sent a body that is not JSON: {raw[:200]!r}") from None


def _api_error(status: int, raw: bytes) -> ApiError:
    """The API's ``{"error", "message"}`` body as an ApiError; any other body is kept as the message."""
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return ApiError(status, data["error"], str(data.get("message") or ""))
    if isinstance(data, dict) and "message" in data:  # e.g. API Gateway's own {"message": "Forbidden"}
        return ApiError(status, f"http_{status}", str(data["message"]))
    text = raw.decode(errors="replace").strip()[:300]
    return ApiError(status, f"http_{status}", text or f"HTTP {status}")
