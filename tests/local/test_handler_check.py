"""The embedded mode's start-up warning (jobsched/local/handler_check.py): the API function is asked
``GET /handlers`` with each tenant's token (here a stand-in answering recorded documents of the shape
docs/api.md gives), and what the loaded handler modules lack is one warning line each."""

from __future__ import annotations

import json
from typing import Any

from jobsched.local.handler_check import handler_warnings
from tests.handlers_listing import entry, listing

TOKENS = {"acme": "tok-acme", "globex": "tok-globex"}


def document(missing: list[dict[str, Any]] | None = None, unpinned: dict | None = None) -> dict[str, Any]:
    """A tenant's GET /handlers: its job of demo.echo, and what the loaded modules lack."""
    echo = entry("demo.echo", 1, newest=True, jobs=1, job_ids=["job-echo"])
    return listing(
        echo, unpinned=unpinned or {"demo.echo": {"1": 1}}, missing=tuple(missing or ()), scope="tenant"
    )


class StandInApi:
    """An api function answering GET /handlers per bearer token; records the events it got."""

    def __init__(self, answers: dict[str, tuple[int, Any]]):
        self.answers = answers
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        self.events.append(event)
        token = event["headers"]["authorization"].removeprefix("Bearer ")
        status, body = self.answers[token]
        return {
            "statusCode": status,
            "headers": {"content-type": "application/json"},
            "body": json.dumps(body),
        }


def test_a_tenant_referring_to_an_unregistered_version_gets_one_line_naming_it_and_its_runs() -> None:
    # Given acme has a dead-lettered run bound to shop.report version 1, which no loaded module registers,
    # and globex refers only to registered handlers
    acme = document(
        [
            entry(
                "shop.report",
                1,
                dead_lettered=1,
                jobs=1,
                job_ids=["job-r"],
                run_ids=["job-r.20261201T090000Z"],
            )
        ]
    )
    api = StandInApi({"tok-acme": (200, acme), "tok-globex": (200, document())})
    # When the embedded mode checks at start
    lines = handler_warnings(api, TOKENS)
    # Then one line for acme names the handler, the version, and the job and run referring to it
    assert lines == [
        "warning: handler 'shop.report' version 1 is not registered by the loaded handler modules; "
        "tenant acme refers to it: 1 job, 1 dead-lettered run; jobs job-r; runs job-r.20261201T090000Z"
    ]
    # And each tenant was asked with its own token, on GET /handlers
    assert [(e["rawPath"], e["requestContext"]["http"]["method"]) for e in api.events] == [
        ("/handlers", "GET")
    ] * 2


def test_unbound_references_to_an_unregistered_name_are_named_without_a_version() -> None:
    acme = document([entry("shop.gone", None, queued=2, run_ids=["a", "b"])])
    lines = handler_warnings(StandInApi({"tok-acme": (200, acme)}), {"acme": "tok-acme"})
    assert lines == [
        "warning: handler 'shop.gone' is not registered by the loaded handler modules; tenant acme refers to "
        "it: 2 queued runs; runs a, b"
    ]


def test_an_unpinned_payload_the_newest_version_cannot_take_is_warned() -> None:
    # Given unpinned demo.echo jobs whose payload was written for a version 7 no module upgrades from
    acme = document(unpinned={"demo.echo": {"7": 1}})
    lines = handler_warnings(StandInApi({"tok-acme": (200, acme)}), {"acme": "tok-acme"})
    assert len(lines) == 1
    assert lines[0].startswith(
        "warning: tenant acme: unpinned jobs of 'demo.echo' have payloads written for version 7"
    )


def test_nothing_to_say_when_everything_referred_to_is_registered() -> None:
    assert handler_warnings(StandInApi({"tok-acme": (200, document())}), {"acme": "tok-acme"}) == []


def test_an_api_without_the_route_or_another_answer_is_skipped() -> None:
    api = StandInApi({"tok-acme": (404, {"error": "not_found"}), "tok-globex": (200, {"items": []})})
    assert handler_warnings(api, TOKENS) == []
