"""Security properties users ask about (issue 16 §4; docs/api.md, "Security").

JWT mode: API Gateway's JWT authorizer checks the signature, ``alg``, ``exp``/``nbf``, ``iss`` and
``aud`` (tests/infra/test_variants.py pins its issuer and audience); the function trusts only the
claims the authorizer passes in ``requestContext.authorizer.jwt.claims`` and never decodes a token
itself. IAM mode: a principal mapped to no tenant is refused. Logs: the api function writes no token,
``Authorization`` header, payload or webhook header value (the API Gateway access log's format:
tests/infra/test_api.py).
"""

from __future__ import annotations

import base64
import json
import logging

import pytest

from tests.api.events import ACME, body_of, iam_authorizer, jwt_authorizer

PREVIEW = {"schedule": "0 9 * * *"}


def _b64(part: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")


def unsigned_jwt(claims: dict) -> str:
    """A token with ``alg: none`` and no signature, as an attacker would forge it."""
    return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."


FORGED = unsigned_jwt({"sub": "mallory", "tenant": "acme", "iss": "https://evil", "aud": "jobsched"})


@pytest.mark.parametrize(
    "token",
    [
        FORGED,  # alg: none
        unsigned_jwt({"sub": "u1", "tenant": "acme", "exp": 1}),  # expired
        unsigned_jwt({"sub": "u1", "tenant": "acme", "aud": "someone-else"}),  # wrong audience
        unsigned_jwt({"sub": "u1", "tenant": "acme", "iss": "https://other-issuer/"}),  # wrong issuer
    ],
    ids=["alg-none", "expired", "wrong-audience", "wrong-issuer"],
)
def test_jwt_mode_never_reads_a_token_the_authorizer_did_not_validate(make_app, token):
    """Given jwt mode / When a request carries a token but no authorizer claims (the gateway refused
    it, or the function was reached another way) / Then 401: the bearer token is never decoded."""
    from tests.api.events import http_event

    app = make_app("jwt")
    event = http_event("GET", "/jobs", headers={"Authorization": f"Bearer {token}"})
    response = app.resolve(event, None)
    assert response["statusCode"] == 401, response["body"]


@pytest.mark.parametrize("tenant", [None, "", "../acme", "a" * 200, 42, ["acme"]])
def test_jwt_without_a_usable_tenant_claim_is_401(make_app, tenant):
    app = make_app("jwt")
    claims = {"sub": "u1"} if tenant is None else {"sub": "u1", "tenant": tenant}
    from tests.api.events import http_event

    response = app.resolve(http_event("GET", "/jobs", authorizer=jwt_authorizer(claims)), None)
    assert response["statusCode"] == 401, response["body"]


def test_a_tenant_in_the_request_cannot_override_the_claim(make_app):
    """Given a JWT for globex / When the request names acme in a header, the query and the body /
    Then the job is created for globex and acme sees nothing."""
    from tests.api.events import http_event

    app = make_app("jwt")
    globex = jwt_authorizer({"sub": "u2", "tenant": "globex"})
    job = {"name": "n", "schedule": "@daily", "target": {"handler": "demo.echo"}}
    sneaky = http_event(
        "POST", "/jobs", body=job, query={"tenant": "acme"}, headers={"x-tenant": "acme"}, authorizer=globex
    )
    assert app.resolve(sneaky, None)["statusCode"] == 201
    with_tenant_field = http_event("POST", "/jobs", body={**job, "tenant": "acme"}, authorizer=globex)
    assert app.resolve(with_tenant_field, None)["statusCode"] == 422  # an unknown field
    acme = jwt_authorizer({"sub": "u1", "tenant": "acme"})
    listed = app.resolve(http_event("GET", "/jobs", authorizer=acme), None)
    assert body_of(listed)["items"] == []


def test_iam_principal_mapped_to_no_tenant_is_401(make_app):
    from tests.api.events import http_event

    app = make_app("iam")
    stranger = iam_authorizer("arn:aws:sts::999999999999:assumed-role/stranger/s1", account="999999999999")
    response = app.resolve(http_event("GET", "/jobs", authorizer=stranger), None)
    assert response["statusCode"] == 401
    assert "mapped to no tenant" in body_of(response)["message"]


SECRET_HEADER = "Bearer s3cr3t-webhook-credential"
PAYLOAD_MARK = "payload-mark-7f3a"


def test_the_api_logs_no_token_payload_or_webhook_header(call, capsys, caplog):
    """Given requests that succeed, fail validation and fail authentication, carrying a token, a
    payload and a webhook header / When they are served / Then no log line holds any of them."""
    caplog.set_level(logging.INFO)  # the functions' level (DEBUG adds botocore's wire log, bodies and all)
    job = {
        "name": "n",
        "schedule": "@daily",
        "target": {"http": {"url": "https://hooks.example/x", "headers": {"Authorization": SECRET_HEADER}}},
        "payload": {"secret": PAYLOAD_MARK},
    }
    assert call("POST", "/jobs", body=job, headers=ACME)["statusCode"] == 201
    call("POST", "/jobs", body={**job, "priority": "urgent"}, headers=ACME)  # 422
    call("POST", "/jobs", body=job, headers={"Authorization": "Bearer tok-wrong-" + PAYLOAD_MARK})  # 401
    call("POST", "/jobs", raw_body='{"payload": {"secret": "' + PAYLOAD_MARK + '"', headers=ACME)  # 400
    captured = capsys.readouterr()
    logged = captured.out + captured.err + "\n".join(r.getMessage() for r in caplog.records)
    for secret in ("tok-acme", "tok-wrong", SECRET_HEADER, "s3cr3t", PAYLOAD_MARK):
        assert secret not in logged, secret
