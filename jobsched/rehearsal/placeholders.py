"""Placeholder models for the resource types moto's CloudFormation does not know (gap ``unsupported-types``).

moto skips such a resource, so a ``Ref`` or ``GetAtt`` of it fails the whole create. A placeholder
answers both -- ARNs and ids shaped as AWS's -- and keeps the resource's properties; it creates nothing
and enforces nothing (the rehearsal's bridge and ticks stand in for the API and the schedules).
"""

from __future__ import annotations

import re
from typing import Any

#: Types moto's CloudFormation does not know (it skips them, so a ``Ref``/``GetAtt`` of one fails the
#: create). Each becomes a placeholder that answers ``Ref`` and ``GetAtt`` and keeps its properties;
#: the few whose effect the product relies on at run time are also applied to moto's own backend
#: (:data:`APPLIED`).
PLACEHOLDER_TYPES = (
    "AWS::ApiGatewayV2::Api",
    "AWS::ApiGatewayV2::Integration",
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Stage",
    "AWS::ApplicationAutoScaling::ScalableTarget",
    "AWS::ApplicationAutoScaling::ScalingPolicy",
    "AWS::CloudWatch::Alarm",
    "AWS::ECS::ClusterCapacityProviderAssociations",
    "AWS::S3::BucketPolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::QueuePolicy",
    "AWS::Scheduler::Schedule",
    "AWS::Scheduler::ScheduleGroup",
)


_SCHEDULER_ARN = "arn:{partition}:scheduler:{region}:{account}:{kind}/{name}"


class Placeholder:
    """Base of the placeholder models (one subclass per type, made by :func:`_placeholder_class`)."""

    cfn_type = ""
    properties: dict[str, Any]

    def __init__(self, name: str, properties: dict[str, Any], account_id: str, region: str):
        self.name = name
        self.properties = properties
        self.account_id = account_id
        self.region = region

    @property
    def physical_resource_id(self) -> str:
        return self.name

    def get_cfn_attribute(self, attribute: str) -> str:
        from moto.utilities.utils import get_partition

        partition = get_partition(self.region)
        service, kind = self.cfn_type.split("::")[1:]
        if self.cfn_type == "AWS::ApiGatewayV2::Api":
            if attribute == "ApiEndpoint":
                return f"https://{self.name}.execute-api.{self.region}.amazonaws.com"
            if attribute == "ApiId":
                return self.name
        if self.cfn_type == "AWS::Scheduler::ScheduleGroup" and attribute == "Arn":
            return _SCHEDULER_ARN.format(
                partition=partition,
                region=self.region,
                account=self.account_id,
                kind="schedule-group",
                name=self.name,
            )
        if attribute == "Arn":
            where = f"{self.region}:{self.account_id}"
            return f"arn:{partition}:{service.lower()}:{where}:{kind.lower()}:{self.name}"
        return f"{self.name}-{attribute}"


def _short_name(cfn_type: str, resource_name: str, properties: dict[str, Any]) -> str:
    if cfn_type.startswith("AWS::Scheduler::") and properties.get("Name"):
        return str(properties["Name"])
    if cfn_type == "AWS::ApiGatewayV2::Api":  # an API id: 10 lower-case characters on AWS
        return re.sub(r"[^a-z0-9]", "", resource_name.lower())[-10:]
    return resource_name


def _placeholder_class(cfn_type: str) -> type:
    from moto.core.common_models import CloudFormationModel

    def create(
        cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **_: Any
    ) -> Any:
        properties = dict(cloudformation_json.get("Properties") or {})
        return cls(_short_name(cfn_type, resource_name, properties), properties, account_id, region_name)

    def update(
        cls: Any, original_resource: Any, new_resource_name: str, cloudformation_json: Any, *_: Any
    ) -> Any:
        original_resource.properties = dict(cloudformation_json.get("Properties") or {})
        return original_resource

    def delete(cls: Any, *_: Any) -> None:
        return None

    return type(
        "Placeholder" + cfn_type.replace("::", ""),
        (Placeholder, CloudFormationModel),
        {
            "cfn_type": cfn_type,
            "cloudformation_type": staticmethod(lambda: cfn_type),
            "cloudformation_name_type": staticmethod(lambda: ""),
            "has_cfn_attr": classmethod(lambda cls, attr: True),
            "create_from_cloudformation_json": classmethod(create),
            "update_from_cloudformation_json": classmethod(update),
            "delete_from_cloudformation_json": classmethod(delete),
            "is_created": lambda self: True,
        },
    )


def register_placeholders() -> None:
    """Make moto's CloudFormation create a placeholder for each type of :data:`PLACEHOLDER_TYPES`."""
    from moto.cloudformation import parsing

    for cfn_type in PLACEHOLDER_TYPES:
        if cfn_type not in parsing.get_model_map():
            _placeholder_class(cfn_type)
    for cached in (parsing.get_model_list, parsing.get_model_map, parsing.get_name_type_map):
        cached.cache_clear()
