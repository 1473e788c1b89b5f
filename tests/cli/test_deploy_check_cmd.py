"""`jobsched deploy-check` through the real entry point against a contract server that answers
``GET /handlers?scope=all`` with a recorded document of the shape docs/api.md gives, and records
``POST /handlers/deploy-checks``. The new code is a handler module written in a temporary project."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobsched.targets import registry
from tests.cli.conftest import ContractServer
from tests.handlers_listing import entry, listing

MODULE = """
from jobsched.targets.registry import job


@job("{name}", version=1)
def v1(payload, ctx):
    return payload
"""
MODULE_V2 = """
from jobsched.targets.registry import job


@job("{name}", version=2, upgrades={{1: lambda p: {{**p, "format": "csv"}}}})
def v2(payload, ctx):
    return payload
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., tuple[str, str]]]:
    """Write a handler module into a temporary project (the working directory) and give back
    (module name, handler name); the handlers it registers are unregistered after the test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JOBSCHED_HANDLER_MODULES", raising=False)
    monkeypatch.setenv("JOBSCHED_CODE_VERSION", "new1234")
    names: list[str] = []

    def write(*sources: str, name: str | None = None) -> tuple[str, str]:
        handler = name or f"report{uuid.uuid4().hex[:8]}"
        module = f"vdeploy_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{module}.py").write_text("\n".join(s.format(name=handler) for s in sources))
        names.append(handler)
        return module, handler

    yield write
    for handler in names:
        registry.unregister(handler)


def handlers_doc(name: str, *entries: dict[str, Any], unpinned: dict[str, int] | None = None) -> dict:
    """A GET /handlers document for one handler name, the deployed code's version ``old0001``."""
    versions = [entry(name, e.pop("version"), **e) for e in entries]
    return {**listing(*versions, unpinned={name: unpinned or {}}), "code_version": "old0001"}


def test_passes_when_the_new_code_keeps_every_referenced_version(
    cli, cli_env: ContractServer, project
) -> None:
    # Given a deployed v1 with unpinned jobs and queued runs, and new code with v1 and v2 (upgrading 1)
    module, name = project(MODULE, MODULE_V2)
    cli_env.respond(
        "GET",
        "/handlers",
        200,
        handlers_doc(name, {"version": 1, "newest": True, "jobs": 2, "queued": 2}, unpinned={"1": 2}),
    )
    # When deploy-check runs
    result = cli("deploy-check", "--handler-modules", module)
    # Then it asks for every tenant's references and passes without recording anything
    assert result.code == 0, result.err
    assert cli_env.only("GET", "/handlers").query == {"scope": ["all"]}
    assert result.out.startswith("deploy-check: ok: the new code (")
    assert "old0001" in result.out
    assert not [r for r in cli_env.requests if r.method == "POST"]


def test_refuses_a_removal_listing_the_runs_and_jobs_that_refer_to_it(
    cli, cli_env: ContractServer, project
) -> None:
    # Given v1 still has a retrying run and a pinned job, and new code with only v2
    module, name = project(MODULE_V2)
    cli_env.respond(
        "GET",
        "/handlers",
        200,
        handlers_doc(
            name,
            {
                "version": 1,
                "jobs": 1,
                "retrying": 1,
                "examples": {"jobs": ["job-pin"], "runs": ["job-a.20261201T090000Z"]},
            },
            {"version": 2, "newest": True},
        ),
    )
    # When deploy-check runs
    result = cli("deploy-check", "--handler-modules", module)
    # Then it exits 1 and names the version, the counts and the ids; nothing is recorded
    assert result.code == 1
    assert (
        f"handler '{name}' version 1 is not in the new code (it has version 2): 1 job, 1 retrying run"
        in result.out
    )
    assert "jobs job-pin; runs job-a.20261201T090000Z" in result.out
    assert "refused:" in result.out
    assert not [r for r in cli_env.requests if r.method == "POST"]


def test_force_goes_on_and_records_the_forced_check(cli, cli_env: ContractServer, project) -> None:
    # Given the same refusal
    module, name = project(MODULE_V2)
    cli_env.respond(
        "GET",
        "/handlers",
        200,
        handlers_doc(name, {"version": 1, "dead_lettered": 2}, {"version": 2, "newest": True}),
    )
    cli_env.respond("POST", "/handlers/deploy-checks", 201, {"id": "chk-1", "forced": True})
    # When deploy-check runs with --force
    result = cli("deploy-check", "--handler-modules", module, "--force")
    # Then it exits 0 and records the code version and the problems
    assert result.code == 0, result.err
    body = cli_env.only("POST", "/handlers/deploy-checks").json()
    assert body["forced"] is True and body["code_version"] == "new1234"
    assert [(p["name"], p["version"], p["dead_lettered"]) for p in body["problems"]] == [(name, 1, 2)]
    assert "forced: going on" in result.out


def test_json_prints_the_verdict_and_the_problems(cli, cli_env: ContractServer, project) -> None:
    module, name = project(MODULE)
    cli_env.respond("GET", "/handlers", 200, handlers_doc(name, {"version": 2, "newest": True, "running": 1}))
    result = cli("deploy-check", "--handler-modules", module, "--json", "--code-version", "v-given")
    assert result.code == 1
    printed = json.loads(result.out)
    assert printed["ok"] is False and printed["forced"] is False and printed["code_version"] == "v-given"
    assert printed["problems"][0]["running"] == 1


def test_the_modules_default_to_cdk_json(cli, cli_env: ContractServer, project, tmp_path: Path) -> None:
    # Given cdk.json naming the handler module (no --handler-modules, no JOBSCHED_HANDLER_MODULES)
    module, name = project(MODULE)
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"handler_modules": [module]}}))
    cli_env.respond("GET", "/handlers", 200, handlers_doc(name, {"version": 1, "newest": True, "queued": 3}))
    # When deploy-check runs, Then the module was loaded: its v1 is there, nothing is stranded
    result = cli("deploy-check", "--json")
    assert result.code == 0, result.out
    assert json.loads(result.out)["modules"] == ["jobsched.targets.demo", module]


def test_first_deploy_asks_no_api_and_still_imports_the_modules(
    cli, cli_env: ContractServer, project
) -> None:
    module, _ = project(MODULE)
    result = cli("deploy-check", "--first-deploy", "--handler-modules", module)
    assert result.code == 0
    assert result.out.startswith("deploy-check: no deployed API: nothing to strand (first deploy)")
    assert cli_env.requests == []
    broken = cli("deploy-check", "--first-deploy", "--handler-modules", "no_such_module_here")
    assert broken.code == 2 and "no_such_module_here" in broken.err


def test_an_unreachable_api_fails_with_a_hint(cli, project, monkeypatch: pytest.MonkeyPatch) -> None:
    module, _ = project(MODULE)
    result = cli("deploy-check", "--handler-modules", module, "--url", "http://127.0.0.1:9", "--token", "t")
    assert result.code == 1
    assert "pass --first-deploy" in result.err
