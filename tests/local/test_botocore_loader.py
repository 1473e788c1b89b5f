"""jobsched.local.botocore_loader: every session of the process reads botocore's models parsed once."""

from __future__ import annotations

import boto3
import botocore.loaders
import botocore.session
import pytest

from jobsched.local import botocore_loader
from jobsched.local.config import LocalConfig
from jobsched.local.embedded import EmbeddedMode


def _files_read_by_a_new_sessions_client(monkeypatch: pytest.MonkeyPatch, service: str) -> list[str]:
    read: list[str] = []
    original = botocore.loaders.JSONFileLoader.load_file

    def load_file(self, file_path):  # type: ignore[no-untyped-def]
        read.append(file_path)
        return original(self, file_path)

    with monkeypatch.context() as patched:
        patched.setattr(botocore.loaders.JSONFileLoader, "load_file", load_file)
        boto3.session.Session(region_name="us-east-1").client(service)
    return read


def test_a_new_sessions_client_parses_no_model_a_previous_session_parsed(monkeypatch):
    # Given the shared loader (tests/conftest.py shares it for the test process, as the embedded mode does)
    botocore_loader.share()
    # and one session's client of a service
    boto3.session.Session(region_name="us-east-1").client("stepfunctions")
    # When another new session makes a client of the same service
    read = _files_read_by_a_new_sessions_client(monkeypatch, "stepfunctions")
    # Then it reads no model file: the loader has them parsed
    assert read == []


def test_without_the_shared_loader_each_new_session_parses_the_models_again(monkeypatch):
    # Given botocore's own loader factory (a new loader per session)
    monkeypatch.setattr(botocore.session, "create_loader", botocore.loaders.create_loader)
    boto3.session.Session(region_name="us-east-1").client("stepfunctions")
    # When another new session makes a client of the same service / Then it parses its model again
    read = _files_read_by_a_new_sessions_client(monkeypatch, "stepfunctions")
    assert any("stepfunctions" in path for path in read)


def test_the_shared_loader_keeps_each_search_path_once():
    # Given many boto3 sessions (each appends boto3's data path to its loader)
    botocore_loader.share()
    sessions = [boto3.session.Session(region_name="us-east-1") for _ in range(5)]
    loaders = {id(s._session.get_component("data_loader")) for s in sessions}
    # Then they share one loader, whose search paths hold each path once
    assert len(loaders) == 1
    paths = sessions[0]._session.get_component("data_loader").search_paths
    assert len(paths) == len(set(paths))


def test_the_embedded_mode_shares_the_loader_before_it_makes_any_client(monkeypatch):
    # Given share() replaced by one that stops the start at once
    class Shared(Exception):
        pass

    def share() -> None:
        raise Shared

    monkeypatch.setattr(botocore_loader, "share", share)
    mode = EmbeddedMode(LocalConfig(port=0, demo=False), out=lambda line: None)
    # When the embedded mode starts / Then sharing the loader is the first thing it does
    with pytest.raises(Shared):
        mode.start()
    assert mode.clients == {}  # no client made yet
