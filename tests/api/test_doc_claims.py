"""Statuses the docs promise, read from the docs and compared with what the API answers (issue 27 §4)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.api.conftest import JOB
from tests.api.events import ACME, body_of

DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def test_deploy_md_gives_the_status_the_api_answers_for_an_unknown_handler(call):
    """Given deploy.md's sentence on handlers the API does not know, When a job naming one is created,
    Then the API answers the status the page names (it said 400; the API answers 422), and the
    error names the handler."""
    (status,) = re.findall(r"unknown handler is refused with a (\d{3})", " ".join(DEPLOY.read_text().split()))
    response = call("POST", "/jobs", body={**JOB, "target": {"handler": "billing.invoce"}}, headers=ACME)
    assert response["statusCode"] == int(status)
    assert "billing.invoce" in body_of(response)["message"]
