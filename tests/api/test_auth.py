"""Who may call what: bearer tokens, IAM principals mapped to tenants, JWT claims, admin routes."""

from __future__ import annotations

import pytest

from jobsched.api.auth import AuthConfig, principal_candidates
from jobsched.runtime.resources import ENV_AUTH_MODE, ENV_TENANT_TOKENS
from tests.api.events import ACME, body_of, http_event, iam_authorizer, jwt_authorizer
from tests.aws.conftest import T0

PREVIEW = {"schedule": "0 9 * * *"}
ALICE_SESSION = "arn:aws:sts::123456789012:assumed-role/acme-app/alice"
ADMIN_SESSION = "arn:aws:sts::123456789012:assumed-role/jobsched-admin/ops"


# --- token mode -----------------------------------------------------------------------------------


def test_missing_authorization_is_401_with_a_hint(call):
    response = call("GET", "/schedules/preview", query=PREVIEW)
    assert response["statusCode"] == 401
    assert body_of(response) == {"error": "unauthorized", "message": "send 'Authorization: Bearer <token>'"}
    assert response["headers"]["WWW-Authenticate"].startswith("Bearer")


def test_unknown_token_is_401(call):
    response = call("GET", "/schedules/preview", query=PREVIEW, headers={"Authorization": "Bearer nope"})
    assert response["statusCode"] == 401
    assert body_of(response)["message"] == "the bearer token is not valid"


def test_wrong_scheme_is_401(call):
    response = call("GET", "/schedules/preview", query=PREVIEW, headers={"Authorization": "Basic dG9r"})
    assert response["statusCode"] == 401
    assert "Bearer" in body_of(response)["message"]


def test_valid_token_reaches_the_route(call):
    response = call("GET", "/schedules/preview", query=PREVIEW, headers=ACME)
    assert response["statusCode"] == 200


def test_auth_is_checked_before_the_body(call):
    # Given no credentials and a body that is not JSON
    # When the request is made
    response = call("PUT", "/admin/principals", raw_body="{not json")
    # Then the caller learns about the missing credentials, not the body
    assert response["statusCode"] == 401


def test_token_mode_needs_tokens():
    with pytest.raises(ValueError, match=ENV_TENANT_TOKENS):
        AuthConfig.from_env({ENV_AUTH_MODE: "token"})


def test_unknown_auth_mode_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=ENV_AUTH_MODE):
        AuthConfig.from_env({ENV_AUTH_MODE: "magic"})


# --- admin routes (token mode: the admin is token:ops) -------------------------------------------


def test_non_admin_gets_403_on_admin_routes(call):
    response = call("GET", "/admin/principals", headers=ACME)
    assert response["statusCode"] == 403
    assert body_of(response)["error"] == "forbidden"


def test_admin_maps_lists_and_removes_a_principal(call):
    root = {"Authorization": "Bearer tok-root"}
    mapping = {"principal": "arn:aws:iam::123456789012:role/acme-app", "tenant": "acme"}
    put = call("PUT", "/admin/principals", body=mapping, headers=root)
    assert put["statusCode"] == 200
    assert body_of(put) == {**mapping, "updated_at": "2026-03-02T12:00:00.000Z"}
    listed = body_of(call("GET", "/admin/principals", headers=root))
    assert listed == {"items": [body_of(put)], "next_cursor": None}
    deleted = call("DELETE", "/admin/principals", query={"principal": mapping["principal"]}, headers=root)
    assert deleted["statusCode"] == 204
    assert body_of(call("GET", "/admin/principals", headers=root))["items"] == []


def test_removing_an_unmapped_principal_is_404(call):
    root = {"Authorization": "Bearer tok-root"}
    response = call("DELETE", "/admin/principals", query={"principal": "account:123456789012"}, headers=root)
    assert response["statusCode"] == 404


def test_admin_put_rejects_a_malformed_principal_with_422(call):
    root = {"Authorization": "Bearer tok-root"}
    response = call("PUT", "/admin/principals", body={"principal": "bob", "tenant": "acme"}, headers=root)
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("principal: ")


# --- iam mode -------------------------------------------------------------------------------------


def test_assumed_role_session_is_also_known_as_its_role():
    assert principal_candidates(
        {"userArn": ALICE_SESSION, "accountId": "123456789012", "principalOrgId": "o-abc"}
    ) == [
        ALICE_SESSION,
        "arn:aws:iam::123456789012:role/acme-app",
        "account:123456789012",
        "org:o-abc",
    ]


def test_iam_principal_without_mapping_is_401(make_app):
    app = make_app("iam")
    event = http_event("GET", "/schedules/preview", query=PREVIEW, authorizer=iam_authorizer(ALICE_SESSION))
    response = app.resolve(event, None)
    assert response["statusCode"] == 401
    assert "PUT /admin/principals" in body_of(response)["message"]


def test_iam_admin_maps_a_role_and_its_sessions_get_the_tenant(make_app):
    # Given an IAM admin maps the acme-app role to tenant acme
    app = make_app("iam")
    mapping = {"principal": "arn:aws:iam::123456789012:role/acme-app", "tenant": "acme"}
    put = app.resolve(
        http_event("PUT", "/admin/principals", body=mapping, authorizer=iam_authorizer(ADMIN_SESSION)), None
    )
    assert put["statusCode"] == 200
    # When a session of that role calls a tenant route
    event = http_event("GET", "/schedules/preview", query=PREVIEW, authorizer=iam_authorizer(ALICE_SESSION))
    response = app.resolve(event, None)
    # Then it is admitted
    assert response["statusCode"] == 200


def test_iam_request_without_identity_is_401(make_app):
    app = make_app("iam")
    response = app.resolve(http_event("GET", "/schedules/preview", query=PREVIEW), None)
    assert response["statusCode"] == 401
    assert "SigV4" in body_of(response)["message"]


def test_iam_non_admin_cannot_map_principals(make_app):
    app = make_app("iam")
    mapping = {"principal": ALICE_SESSION, "tenant": "globex"}
    response = app.resolve(
        http_event("PUT", "/admin/principals", body=mapping, authorizer=iam_authorizer(ALICE_SESSION)), None
    )
    assert response["statusCode"] == 403


# --- jwt mode -------------------------------------------------------------------------------------


def test_jwt_tenant_claim_admits_the_caller(make_app):
    app = make_app("jwt")
    event = http_event(
        "GET", "/schedules/preview", query=PREVIEW, authorizer=jwt_authorizer({"sub": "u1", "tenant": "acme"})
    )
    assert app.resolve(event, None)["statusCode"] == 200


def test_jwt_without_the_tenant_claim_is_401(make_app):
    app = make_app("jwt", JOBSCHED_JWT_TENANT_CLAIM="custom:tenant")
    event = http_event(
        "GET", "/schedules/preview", query=PREVIEW, authorizer=jwt_authorizer({"sub": "u1", "tenant": "acme"})
    )
    response = app.resolve(event, None)
    assert response["statusCode"] == 401
    assert "jwt:u1" in body_of(response)["message"]


def test_principal_lookups_are_cached_for_a_minute(aws):
    # Given a store with a controllable monotonic clock and a mapped role
    from jobsched.api.tenants import PrincipalStore

    ticks = [0.0]
    store = PrincipalStore(aws.clients.dynamodb, aws.settings.leases_table, monotonic=lambda: ticks[0])
    role = "arn:aws:iam::123456789012:role/acme-app"
    store.put(role, "acme", now=T0)
    assert store.resolve([role]) == "acme"
    # When the mapping is removed behind this store's back (another container)
    aws.clients.dynamodb.delete_item(
        TableName=aws.settings.leases_table, Key={"lease_key": {"S": "principal#" + role}}
    )
    # Then the cached answer holds for the cache time, and the removal shows after it
    ticks[0] = 59.0
    assert store.resolve([role]) == "acme"
    ticks[0] = 61.0
    assert store.resolve([role]) is None


def test_a_mapping_change_in_this_container_shows_at_once(aws):
    from jobsched.api.tenants import PrincipalStore

    store = PrincipalStore(aws.clients.dynamodb, aws.settings.leases_table, monotonic=lambda: 0.0)
    role = "arn:aws:iam::123456789012:role/acme-app"
    assert store.resolve([role]) is None
    store.put(role, "acme", now=T0)
    assert store.resolve([role]) == "acme"


def test_a_deployment_that_names_no_mode_gets_iam():
    assert AuthConfig.from_env({}).mode == "iam"


def test_an_iam_admin_mapped_to_no_tenant_reads_every_tenants_handlers_but_no_tenant_route(make_app):
    # Given an administrator's session that no mapping gives a tenant (how deploy-check is run)
    app = make_app("iam")
    admin = iam_authorizer(ADMIN_SESSION)
    # When it asks for every tenant's references to handlers, for its own tenant's, and for a tenant route
    everyone = app.resolve(http_event("GET", "/handlers", query={"scope": "all"}, authorizer=admin), None)
    own = app.resolve(http_event("GET", "/handlers", authorizer=admin), None)
    jobs = app.resolve(http_event("GET", "/jobs", authorizer=admin), None)
    # Then the deployment-wide view answers; the tenant-scoped ones say it is mapped to no tenant
    assert everyone["statusCode"] == 200, everyone["body"]
    assert body_of(everyone)["scope"] == "all"
    assert [own["statusCode"], jobs["statusCode"]] == [401, 401]
    assert "mapped to no tenant" in body_of(own)["message"]
