"""The handler registry keeps versions side by side, with payload contracts and upgraders (decision 0048)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from jobsched.core.errors import ConflictError, PermanentError, ValidationError
from jobsched.core.job_specs import validate_target
from jobsched.targets import registry

NAME = "tests.versions.report"


class ReportV2(BaseModel):
    rows: int
    title: str = "untitled"


V1_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["n"],
}


def _v1(payload: dict, ctx: object) -> dict:
    return {"v": 1, **payload}


def _v2(payload: dict, ctx: object) -> dict:
    return {"v": 2, **payload}


@pytest.fixture
def versions() -> Iterator[None]:
    # Given version 1 (a JSON Schema) and version 2 (a pydantic model, upgrading version 1's payload)
    registry.job(NAME, payload=V1_SCHEMA)(_v1)
    registry.job(NAME, version=2, payload=ReportV2, upgrades={1: lambda p: {"rows": p["n"]}})(_v2)
    yield
    registry.unregister(NAME)


def test_two_versions_of_one_name_are_registered_side_by_side(versions: None) -> None:
    assert registry.newest_version(NAME) == 2
    assert registry.get_handler(NAME, 1) is _v1
    assert registry.get_handler(NAME) is _v2  # no version: the newest
    assert [(e.name, e.version) for e in registry.catalogue() if e.name == NAME] == [(NAME, 1), (NAME, 2)]
    assert registry.is_registered(NAME, 1) and not registry.is_registered(NAME, 3)


def test_an_unknown_version_names_the_registered_ones(versions: None) -> None:
    with pytest.raises(ValidationError) as err:
        registry.lookup(NAME, 7)
    assert err.value.field == "target.version"
    assert "registered versions: 1, 2" in str(err.value)


def test_a_payload_of_an_older_version_is_upgraded_then_checked(versions: None) -> None:
    assert registry.lookup(NAME, 2).payload_for({"n": 5}, 1) == {"rows": 5, "title": "untitled"}


def test_a_payload_without_an_upgrade_path_is_a_permanent_failure(versions: None) -> None:
    with pytest.raises(PermanentError) as err:
        registry.lookup(NAME, 1).payload_for({"rows": 5}, 2)
    assert "version 1 cannot take a payload written for version 2" in str(err.value)


@pytest.mark.parametrize(
    ("version", "payload", "field"),
    [
        (2, {"rows": "many"}, "payload.rows"),  # pydantic: wrong type
        (2, {}, "payload.rows"),  # pydantic: missing
        (1, {"n": "x"}, "payload.n"),  # JSON Schema: wrong type
        (1, {"label": "a"}, "payload.n"),  # JSON Schema: required
    ],
)
def test_a_payload_failing_its_contract_names_the_field(
    versions: None, version: int, payload: dict, field: str
) -> None:
    with pytest.raises(ValidationError) as err:
        registry.lookup(NAME, version).payload_for(payload, None)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_another_function_under_a_taken_version_is_refused(versions: None) -> None:
    with pytest.raises(ConflictError):
        registry.job(NAME, version=2)(lambda p, c: None)
    registry.job(NAME, version=2, payload=ReportV2, upgrades={1: lambda p: p})(_v2)  # the same: harmless


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"version": 0}, "version"),
        ({"version": True}, "version"),
        ({"version": 2, "upgrades": {2: dict}}, "upgrades"),
    ],
)
def test_bad_registrations_are_refused(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        registry.job("tests.versions.bad", **kwargs)
    assert err.value.field == field


def test_describe_lists_the_contract_and_upgrades(versions: None) -> None:
    described = registry.lookup(NAME, 2).describe()
    assert described["upgrades_from"] == [1]
    assert described["payload_schema"]["required"] == ["rows"]
    assert registry.lookup(NAME, 1).describe()["payload_schema"] == V1_SCHEMA


@pytest.mark.parametrize(
    "target",
    [{"handler": "x", "version": 0}, {"handler": "x", "version": "2"}, {"handler": "x", "version": True}],
)
def test_a_target_pins_a_version_with_a_positive_integer(target: dict) -> None:
    with pytest.raises(ValidationError) as err:
        validate_target(target)
    assert err.value.field == "target.version"


def test_a_target_may_pin_a_version() -> None:
    validate_target({"handler": "x", "version": 3})
    with pytest.raises(ValidationError):
        validate_target({"http": {"url": "https://example.com", "method": "GET"}, "version": 1})
