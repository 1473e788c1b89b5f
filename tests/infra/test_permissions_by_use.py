"""Permissions proved by use (docs/deploy.md, decision 0038): every AWS call a function made in this
test session — in the function tests, the end-to-end tests (embedded-mode child processes record into
``IAM_CALLS_DIR``), the fault battery's short form and the benchmarks' tests — is allowed by that
function's role in the synthesized template, in both encryption variants; no call was made for an
invocation without being attributed to it; and, when the session ran the whole suite, every grant no
call used has a disposition (jobsched/local/iam/dispositions.py).

This module runs after every other test (tests/conftest.py orders it last): it judges what they did.
A parallel run leaves it out; ``make test`` runs it after the parallel run, on the directory every
worker recorded into (decision 0044).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from jobsched.local.iam import recorder
from jobsched.local.iam.report import check, render
from tests.conftest import collected_paths
from tests.infra.conftest import kept_template_path

FUNCTIONS = {"api", "dispatcher", "worker", "worker_high", "dlq_consumer", "sweeper", "capacity"}
#: The suites whose calls make the recording complete enough to judge unused grants.
COVERING = ("tests/functions", "tests/local", "tests/bench", "tests/aws", "tests/cli")


@pytest.fixture(scope="module")
def recording(request: pytest.FixtureRequest) -> recorder.Recording:
    """The session's recording (this process) merged with the embedded-mode children's files."""
    session = recorder.current()
    assert session is not None, "tests/conftest.py installs the recorder for the session"
    merged = recorder.Recording()
    merged.merge(session)
    directory = os.environ[recorder.ENV_CALLS_DIR]
    own = f"{os.getpid()}.json"
    for path in sorted(os.listdir(directory)):
        if path.endswith(".json") and path != own:
            merged.merge(recorder.Recording.load_file(os.path.join(directory, path)))
    return merged


def _template(request: pytest.FixtureRequest, variant: str) -> dict[str, Any]:
    """The ``variant`` template: the one this run's ``tests/infra`` session kept beside the recordings
    (``make test`` runs that session before this check, on the same directory), else synthesized here."""
    kept = kept_template_path(variant)
    if kept.exists():
        return dict(json.loads(kept.read_text(encoding="utf-8")))
    return dict(request.getfixturevalue(variant).template)


def _whole_suite(request: pytest.FixtureRequest) -> bool:
    """Whether the sessions that recorded (this one, or the xdist workers of the parallel run this
    check follows in ``make test``) collected every covering suite."""
    ran = {str(item.path) for item in request.session.items}
    ran |= collected_paths(os.environ[recorder.ENV_CALLS_DIR])
    root = str(request.config.rootpath)
    return all(any(p.startswith(os.path.join(root, suite)) for p in ran) for suite in COVERING)


@pytest.mark.parametrize("variant", ["synth", "cmk_synth"], ids=["encryption=aws", "encryption=cmk"])
def test_every_recorded_call_is_allowed_by_its_functions_role(request, recording, variant) -> None:
    # Given every call the session's functions made, When each is evaluated against its function's
    # role (with the key actions it implies on a customer-managed key),
    report = check(recording, _template(request, variant), variant)
    print(render(recording, [report]))
    # Then none is denied, none came from a function without a role, none was left unattributed.
    assert recording.calls > 0, "no AWS call was recorded: the check would prove nothing"
    assert not report.evaluation.missing_roles
    assert [f"{c.function} {c.action} {c.resource}" for c in report.evaluation.denied] == []
    assert dict(recording.unattributed) == {}


@pytest.mark.parametrize("variant", ["synth", "cmk_synth"], ids=["encryption=aws", "encryption=cmk"])
def test_every_grant_is_used_or_justified(request, recording, variant) -> None:
    if not _whole_suite(request):
        pytest.skip("unused grants are judged only when the session ran the whole suite (make test)")
    report = check(recording, _template(request, variant), variant)
    # Given the whole suite's calls, Then every function made some, and every grant not used is justified.
    assert {f for f, _, _ in recording.triples} >= FUNCTIONS
    unjustified = [f"{g.function} {g.action} {g.resource}" for g in report.unjustified]
    assert unjustified == []
