"""End to end through the real embedded mode: a hypothesis fuzz of ``POST /jobs`` over HTTP.

``tests/api/test_fuzz_jobs.py`` fuzzes the API with Lambda events; this one sends the
same kinds of bodies (its strategies), plus raw bytes that are not UTF-8, through a real socket to the
embedded mode's HTTP bridge and the real api function. Never a 500; a rejection has the error shape
and creates no job (counted through the API); a 201 creates exactly one.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.test_fuzz_jobs import json_value, near_valid
from tests.local.e2e_helpers import EmbeddedProcess

pytestmark = pytest.mark.slow

TENANT, TOKEN = "e2e-fuzz", "tok-e2e-fuzz"
SHARED_TENANTS = {TENANT: TOKEN}
ALLOWED = {201, 400, 409, 413, 415, 422}


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )


@pytest.fixture(scope="module")
def api(shared_process: EmbeddedProcess) -> str:
    """Given the embedded mode with the real functions and this module's tenant (shared with other
    modules: tests/local/shared_embedded.py); its API URL. The jobs counted are this tenant's."""
    return shared_process.url


def _post(api: str, data: bytes, content_type: str | None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(f"{api}/jobs", data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _job_count(api: str) -> int:
    # The jobs of this module's tenant only (GET /jobs lists the caller's own): the embedded mode is
    # shared with other modules, whose jobs are not counted.
    request = urllib.request.Request(f"{api}/jobs?limit=200", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        page = json.loads(response.read())
    assert page["next_cursor"] is None, "the fuzz created more jobs than one page holds"
    return len(page["items"])


def _check(api: str, data: bytes, content_type: str | None) -> None:
    before = _job_count(api)
    # When the body is posted
    status, body = _post(api, data, content_type)
    # Then the answer is a 201 with one new job, or a 4xx with the error shape and no new job
    assert status in ALLOWED, (status, body, data[:300])
    if status == 201:
        assert _job_count(api) == before + 1 and body["id"]
    else:
        assert set(body) == {"error", "message"} and body["message"], body
        assert _job_count(api) == before, "a rejected request created a job"


@fuzz(80)
@given(body=near_valid | json_value)
def test_post_jobs_over_http_never_500(api: str, body: Any) -> None:
    _check(api, json.dumps(body).encode(), "application/json")


@fuzz(40)
@given(
    raw=st.binary(max_size=200),
    content_type=st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", None]),
)
def test_post_jobs_with_raw_bytes_over_http_never_500(api: str, raw: bytes, content_type: str | None) -> None:
    _check(api, raw, content_type)
