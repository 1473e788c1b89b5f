"""`jobsched apply` against the real API: the api function's resolver on the in-memory fakes at a fixed
clock, served over HTTP by the embedded mode's bridge, driven through the real `jobsched` entry point
(decision 0060, docs/schedules-as-code.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jobsched.targets.demo  # noqa: F401 - registers demo.* (the API refuses unknown handlers)
from jobsched.api.app import JobschedResolver, build_app
from jobsched.api.auth import AuthConfig, Authenticator
from jobsched.client import ApiClient
from jobsched.compose.api import build_services
from jobsched.core.clock import FakeClock
from jobsched.local.http_bridge import HttpBridge
from jobsched.runtime.resources import ENV_AUTH_MODE, ENV_TENANT_TOKENS
from tests.api.events import TOKENS
from tests.aws.conftest import T0
from tests.aws.memory import memory_env

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "schedules-as-code.md"


class _Resolve:
    """The bridge's function: each HTTP request resolved by the API app."""

    def __init__(self, app: JobschedResolver):
        self.app = app

    def invoke(self, event: dict[str, Any]) -> Any:
        return self.app.resolve(event, None)


@pytest.fixture
def api(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiClient]:
    """The API on the fakes at 2026-03-02T12:00Z, at a URL the CLI is pointed to as tenant acme (with
    ``indirect`` parametrization: the tenant's job limit, default 100)."""
    clock = FakeClock(T0)
    env = memory_env(clock)
    services = build_services(env.settings, env.clients, clock, max_jobs=getattr(request, "param", 100))
    config = AuthConfig.from_env({ENV_AUTH_MODE: "token", ENV_TENANT_TOKENS: json.dumps(TOKENS)})
    app = build_app(services, Authenticator(config, services.principals))
    bridge = HttpBridge(None, port=0)
    bridge.start(_Resolve(app))  # type: ignore[arg-type]
    monkeypatch.setenv("JOBSCHED_URL", bridge.url)
    monkeypatch.setenv("JOBSCHED_TOKEN", "tok-acme")
    try:
        yield ApiClient(bridge.url, token="tok-acme")
    finally:
        bridge.stop()


def doc_example() -> str:
    """The YAML example of docs/schedules-as-code.md (its first fenced yaml block)."""
    match = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert match, "docs/schedules-as-code.md has no yaml example"
    return match.group(1)


def _write(tmp_path: Path, text: str, name: str = "schedules.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _state(api: ApiClient) -> dict[str, tuple[int, str, list[str]]]:
    """Each job's (version, updated_at, ids of its runs, history and upcoming), by name."""
    out = {}
    for job in api.list_all("/jobs"):
        runs = api.list_all(f"/jobs/{job['id']}/runs") + api.list_all(
            f"/jobs/{job['id']}/runs", {"upcoming": True}
        )
        out[job["name"]] = (job["version"], job["updated_at"], sorted(r["id"] for r in runs))
    return out


def test_the_docs_example_applied_twice_changes_nothing_the_second_time(cli, api, tmp_path):
    # Given the docs' example file
    path = _write(tmp_path, doc_example())
    # When it is applied
    first = cli("apply", "-f", path)
    # Then every entry is created, and the diff says so
    assert first.code == 0, first.err + first.out
    assert first.out.splitlines() == [
        "+ created    job       nightly-report",
        "+ created    job       sync-every-5-minutes",
        "+ created    workflow  nightly-etl",
        "3 created",
    ]
    before = _state(api)
    assert set(before) == {"nightly-report", "sync-every-5-minutes", "nightly-etl"}
    assert any(runs for _, _, runs in before.values()), "the 5-minute job has runs queued ahead"
    # When the same file is applied again
    second = cli("apply", "-f", path)
    # Then everything is unchanged: no version bump, no write, not one run more
    assert second.code == 0, second.err
    assert second.out.splitlines()[-1] == "3 unchanged"
    assert _state(api) == before


def test_a_changed_entry_is_updated_with_its_changed_fields(cli, api, tmp_path):
    path = _write(tmp_path, doc_example())
    assert cli("apply", "-f", path).code == 0
    changed = (
        doc_example()
        .replace('schedule: "0 2 * * *"', 'schedule: "0 4 * * *"')
        .replace("jitter_seconds: 10", "jitter_seconds: 20")
    )
    result = cli("apply", "-f", _write(tmp_path, changed))
    assert result.code == 0, result.err
    assert "~ updated    job       nightly-report  (schedule)" in result.out.splitlines()
    assert "~ updated    job       sync-every-5-minutes  (jitter_seconds)" in result.out.splitlines()
    assert result.out.splitlines()[-1] == "2 updated, 1 unchanged"
    versions = {j["name"]: j["version"] for j in api.list_all("/jobs")}
    assert versions == {"nightly-report": 2, "sync-every-5-minutes": 2, "nightly-etl": 1}


def test_a_dry_run_prints_the_diff_and_changes_nothing(cli, api, tmp_path):
    # Given nothing declared
    # When the example is applied as a dry run
    result = cli("apply", "-f", _write(tmp_path, doc_example()), "--dry-run")
    # Then the diff says what would be created, and nothing is
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1] == "3 created (dry run: nothing changed)"
    assert api.list_all("/jobs") == [] and api.declared()["items"] == []


def test_prune_deletes_only_the_declared_names_the_file_dropped(cli, api, tmp_path):
    # Given the example applied, and a job created by POST outside the file
    assert cli("apply", "-f", _write(tmp_path, doc_example())).code == 0
    outside = api.create_job({"name": "hand-made", "schedule": "@daily", "target": {"handler": "demo.echo"}})
    # When a file without the workflow is applied without --prune
    without = re.sub(r"\nworkflows:.*", "\n", doc_example(), flags=re.S)
    path = _write(tmp_path, without, "smaller.yaml")
    kept = cli("apply", "-f", path)
    # Then the workflow is listed as not in the file, and kept
    note = "(not in the file; --prune deletes it)"
    assert f"? kept       workflow  nightly-etl  {note}" in kept.out.splitlines()
    assert kept.out.splitlines()[-1] == "2 unchanged, 1 kept"
    assert {d["name"] for d in api.declared()["items"]} == {
        "nightly-report",
        "sync-every-5-minutes",
        "nightly-etl",
    }
    # When --prune --dry-run, Then it says deleted and deletes nothing
    dry = cli("apply", "-f", path, "--prune", "--dry-run")
    assert "- deleted    workflow  nightly-etl" in dry.out.splitlines()
    assert len(api.declared()["items"]) == 3
    # When --prune, Then the workflow is deleted; the POSTed job is left as it is
    pruned = cli("apply", "-f", path, "--prune")
    assert pruned.code == 0, pruned.err
    assert pruned.out.splitlines()[-1] == "2 unchanged, 1 deleted"
    names = sorted(j["name"] for j in api.list_all("/jobs"))
    assert names == ["hand-made", "nightly-report", "sync-every-5-minutes"]
    assert api.get_job(outside["id"])["version"] == 1


def test_json_output_lists_each_outcome(cli, api, tmp_path):
    result = cli("apply", "-f", _write(tmp_path, doc_example()), "--json")
    out = json.loads(result.out)
    assert out["dry_run"] is False
    assert [(i["outcome"], i["kind"], i["name"]) for i in out["items"]] == [
        ("created", "job", "nightly-report"),
        ("created", "job", "sync-every-5-minutes"),
        ("created", "workflow", "nightly-etl"),
    ]


# --- bad files: errors name the line and the field -------------------------------------------------

BAD_SCHEDULE = """\
jobs:
  - name: ok
    schedule: "@daily"
    target: {handler: demo.echo}
  - name: bad
    target: {handler: demo.echo}
    schedule: "61 * * * *"
"""


def test_an_api_refusal_names_the_line_of_the_field_and_nothing_is_applied(cli, api, tmp_path):
    result = cli("apply", "-f", _write(tmp_path, BAD_SCHEDULE))
    assert result.code == 2
    lines = result.out.splitlines()
    prefix = f"error: {tmp_path}/schedules.yaml:7: jobs[1] 'bad' schedule: "
    assert lines[0] == prefix + "minute field '61' is out of range 0-59", lines
    assert lines[-1] == "1 definition(s) refused; nothing was applied"
    assert api.list_all("/jobs") == []  # the good entry was not applied either


def test_an_unknown_handler_is_placed_on_the_line_holding_it(cli, api, tmp_path):
    text = "jobs:\n  - name: a\n    schedule: '@daily'\n    target:\n      handler: no.such\n"
    result = cli("apply", "-f", _write(tmp_path, text))
    assert result.code == 2
    first = result.out.splitlines()[0]
    assert first.startswith(f"error: {tmp_path}/schedules.yaml:5: jobs[0] 'a' target.handler: "), first
    assert "target: unknown handler" not in first and "unknown handler 'no.such'" in first


def test_a_pydantic_refusal_of_a_nested_field_names_its_path_and_line(cli, api, tmp_path):
    text = (
        "jobs:\n  - name: a\n    schedule: '@daily'\n    target: {handler: demo.echo}\n"
        "    retry:\n      max_attempts: 0\n"
    )
    result = cli("apply", "-f", _write(tmp_path, text))
    assert result.code == 2
    first = result.out.splitlines()[0]
    assert first.startswith(f"error: {tmp_path}/schedules.yaml:6: jobs[0] 'a' retry.max_attempts: "), first
    assert "retry.max_attempts: retry.max_attempts" not in first


def test_an_unknown_field_is_placed_on_its_line(cli, api, tmp_path):
    text = "jobs:\n  - name: a\n    schedule: '@daily'\n    target: {handler: demo.echo}\n    shedule: x\n"
    result = cli("apply", "-f", _write(tmp_path, text))
    assert result.code == 2
    assert result.out.startswith(f"error: {tmp_path}/schedules.yaml:5: jobs[0] 'a' shedule: "), result.out


def test_a_workflow_node_error_names_the_node_line(cli, api, tmp_path):
    text = (
        "workflows:\n  - name: w\n    schedule: '@daily'\n    nodes:\n"
        "      - {id: a, target: {handler: demo.echo}}\n"
        "      - {id: b, target: {handler: demo.echo}, depends_on: [zz]}\n"
    )
    result = cli("apply", "-f", _write(tmp_path, text))
    assert result.code == 2
    assert re.match(
        rf"error: {re.escape(str(tmp_path))}/schedules.yaml:6: workflows\[0\] 'w' ", result.out
    ), result.out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jobs:\n  - name: a\n    schedule: [\n", r":4: not valid YAML"),
        (
            "jobs:\n  - name: a\n  - name: a\n",
            r":3: jobs\[1\] name: 'a' is declared twice \(first on line 2\)",
        ),
        ("jobs:\n  - schedule: '@daily'\n", r":2: jobs\[0\] name: a name is required"),
        ("tenant: acme\njobs: []\n", r":1: unknown key 'tenant'"),
        ("jobs:\n  - name: a\n    name: b\n", r":3: 'name' is given twice"),
        ("jobs: {name: a}\n", r":1: jobs must be a list"),
    ],
)
def test_a_malformed_file_is_refused_with_its_line_before_anything_is_sent(
    cli, api, tmp_path, text, expected
):
    result = cli("apply", "-f", _write(tmp_path, text))
    assert result.code == 2
    assert re.search(expected, result.err), result.err
    assert api.list_all("/jobs") == []


@pytest.mark.parametrize("api", [2], indirect=True)
def test_a_refusal_after_the_dry_run_stops_there_and_says_what_was_applied(cli, api, tmp_path):
    # Given a tenant limited to two jobs, and a file of three new entries (a dry run takes no slot,
    # so every entry passes it)
    # When the file is applied
    result = cli("apply", "-f", _write(tmp_path, doc_example()))
    # Then the two created are printed, then the third's refusal, and the exit status is 1
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[:2] == [
        "+ created    job       nightly-report",
        "+ created    job       sync-every-5-minutes",
    ]
    assert "workflows[0] 'nightly-etl'" in lines[-2] and "limit" in lines[-2]
    assert lines[-1] == "stopped there: the entries above were applied; apply the file again"
    assert sorted(j["name"] for j in api.list_all("/jobs")) == ["nightly-report", "sync-every-5-minutes"]
