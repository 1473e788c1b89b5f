"""The IAM principal -> tenant mapping (its admin routes: :mod:`jobsched.api.routes.admin`).

Items live in the Leases table under ``lease_key = "principal#<principal>"`` with ``tenant`` and
``updated_at`` (no ``expires_at``, so the table's TTL never removes them). A principal is an IAM ARN
(a role ARN also covers that role's assumed sessions), ``account:<12 digits>`` or ``org:<o-...>``;
see :func:`jobsched.api.auth.principal_candidates` for the lookup order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from jobsched.api.schemas import iso_z
from jobsched.core.errors import NotFoundError

PREFIX = "principal#"


class PrincipalStore:
    """DynamoDB store of principal -> tenant mappings (client injected, table name given).

    :meth:`resolve` runs on every IAM request, so its answers are kept for ``cache_seconds`` (per
    container): a changed or removed mapping takes effect within that time, and a busy caller costs
    one read a minute instead of one per request. ``monotonic`` is injectable for tests."""

    def __init__(
        self,
        dynamodb: Any,
        table_name: str,
        *,
        cache_seconds: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self._ddb = dynamodb
        self._table = table_name
        self._cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._cache: dict[tuple[str, ...], tuple[float, str | None]] = {}

    def put(self, principal: str, tenant: str, *, now: datetime) -> dict[str, str]:
        """Map (or re-map) a principal to a tenant; returns the stored mapping. (This container's
        cache is cleared; other containers see the change within ``cache_seconds``.)"""
        self._cache.clear()
        updated_at = iso_z(now)
        self._ddb.put_item(
            TableName=self._table,
            Item={
                "lease_key": {"S": PREFIX + principal},
                "tenant": {"S": tenant},
                "updated_at": {"S": updated_at},
            },
        )
        return {"principal": principal, "tenant": tenant, "updated_at": updated_at}

    def delete(self, principal: str) -> None:
        """Remove a mapping; :class:`NotFoundError` when there is none."""
        self._cache.clear()
        try:
            self._ddb.delete_item(
                TableName=self._table,
                Key={"lease_key": {"S": PREFIX + principal}},
                ConditionExpression="attribute_exists(lease_key)",
            )
        except self._ddb.exceptions.ConditionalCheckFailedException as error:
            raise NotFoundError(f"principal {principal} is not mapped") from error

    def resolve(self, candidates: Sequence[str]) -> str | None:
        """The tenant of the most specific mapped candidate, or ``None`` (cached, see the class)."""
        unique = list(dict.fromkeys(candidates))[:100]
        if not unique:
            return None
        key, now = tuple(unique), self._monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self._cache_seconds:
            return cached[1]
        tenant = self._lookup(unique)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key] = (now, tenant)
        return tenant

    def _lookup(self, unique: list[str]) -> str | None:
        request = {self._table: {"Keys": [{"lease_key": {"S": PREFIX + c}} for c in unique]}}
        found: dict[str, str] = {}
        while request:
            answer = self._ddb.batch_get_item(RequestItems=request)
            for item in answer.get("Responses", {}).get(self._table, []):
                found[item["lease_key"]["S"].removeprefix(PREFIX)] = item["tenant"]["S"]
            request = answer.get("UnprocessedKeys") or {}
        for candidate in unique:
            if candidate in found:
                return found[candidate]
        return None

    def list(self) -> list[dict[str, str]]:
        """Every mapping, sorted by principal (an admin view; the mapping is small)."""
        items: list[dict[str, str]] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "begins_with(lease_key, :prefix)",
            "ExpressionAttributeValues": {":prefix": {"S": PREFIX}},
        }
        while True:
            answer = self._ddb.scan(**kwargs)
            for item in answer.get("Items", []):
                items.append(
                    {
                        "principal": item["lease_key"]["S"].removeprefix(PREFIX),
                        "tenant": item["tenant"]["S"],
                        "updated_at": item.get("updated_at", {}).get("S", ""),
                    }
                )
            if "LastEvaluatedKey" not in answer:
                break
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        return sorted(items, key=lambda i: i["principal"])
