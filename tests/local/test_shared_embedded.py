"""The shared embedded mode's guards (tests/local/shared_embedded.py): the modules that share it get
the union of their tenants and administrators, never a tenant or token of another module's."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.local.shared_embedded import shared_tenants


def module(name: str, tenants: dict[str, str], admins: list[str] | None = None) -> ModuleType:
    found = ModuleType(name)
    found.SHARED_TENANTS = tenants  # type: ignore[attr-defined]
    if admins is not None:
        found.SHARED_ADMINS = admins  # type: ignore[attr-defined]
    return found


def test_the_shared_mode_starts_with_every_modules_tenants_and_administrators() -> None:
    tokens, admins = shared_tenants(
        [module("a", {"a-one": "tok-a"}), module("b", {"b-one": "tok-b1", "b-ops": "tok-b2"}, ["b-ops"])]
    )
    assert tokens == {"a-one": "tok-a", "b-one": "tok-b1", "b-ops": "tok-b2"}
    assert admins == ["b-ops"]


@pytest.mark.parametrize(
    ("second", "named"),
    [({"shared": "tok-2"}, "tenant 'shared'"), ({"other": "tok-1"}, "tenant 'other' or its token")],
)
def test_a_tenant_or_token_of_another_module_is_refused(second: dict[str, str], named: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"b and a both declare {named}"):
        shared_tenants([module("a", {"shared": "tok-1"}), module("b", second)])


def test_an_administrator_must_be_one_of_the_modules_own_tenants() -> None:
    with pytest.raises(pytest.UsageError, match="SHARED_ADMINS names a tenant not in SHARED_TENANTS"):
        shared_tenants([module("a", {"a-one": "tok-a"}, ["ops"])])


def test_a_module_without_tenants_is_refused() -> None:
    with pytest.raises(pytest.UsageError, match="declares no SHARED_TENANTS"):
        shared_tenants([ModuleType("bare")])
