"""`jobsched dlq ...` against a contract server."""

from __future__ import annotations

import json

from tests.cli.conftest import ContractServer

RUN_ID = "job-0002.20261201T090000Z"


def dead_letter(**overrides) -> dict:
    item = {
        "run_id": RUN_ID,
        "job_id": "job-0002",
        "error": "PermanentError: bad input",
        "attempts": [{"attempt": 1, "outcome": "failed", "error": "PermanentError: bad input"}],
        "payload": {"kind": "permanent"},
        "failed_at": "2026-12-01T09:00:01.250Z",
        "replays": [],
        "reason": "permanent",
    }
    item.update(overrides)
    return item


def test_list_prints_dead_letters_with_counts(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/dead-letters", 200, {"items": [dead_letter()], "next_cursor": None})
    lines = cli("dlq", "list").out.splitlines()
    assert lines[0].split() == ["RUN", "ID", "JOB", "FAILED", "AT", "ATTEMPTS", "REPLAYS", "REASON", "ERROR"]
    assert lines[1].split() == [
        RUN_ID, "job-0002", "2026-12-01T09:00:01Z", "1", "0", "permanent", "PermanentError:", "bad", "input",
    ]  # fmt: skip


def test_list_filters_by_job_and_quiet_prints_run_ids(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/dead-letters", 200, {"items": [dead_letter()], "next_cursor": None})
    result = cli("dlq", "list", "--job", "job-0002", "--reason", "permanent", "-q")
    assert cli_env.only("GET", "/dead-letters").query == {"job_id": ["job-0002"], "reason": ["permanent"]}
    assert result.out == f"{RUN_ID}\n"


def test_list_when_empty_says_so(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/dead-letters", 200, {"items": [], "next_cursor": None})
    assert cli("dlq", "list").out.strip() == "no dead letters"


def test_replay_one_with_a_corrected_payload(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", f"/dead-letters/{RUN_ID}/replay", 202, {"id": RUN_ID, "state": "queued"})
    result = cli("dlq", "replay", RUN_ID, "--payload", '{"kind": "ok"}')
    assert cli_env.only("POST", f"/dead-letters/{RUN_ID}/replay").json() == {"payload": {"kind": "ok"}}
    assert result.out.strip() == f"replayed {RUN_ID}: run {RUN_ID} queued"


def test_replay_one_with_its_own_payload_sends_an_empty_body(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", f"/dead-letters/{RUN_ID}/replay", 202, {"id": RUN_ID, "state": "queued"})
    assert cli("dlq", "replay", RUN_ID).code == 0
    assert cli_env.only("POST", f"/dead-letters/{RUN_ID}/replay").json() == {}


def test_replay_by_filter_posts_the_filter(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/dead-letters/replay", 200, {"replayed": [RUN_ID, "x"]})
    result = cli("dlq", "replay", "--job", "job-0002", "--since", "2026-12-01T00:00:00Z", "--json")
    assert cli_env.only("POST", "/dead-letters/replay").json() == {
        "job_id": "job-0002",
        "since": "2026-12-01T00:00:00Z",
    }
    assert json.loads(result.out) == {"replayed": [RUN_ID, "x"]}


def test_replay_by_filter_prints_how_many(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/dead-letters/replay", 200, {"replayed": 3})
    assert (
        cli("dlq", "replay", "--job", "job-0002").out.strip() == "replayed 3 dead letter(s) of job job-0002"
    )


def test_replay_with_a_run_id_and_a_filter_is_a_usage_error(cli, cli_env: ContractServer) -> None:
    result = cli("dlq", "replay", RUN_ID, "--job", "job-0002")
    assert result.code == 2
    assert result.err.startswith("error: usage: give a RUN_ID, or filter flags")
    assert cli_env.requests == []


def test_replay_with_neither_is_a_usage_error(cli, cli_env: ContractServer) -> None:
    result = cli("dlq", "replay")
    assert result.code == 2
    assert cli_env.requests == []


def test_discard_deletes_the_dead_letter(cli, cli_env: ContractServer) -> None:
    cli_env.respond("DELETE", f"/dead-letters/{RUN_ID}", 204, None)
    result = cli("dlq", "discard", RUN_ID)
    cli_env.only("DELETE", f"/dead-letters/{RUN_ID}")
    assert (result.code, result.out.strip()) == (0, f"discarded dead letter {RUN_ID}")


def test_discard_of_an_unknown_dead_letter_exits_1(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "DELETE", "/dead-letters/nope", 404, {"error": "not_found", "message": "no dead letter nope"}
    )
    result = cli("dlq", "discard", "nope")
    assert (result.code, result.err.strip()) == (1, "error: not_found: no dead letter nope")


def test_replay_by_error_text_and_window_without_a_job(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/dead-letters/replay", 200, {"replayed": [RUN_ID], "count": 1})
    result = cli(
        "dlq", "replay", "--error-contains", "timeout", "--until", "2026-12-02T00:00:00Z", "--max", "10"
    )
    assert cli_env.only("POST", "/dead-letters/replay").json() == {
        "until": "2026-12-02T00:00:00Z",
        "error_contains": "timeout",
        "max_runs": 10,
    }
    assert result.out.strip() == "replayed 1 dead letter(s)"
