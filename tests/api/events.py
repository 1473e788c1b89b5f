"""API Gateway HTTP API (payload format 2.0) events, as API Gateway sends them to the function."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlencode

TOKENS = {"tok-acme": "acme", "tok-globex": "globex", "tok-root": "ops"}
ACME = {"authorization": "Bearer tok-acme"}
GLOBEX = {"authorization": "Bearer tok-globex"}


def http_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    raw_body: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    authorizer: dict[str, Any] | None = None,
    base64_body: bool = False,
) -> dict[str, Any]:
    """One v2 event. ``body`` is JSON-encoded; ``raw_body`` is sent as is."""
    all_headers = {"content-type": "application/json", "user-agent": "pytest"}
    all_headers.update({k.lower(): v for k, v in (headers or {}).items()})
    text = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    if text is not None and base64_body:
        text = base64.b64encode(text.encode()).decode()
    context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "api1",
        "domainName": "api1.execute-api.us-east-1.amazonaws.com",
        "domainPrefix": "api1",
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "203.0.113.7",
            "userAgent": "pytest",
        },
        "requestId": "req-1",
        "routeKey": "$default",
        "stage": "$default",
        "time": "02/Mar/2026:12:00:00 +0000",
        "timeEpoch": 1772452800000,
    }
    if authorizer is not None:
        context["authorizer"] = authorizer
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": all_headers,
        "requestContext": context,
        "isBase64Encoded": base64_body,
    }
    if query:
        event["queryStringParameters"] = dict(query)
    if text is not None:
        event["body"] = text
    return event


def iam_authorizer(user_arn: str, account: str = "123456789012", org: str | None = None) -> dict[str, Any]:
    iam: dict[str, Any] = {
        "accessKey": "ASIAEXAMPLE",
        "accountId": account,
        "callerId": "AROAEXAMPLE:session",
        "cognitoIdentity": None,
        "principalOrgId": org,
        "userArn": user_arn,
        "userId": "AROAEXAMPLE:session",
    }
    return {"iam": iam}


def jwt_authorizer(claims: dict[str, Any]) -> dict[str, Any]:
    return {"jwt": {"claims": claims, "scopes": None}}


def body_of(response: dict[str, Any]) -> Any:
    text = response.get("body") or ""
    if response.get("isBase64Encoded"):
        text = base64.b64decode(text).decode()
    return json.loads(text) if text else None


def hold_a_job_listing(pool: Any, monkeypatch: Any, headers: dict[str, str]) -> tuple[Any, Any, dict]:
    """Start ``GET /jobs`` (as ``headers``' caller) on ``pool`` in a thread, held inside the job
    service's listing until the returned ``release`` is set; return once it is inside, with the
    thread and the dict its answer goes to (key ``"held"``)."""
    import threading

    from jobsched.services.jobs import JobService

    entered, release = threading.Event(), threading.Event()
    real = JobService.list

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(10)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(JobService, "list", slow)
    answers: dict[str, Any] = {}
    held = threading.Thread(
        target=lambda: answers.setdefault(
            "held", pool.resolve(http_event("GET", "/jobs", headers=headers), None)
        )
    )
    held.start()
    assert entered.wait(10), "the held listing never reached the job service"
    return held, release, answers
