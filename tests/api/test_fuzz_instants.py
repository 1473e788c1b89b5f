"""Instants in query strings are RFC 3339 date-times, as the schema says (issue 27 §5: schemathesis
sent ``since``/``until`` of the wrong type and got 200: a number of seconds, a time without seconds)."""

from __future__ import annotations

import pytest

from tests.api.events import ACME, body_of

NOT_DATE_TIMES = ["0", "-1", "1700000000", "123.5", "2026-01-01", "2026-01-01T00:00Z", "2026-01-01 00:00:00Z"]


@pytest.mark.parametrize("value", NOT_DATE_TIMES)
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/runs", "since"),
        ("/dead-letters", "since"),
        ("/dead-letters", "until"),
        ("/schedules/preview", "after"),
        ("/stats", "from"),
        ("/stats", "to"),
        ("/jobs/job-0001/history", "until"),
    ],
)
def test_an_instant_query_that_is_not_an_rfc_3339_date_time_is_422_naming_it(call, path, name, value):
    """Given a query instant that is a number of seconds, a date, a time without seconds or with a
    space, When the route is called, Then it answers 422 naming the parameter (not 200 with the
    number read as seconds since 1970)."""
    query = {name: value, **({"schedule": "0 9 * * *"} if path == "/schedules/preview" else {})}
    response = call("GET", path, query=query, headers=ACME)
    assert response["statusCode"] == 422, response["body"]
    assert name in body_of(response)["message"]


@pytest.mark.parametrize(
    "value", ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.250+05:30", "2026-01-01t00:00:00z"]
)
def test_an_rfc_3339_date_time_is_accepted(call, value):
    assert call("GET", "/runs", query={"since": value}, headers=ACME)["statusCode"] == 200
    assert call("GET", "/dead-letters", query={"until": value}, headers=ACME)["statusCode"] == 200


@pytest.mark.parametrize("value", ["0", "1700000000", "2026-01-01T00:00Z"])
def test_an_instant_in_a_body_that_is_a_string_of_seconds_is_422_naming_it(call, value):
    """Given a bulk replay filter whose ``since`` is a string of seconds (a JSON number was already
    refused), When it is posted, Then 422 naming since, and nothing is replayed."""
    response = call("POST", "/dead-letters/replay", body={"since": value}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]
    assert "since" in body_of(response)["message"]
