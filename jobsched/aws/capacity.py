"""The pools' capacity on AWS: event source mappings, the worker alias, the container service.

* a Lambda queue kind's ceiling is its event source mapping's ``ScalingConfig.MaximumConcurrency``
  (``get_event_source_mapping`` / ``update_event_source_mapping`` by the mapping's UUID);
* the container queue's is the ECS service's ``desiredCount`` (``describe_services`` /
  ``update_service``), or -- given an Application Auto Scaling client, as in the CDK stack, where
  step scaling sets the desired count -- the minimum capacity of the service's scalable target
  (``describe_scalable_targets`` / ``register_scalable_target`` with ``MinCapacity`` only): a raised
  minimum makes Application Auto Scaling raise the desired count to it at once, a lowered one leaves
  the scale-in to the service's own policies;
* provisioned concurrency sits on the worker function's alias (``get_`` / ``put_`` /
  ``delete_provisioned_concurrency_config`` with the alias as qualifier).

Clients are injected (lambda, ecs, application-autoscaling). A refused value (Lambda's
``InvalidParameterValueException``, ECS's ``InvalidParameterException``, Application Auto Scaling's
``ValidationException``, a ceiling outside Lambda's documented 2..1000 and a minimum outside the
scalable target's 0..MaxCapacity, both checked here before the call) becomes
:class:`~jobsched.ports.capacity.CapacityRefused`.
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
#: The ECS service's dimension in Application Auto Scaling.
ECS_NAMESPACE, ECS_DIMENSION = "ecs", "ecs:service:DesiredCount"


class AwsCapacity:
    """``mappings``: queue kind -> event source mapping UUID; ``alias``: (function name, alias) or
    None; ``service``: (cluster, service) of the container pool or None. With ``autoscaling_client``
    the container pool's ceiling is its scalable target's MinCapacity (``ecs_client`` may be None)."""

    def __init__(
        self,
        lambda_client: Any,
        ecs_client: Any | None,
        mappings: Mapping[str, str],
        *,
        alias: tuple[str, str] | None = None,
        service: tuple[str, str] | None = None,
        autoscaling_client: Any | None = None,
    ):
        self._lambda = lambda_client
        self._ecs: Any = ecs_client
        self._scaling: Any = autoscaling_client
        self._mappings = dict(mappings)
        self._alias = alias
        self._service = service if (ecs_client or autoscaling_client) is not None else None

    def kinds(self) -> tuple[str, ...]:
        return tuple(self._mappings) + ((CONTAINER_QUEUE,) if self._service else ())

    def ceiling(self, kind: str) -> int | None:
        if kind == CONTAINER_QUEUE and self._service:
            if self._scaling is not None:
                target = self._scalable_target()
                return int(target["MinCapacity"]) if target else None
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
                if self._scaling is not None:
                    self._set_minimum(value)
                    return
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

    def _resource_id(self) -> str:
        assert self._service is not None
        cluster, service = self._service
        return f"service/{cluster}/{service}"

    def _scalable_target(self) -> dict[str, Any] | None:
        found = self._scaling.describe_scalable_targets(
            ServiceNamespace=ECS_NAMESPACE, ResourceIds=[self._resource_id()], ScalableDimension=ECS_DIMENSION
        )["ScalableTargets"]
        return found[0] if found else None

    def _set_minimum(self, value: int) -> None:
        """Only ``MinCapacity`` is sent: the maximum and the suspended state stay as the stack set them.
        A minimum above the maximum is refused by Application Auto Scaling (checked here first, moto
        does not check it); a service without a scalable target is refused rather than registered."""
        target = self._scalable_target()
        if target is None:
            raise CapacityRefused(f"{self._resource_id()} has no scalable target: its minimum cannot be set")
        if not 0 <= value <= int(target["MaxCapacity"]):
            raise CapacityRefused(
                f"{CONTAINER_QUEUE} minimum {value} is outside 0..{target['MaxCapacity']} "
                "(the target's maximum)"
            )
        self._scaling.register_scalable_target(
            ServiceNamespace=ECS_NAMESPACE,
            ResourceId=self._resource_id(),
            ScalableDimension=ECS_DIMENSION,
            MinCapacity=value,
        )

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
        try:
            self._lambda.put_provisioned_concurrency_config(
                FunctionName=function, Qualifier=qualifier, ProvisionedConcurrentExecutions=value
            )
        except ClientError as exc:
            # e.g. more than the account's unreserved concurrency can spare above its minimum of 100
            if exc.response.get("Error", {}).get("Code") in _REFUSED:
                raise CapacityRefused(f"provisioned concurrency {value}: {exc}") from exc
            raise
