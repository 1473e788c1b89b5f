"""``GET /forecast`` (decision 0054): the calling tenant's forecast from its authenticated identity, an
administrator's across tenants or of one, 403 for a tenant asking for another, 422 for a bad tenant."""

from __future__ import annotations

from tests.api.events import ACME, GLOBEX, body_of

OPS = {"authorization": "Bearer tok-root"}


def lanes(answer: dict) -> dict[tuple[str, str], int]:
    return {(lane["pool"], lane["priority"]): lane["total"] for lane in answer["lanes"]}


def test_a_tenant_reads_its_own_forecast_and_an_administrator_every_tenants(call, create_job):
    # Given (at 12:00) acme's job every 10 minutes and globex's high-priority one at 12:30
    create_job(ACME, schedule="*/10 * * * *")
    create_job(GLOBEX, schedule="30 12 * * *", priority="high")
    # When acme asks GET /forecast
    own = body_of(call("GET", "/forecast", headers=ACME))
    # Then acme sees its own runs only: 12:00 (queued at creation, due now: the ledger's) .. 12:50
    assert own["tenant"] == "acme" and lanes(own) == {("lambda", "default"): 6}
    assert own["start"] == "2026-03-02T12:00:00.000Z" and len(own["minutes"]) == 60
    lane = own["lanes"][0]
    assert [i for i, c in enumerate(lane["counts"]) if c] == [0, 10, 20, 30, 40, 50]
    assert lane["needed"][10] == 1 and lane["bursts"][10] == 1
    # and an administrator every tenant's, or one tenant's
    every = body_of(call("GET", "/forecast", headers=OPS))
    assert every["tenant"] is None and lanes(every) == {("lambda", "default"): 6, ("lambda", "high"): 1}
    one = body_of(call("GET", "/forecast", query={"tenant": "globex"}, headers=OPS))
    assert lanes(one) == {("lambda", "high"): 1}


def test_a_tenant_asking_for_another_is_403_and_a_bad_tenant_422(call):
    assert call("GET", "/forecast", query={"tenant": "globex"}, headers=ACME)["statusCode"] == 403
    response = call("GET", "/forecast", query={"tenant": "has space"}, headers=OPS)
    assert response["statusCode"] == 422 and "tenant" in body_of(response)["message"]
