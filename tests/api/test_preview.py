"""GET /schedules/preview: the time core's preview over HTTP."""

from __future__ import annotations

from tests.api.events import ACME, body_of


def test_preview_lists_the_next_fire_times_after_now(call):
    # Given the clock at 2026-03-02T12:00Z
    # When a daily 09:00 schedule in Berlin is previewed
    response = call(
        "GET",
        "/schedules/preview",
        query={"schedule": "0 9 * * *", "timezone": "Europe/Berlin", "count": "2"},
        headers=ACME,
    )
    # Then the next two 09:00 Berlin fires (08:00 UTC in winter)
    assert response["statusCode"] == 200
    body = body_of(response)
    assert [f["at"] for f in body["fire_times"]] == ["2026-03-03T08:00:00Z", "2026-03-04T08:00:00Z"]
    assert body["fire_times"][0]["local"] == "2026-03-03T09:00:00+01:00"


def test_preview_after_an_explicit_instant_through_a_dst_gap(call):
    # Given 02:30 does not exist in Berlin on 2026-03-29 and the gap policy is shift
    response = call(
        "GET",
        "/schedules/preview",
        query={
            "schedule": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "count": "1",
            "after": "2026-03-28T12:00:00Z",
        },
        headers=ACME,
    )
    # Then the fire is shifted to the first instant after the gap and says so
    assert body_of(response)["fire_times"] == [
        {"at": "2026-03-29T01:00:00Z", "local": "2026-03-29T03:00:00+02:00", "note": "dst_gap_shifted"}
    ]


def test_invalid_cron_is_422_with_the_time_core_message(call):
    response = call("GET", "/schedules/preview", query={"schedule": "61 * * * *"}, headers=ACME)
    assert response["statusCode"] == 422
    body = body_of(response)
    assert body["error"] == "validation_error"
    assert "61" in body["message"]


def test_unknown_time_zone_is_422(call):
    response = call(
        "GET", "/schedules/preview", query={"schedule": "@daily", "timezone": "Mars/Base"}, headers=ACME
    )
    assert response["statusCode"] == 422
    assert "Mars/Base" in body_of(response)["message"]


def test_count_over_the_limit_is_422_naming_the_parameter(call):
    response = call("GET", "/schedules/preview", query={"schedule": "@daily", "count": "1000"}, headers=ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["message"] == "count: Input should be less than or equal to 100"


def test_naive_after_is_422(call):
    response = call(
        "GET",
        "/schedules/preview",
        query={"schedule": "@daily", "after": "2026-03-28T12:00:00"},
        headers=ACME,
    )
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("after: ")
