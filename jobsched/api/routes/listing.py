"""Cursor scopes of the API's listings (the filtered paging itself is :mod:`jobsched.core.paging`)."""

from __future__ import annotations

from typing import Any

from jobsched.core.paging import MAX_EXAMINED, filtered_page

__all__ = ["MAX_EXAMINED", "filtered_page", "scope_of"]


def scope_of(name: str, tenant: str, **filters: Any) -> str:
    """A cursor scope: the list, the tenant and the filters that shaped the pages."""
    parts = [f"{k}={v}" for k, v in sorted(filters.items()) if v is not None]
    return ":".join([name, tenant, *parts])
