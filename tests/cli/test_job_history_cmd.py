"""`jobsched jobs history` (decision 0063): the request it sends, and the grid line, the tables, the
offset change and a paused job's resume preview it prints — against a contract server whose answer
is checked against the API's own response model."""

from __future__ import annotations

import json

from jobsched.api.history_schemas import HistoryOut
from tests.cli.conftest import ContractServer

JOB = "job-0001"


def _cell(at: str, local: str, offset: int, state: str, **extra: object) -> dict:
    return {
        "run_id": f"{JOB}.{at.replace('-', '').replace(':', '')}",
        "scheduled_at": at,
        "local": local,
        "utc_offset_seconds": offset,
        "state": state,
        "trigger": "schedule",
        "attempt": 1 if state in ("succeeded", "failed") else 0,
        **extra,
    }


BODY = {
    "job_id": JOB,
    "timezone": "Europe/Paris",
    "state": "paused",
    "until": "2026-03-30T09:00:00.000Z",
    "cells": [
        _cell("2026-03-27T01:30:00.000Z", "2026-03-27T02:30:00+01:00", 3600, "succeeded"),
        _cell("2026-03-28T01:30:00.000Z", "2026-03-28T02:30:00+01:00", 3600, "failed", error="boom"),
        _cell(
            "2026-03-29T01:00:00.000Z",
            "2026-03-29T03:00:00+02:00",
            7200,
            "skipped",
            skip_reason="dst_gap",
        ),
        _cell(
            "2026-03-30T00:30:00.000Z",
            "2026-03-30T02:30:00+02:00",
            7200,
            "skipped",
            skip_reason="misfire",
            skipped_count=3,
            skipped_until="2026-04-01T00:30:00.000Z",
        ),
    ],
    "next_cursor": "abc",
    "dst_changes": [{"at": "2026-03-29T01:00:00.000Z", "before_seconds": 3600, "after_seconds": 7200}],
    "upcoming": [
        {"at": "2026-03-31T00:30:00.000Z", "local": "2026-03-31T02:30:00+02:00", "note": None},
        {"at": "2026-04-01T00:30:00.000Z", "local": "2026-04-01T02:30:00+02:00", "note": None},
    ],
    "resume_preview": [
        {
            "policy": "run_once",
            "job_default": True,
            "runs": [{"at": "2026-03-30T00:30:00.000Z", "trigger": "catchup"}],
            "runs_count": 1,
            "skipped": {"misfire": 2},
            "skipped_count": 2,
            "skipped_first": "2026-03-28T00:30:00.000Z",
            "skipped_last": "2026-03-29T00:30:00.000Z",
            "next_at": "2026-03-31T00:30:00.000Z",
            "decided": 3,
            "complete": True,
        }
    ],
}


def test_history_sends_its_query_and_prints_the_grid(cli, cli_env: ContractServer) -> None:
    """Given the API's answer for a paused job, When `jobs history` runs with --until and --limit,
    Then it sends them, prints one character per cell with the offset change and the upcoming fires,
    the cells' table and what a resume would do"""
    HistoryOut.model_validate(BODY)  # the canned answer has the API's shape
    cli_env.respond("GET", f"/jobs/{JOB}/history", 200, BODY)
    result = cli("jobs", "history", JOB, "--until", "2026-03-30T09:00:00Z", "--limit", "4", "--upcoming", "2")
    assert result.code == 0, result.err
    sent = cli_env.only("GET", f"/jobs/{JOB}/history")
    assert sent.query == {"until": ["2026-03-30T09:00:00Z"], "limit": ["4"], "upcoming": ["2"]}
    lines = result.out.splitlines()
    assert lines[0] == (
        "job job-0001 (Europe/Paris), paused: 4 records up to 2026-03-30T09:00:00Z, oldest first, "
        "then 2 upcoming"
    )
    assert lines[1] == "+X|gM.."  # succeeded, failed, the change, dst_gap, a misfire summary, 2 upcoming
    assert "misfire ×3 to 2026-04-01T00:30:00Z" in result.out
    assert "offset change at 2026-03-29T01:00:00Z: UTC+01:00 -> UTC+02:00" in result.out
    preview = next(line for line in lines if line.startswith("run_once"))
    assert preview.split()[:4] == ["run_once", "(job's)", "1", "2"]
    assert "older records: add --cursor abc" in result.err


def test_history_json_is_the_api_answer(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", f"/jobs/{JOB}/history", 200, BODY)
    result = cli("jobs", "history", JOB, "--json")
    assert json.loads(result.out) == BODY


def test_history_of_an_unknown_job_is_the_apis_error(cli, cli_env: ContractServer) -> None:
    result = cli("jobs", "history", "job-0404")
    assert result.code != 0
    assert "not_found" in result.err


def test_a_record_skipped_for_the_budget_is_marked_b(cli, cli_env: ContractServer) -> None:
    """Given a history with a run a worker did not start because the tenant was over its budget, When
    `jobs history` prints it, Then its mark is `b` and the legend names it (decision 0062)"""
    body = {
        **BODY,
        "state": "active",
        "cells": [
            _cell("2026-03-27T01:30:00.000Z", "2026-03-27T02:30:00+01:00", 3600, "succeeded"),
            _cell(
                "2026-03-28T01:30:00.000Z", "2026-03-28T02:30:00+01:00", 3600, "skipped", skip_reason="budget"
            ),
        ],
        "dst_changes": [],
        "upcoming": [],
        "resume_preview": None,
    }
    HistoryOut.model_validate(body)
    cli_env.respond("GET", f"/jobs/{JOB}/history", 200, body)
    result = cli("jobs", "history", JOB)
    assert result.code == 0, result.err
    assert result.out.splitlines()[1] == "+b"
    assert "b budget" in result.out
