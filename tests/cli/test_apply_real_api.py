"""`jobsched apply` against `jobsched dev` (the api function behind the embedded mode's HTTP bridge, on
moto): the docs' example file applied twice, the second time changing nothing (decision 0060)."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import Embedded
from tests.cli.test_apply_cmd import doc_example

pytestmark = pytest.mark.slow


def test_the_docs_example_applies_on_the_embedded_mode_and_again_changes_nothing(
    cli, embedded: Embedded, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    # Given the embedded mode, as tenant beta, and the docs' example file
    monkeypatch.setenv("JOBSCHED_URL", embedded.url)
    monkeypatch.setenv("JOBSCHED_TOKEN", embedded.tokens["beta"])
    path = tmp_path / "schedules.yaml"
    path.write_text(doc_example())
    client = embedded.client("beta")
    # When it is applied
    first = cli("apply", "-f", str(path), "--json")
    # Then its three entries are created
    assert first.code == 0, first.err
    assert [i["outcome"] for i in json.loads(first.out)["items"]] == ["created"] * 3
    declared = {d["name"]: (d["id"], d["version"]) for d in client.declared()["items"]}
    assert set(declared) == {"nightly-report", "sync-every-5-minutes", "nightly-etl"}
    # When it is applied again
    second = cli("apply", "-f", str(path))
    # Then nothing changed: every entry unchanged, the same ids at the same versions
    assert second.code == 0, second.err
    assert second.out.splitlines()[-1] == "3 unchanged"
    assert {d["name"]: (d["id"], d["version"]) for d in client.declared()["items"]} == declared
    # And --prune with an empty file deletes exactly the declared three
    empty = tmp_path / "empty.yaml"
    empty.write_text("jobs: []\n")
    pruned = cli("apply", "-f", str(empty), "--prune")
    assert pruned.code == 0, pruned.err
    assert pruned.out.splitlines()[-1] == "3 deleted"
    assert client.declared()["items"] == []
