"""The pools' capacity on AWS: event source mappings, the worker alias, the container service.

* a Lambda queue kind's ceiling is its event source mapping's ``ScalingConfig.MaximumConcurrency``
  (``get_event_source_mapping`` / ``update_event_source_mapping`` by the mapping's UUID);
* the container queue's is the ECS service's ``desiredCount`` (``describe_services`` /
  ``update_service``);
* provisioned concurrency sits on the worker function's alias (``get_`` / ``put_`` /
  ``delete_provisioned_concurrency_config`` with the alias as qualifier).

Clients are injected (lambda, ecs). A refused value (Lambda's ``InvalidParameterValueException``,
ECS's ``InvalidParameterException``, and a ceiling outside Lambda's documented 2..1000, checked here
before the call) becomes :class:`~jobsched.ports.capacity.CapacityRefused`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from jobsched.core.capacity import MAX_MAPPING_CONCURRENCY, MIN_MAPPING_CONCURRENCY
from jobsched.core.pools import CONTAINER_QUEUE
from jobsched.ports.capacity import CapacityRefused

_REFUSED = {"InvalidParameterValueException", "InvalidParameterException", "ValidationException"}
_MISSING = {"ProvisionedConcurrencyConfigNotFoundException", "ResourceNotFoundException"}


class AwsCapacity:
    """``mappings``: queue kind -> event source mapping UUID; ``alias``: (function name, alias) or
    None; ``service``: (cluster, service) of the container pool or None."""

    def __init__(
        self,
        lambda_client: Any,
        ecs_client: Any | None,
        mappings: Mapping[str, str],
        *,
        alias: tuple[str, str] | None = None,
        service: tuple[str, str] | None = None,
    ):
        self._lambda = lambda_client
        self._ecs: Any = ecs_client
        self._mappings = dict(mappings)
        self._alias = alias
        self._service = service if ecs_client is not None else None

    def kinds(self) -> tuple[str, ...]:
        return tuple(self._mappings) + ((CONTAINER_QUEUE,) if self._service else ())

    def ceiling(self, kind: str) -> int | None:
        if kind == CONTAINER_QUEUE and self._service:
            cluster, service = self._service
            found = self._ecs.describe_services(cluster=cluster, services=[service])["services"]
            return int(found[0]["desiredCount"]) if found else None
        uuid = self._mappings.get(kind)
        if uuid is None:
            return None
        mapping = self._lambda.get_event_source_mapping(UUID=uuid)
        value = (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency")
        return int(value) if value is not None else None

    def set_ceiling(self, kind: str, value: int) -> None:
        try:
            if kind == CONTAINER_QUEUE and self._service:
                cluster, service = self._service
                self._ecs.update_service(cluster=cluster, service=service, desiredCount=value)
                return
            uuid = self._mappings[kind]
            if not MIN_MAPPING_CONCURRENCY <= value <= MAX_MAPPING_CONCURRENCY:
                # Lambda's documented range (botocore checks only the minimum, moto neither)
                raise CapacityRefused(
                    f"{kind} ceiling {value} is outside {MIN_MAPPING_CONCURRENCY}..{MAX_MAPPING_CONCURRENCY}"
                )
            self._lambda.update_event_source_mapping(UUID=uuid, ScalingConfig={"MaximumConcurrency": value})
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _REFUSED:
                raise CapacityRefused(f"{kind} ceiling {value}: {exc}") from exc
            raise

    def provisioned(self) -> int:
        if self._alias is None:
            return 0
        function, qualifier = self._alias
        try:
            found = self._lambda.get_provisioned_concurrency_config(
                FunctionName=function, Qualifier=qualifier
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _MISSING:
                return 0
            raise
        return int(found.get("RequestedProvisionedConcurrentExecutions", 0))

    def set_provisioned(self, value: int) -> None:
        if value < 0:
            raise CapacityRefused(f"provisioned concurrency {value} is below 0")
        if self._alias is None:
            if value:
                raise CapacityRefused("no worker alias is wired: provisioned concurrency cannot be set")
            return
        function, qualifier = self._alias
        if value == 0:
            try:
                self._lambda.delete_provisioned_concurrency_config(FunctionName=function, Qualifier=qualifier)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in _MISSING:
                    raise
            return
        self._lambda.put_provisioned_concurrency_config(
            FunctionName=function, Qualifier=qualifier, ProvisionedConcurrentExecutions=value
        )
