"""``GET /ui``: the console's static files and sign-in settings, served by the api function."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from jobsched.api.app import ApiServices, build_app
from jobsched.api.auth import AuthConfig, Authenticator
from jobsched.console import (
    ENV_CONSOLE_COGNITO_CLIENT_ID,
    ENV_CONSOLE_COGNITO_REGION,
    STATIC_DIR,
    ConsoleConfig,
)
from jobsched.core.clock import FakeClock
from tests.api.events import ACME, http_event
from tests.aws.conftest import T0


def _text(response: dict) -> str:
    body = response["body"]
    return base64.b64decode(body).decode() if response.get("isBase64Encoded") else body


def test_the_console_page_answers_without_credentials(call):
    """Given no Authorization header, When GET /ui (and /ui/), Then 200 with the console's HTML page."""
    for path in ("/ui", "/ui/"):
        response = call("GET", path)
        assert response["statusCode"] == 200, path
        assert response["headers"]["Content-Type"] == "text/html; charset=utf-8"
        assert '<script type="module" src="/ui/app/main.js">' in _text(response)


def test_the_page_forbids_foreign_scripts_and_admits_its_import_map_by_hash(call):
    """When GET /ui, Then the Content-Security-Policy allows scripts from the console only, plus the
    page's one inline import map by its sha256, and requests to the API's own origin only."""
    response = call("GET", "/ui")
    policy = response["headers"]["Content-Security-Policy"]
    import_map = re.search(r'<script type="importmap">(.*?)</script>', _text(response), re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(import_map.encode()).digest()).decode()
    assert f"script-src 'self' 'sha256-{digest}'" in policy
    assert "connect-src 'self';" in policy
    assert "frame-ancestors 'none'" in policy


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/ui/app/main.js", "text/javascript; charset=utf-8"),
        ("/ui/vendor/preact.mjs", "text/javascript; charset=utf-8"),
        ("/ui/vendor/dagre.esm.js", "text/javascript; charset=utf-8"),
        ("/ui/app/style.css", "text/css; charset=utf-8"),
    ],
)
def test_static_files_are_served_with_their_type(call, path, content_type):
    response = call("GET", path)
    assert response["statusCode"] == 200
    assert response["headers"]["Content-Type"] == content_type
    assert _text(response) == (STATIC_DIR / path.removeprefix("/ui/")).read_text()


@pytest.mark.parametrize(
    "path", ["/ui/nope.js", "/ui/app/nope.js", "/ui/..%2F__init__.py", "/ui/.hidden", "/ui/app/../index.html"]
)
def test_an_unknown_or_escaping_file_is_a_404(call, path):
    """Given a name that is no console file (or tries to leave the static folder), Then 404 not_found."""
    response = call("GET", path)
    assert response["statusCode"] == 404
    assert json.loads(response["body"])["error"] == "not_found"


def test_a_python_file_of_the_package_is_not_served(call):
    """Given a file that exists in jobsched/console but has no console type, Then 404."""
    assert call("GET", "/ui/__init__.py")["statusCode"] == 404


def test_config_names_the_auth_mode_and_no_user_pool_by_default(call):
    response = call("GET", "/ui/config.json")
    assert response["statusCode"] == 200
    assert json.loads(response["body"]) == {"auth_mode": "token", "api_base": "", "cognito": None}


def test_config_with_the_console_user_pool_names_client_region_and_endpoint():
    """Given the stack's user-pool settings, Then /ui/config.json names the pool's client and endpoint,
    and the page's CSP lets the browser call that endpoint (the sign-in form's InitiateAuth)."""
    env = {ENV_CONSOLE_COGNITO_CLIENT_ID: "abc123", ENV_CONSOLE_COGNITO_REGION: "eu-west-1"}
    services = ApiServices(clock=FakeClock(T0), console=ConsoleConfig.from_env(env))
    app = build_app(services, Authenticator(AuthConfig(mode="jwt")))
    config = json.loads(app.resolve(http_event("GET", "/ui/config.json"), None)["body"])
    endpoint = "https://cognito-idp.eu-west-1.amazonaws.com/"
    assert config == {
        "auth_mode": "jwt",
        "api_base": "",
        "cognito": {"client_id": "abc123", "region": "eu-west-1", "endpoint": endpoint},
    }
    policy = app.resolve(http_event("GET", "/ui"), None)["headers"]["Content-Security-Policy"]
    assert f"connect-src 'self' {endpoint};" in policy


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({ENV_CONSOLE_COGNITO_CLIENT_ID: "abc"}, "go together"),
        ({ENV_CONSOLE_COGNITO_CLIENT_ID: "abc", ENV_CONSOLE_COGNITO_REGION: "mars"}, "not an AWS region"),
    ],
)
def test_incomplete_user_pool_settings_are_refused_with_their_names(env, message):
    with pytest.raises(ValueError, match=message):
        ConsoleConfig.from_env(env)


def test_the_api_behind_the_console_still_needs_credentials(call):
    """Given the console is public, Then the API it calls is not: GET /jobs without a token is 401,
    with the tenant's token 200."""
    assert call("GET", "/jobs")["statusCode"] == 401
    assert call("GET", "/jobs", headers=ACME)["statusCode"] == 200


def test_the_console_is_not_in_the_openapi_document(call):
    paths = json.loads(call("GET", "/openapi.json")["body"])["paths"]
    assert not [p for p in paths if p.startswith("/ui")]


def test_every_vendored_file_is_recorded_with_its_licence():
    """Given static/vendor/, Then each file there is named in VENDORED.md's table with its package,
    version and licence file, and each licence file it names exists (decisions 0024, 0027)."""
    vendor = STATIC_DIR / "vendor"
    record = (vendor / "VENDORED.md").read_text()
    rows = [line for line in record.splitlines() if line.startswith("| `")]
    for path in sorted(p for p in vendor.iterdir() if p.is_file() and p.name != "VENDORED.md"):
        row = next((r for r in rows if f"`{path.name}`" in r.split("|")[1]), None)
        assert row is not None, f"{path.name} is not in VENDORED.md"
        licence = re.search(r"`(licenses/[^`]+)`", row)
        name = licence.group(1) if licence else None
        assert name is None or (vendor / name).is_file(), f"{path.name}: {name} is missing"
    named = {m for r in rows for m in re.findall(r"`(licenses/[^`]+)`", r)}
    assert named == {f"licenses/{p.name}" for p in (vendor / "licenses").iterdir()}
