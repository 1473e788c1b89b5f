"""A slow request does not hold up the others: one resolver per request in flight (issue 12 §4)."""

from __future__ import annotations

from jobsched.api.app import ResolverPool
from tests.api.events import ACME, GLOBEX, body_of, hold_a_job_listing, http_event


def test_a_request_answers_while_another_is_held_inside_its_route(app, monkeypatch):
    # Given a pool seeded with the app, and a listing of jobs that blocks inside the service until
    # released (a slow request)
    pool = ResolverPool(app)
    held, release, answers = hold_a_job_listing(pool, monkeypatch, ACME)
    # When another request arrives while the first is held
    health = pool.resolve(http_event("GET", "/health"), None)
    preview = pool.resolve(
        http_event("GET", "/schedules/preview", query={"schedule": "0 9 * * *"}, headers=ACME), None
    )
    # Then it is answered at once, by a second resolver, with its own request's answer
    assert health["statusCode"] == 200 and body_of(health)["status"] == "ok"
    assert body_of(preview)["schedule"] == "0 9 * * *"
    assert pool.built == 1 and "held" not in answers
    release.set()
    held.join(10)
    # And the held request gets its own answer too
    assert answers["held"]["statusCode"] == 200 and body_of(answers["held"])["items"] == []


def test_concurrent_requests_on_one_app_each_get_their_own_answer(app):
    # Given one resolver shared by threads (as the embedded mode's threaded HTTP bridge shares it)
    from concurrent.futures import ThreadPoolExecutor

    def ask(i: int) -> tuple[int, str]:
        headers = ACME if i % 2 else GLOBEX
        event = http_event(
            "GET", "/schedules/preview", query={"schedule": f"{i % 60} 9 * * *"}, headers=headers
        )
        return i, body_of(app.resolve(event, None))["schedule"]

    # When many requests arrive at once
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, range(64)))
    # Then every answer belongs to its own request
    assert all(schedule == f"{i % 60} 9 * * *" for i, schedule in answers)
