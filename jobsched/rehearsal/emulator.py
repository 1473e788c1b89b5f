"""The emulated account's workarounds: patches to moto's CloudFormation, applied in its server process.

moto 5.2 deploys most of the stack, but not all of it: each :class:`Gap` below is something its
CloudFormation does differently from AWS, and :func:`apply` patches each one in the server process
the rehearsal starts (``jobsched.rehearsal.server``), so that ``cdk deploy`` gets as far on the
emulator as it would on AWS and the resources it creates are the ones AWS would create. The product
is never changed for the emulator's sake. docs/deploy.md ("Emulator gaps") says the same in prose;
docs/decisions/0037-deploy-rehearsal.md has a minimal reproduction of each upstream-worthy bug.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any

from jobsched.rehearsal.placeholders import PLACEHOLDER_TYPES, register_placeholders

__all__ = ["GAPS", "HARNESS_GAPS", "PLACEHOLDER_TYPES", "Gap", "apply", "restore", "substitute"]


@dataclass(frozen=True)
class Gap:
    """One way moto's CloudFormation differs from AWS, and what the rehearsal does about it."""

    key: str
    emulator: str  # what moto does
    workaround: str  # what the rehearsal does instead
    upstream: bool = False  # a moto bug worth reporting (decision 0037 has a reproduction)


GAPS = (
    Gap(
        "unsupported-types",
        "no CloudFormation support for 13 resource types (58 of the stack's resources); a GetAtt of one "
        "fails the create",
        "a placeholder model per type answers Ref and GetAtt and keeps the resource's properties",
    ),
    Gap(
        "sfn-definition-substitutions",
        "AWS::StepFunctions::StateMachine ignores DefinitionSubstitutions: ${LongQueueUrl} stays in the "
        "definition",
        "the substitutions are resolved into the definition on create and update",
        upstream=True,
    ),
    Gap(
        "sfn-backend",
        "with Step Functions execution switched on (the chunked jobs need it), the API serves another "
        "backend than the one CloudFormation creates state machines in: the deployed one is invisible",
        "CloudFormation creates, updates and deletes state machines in the backend the API serves",
        upstream=True,
    ),
    Gap(
        "dynamodb-ttl-pitr",
        "AWS::DynamoDB::Table ignores TimeToLiveSpecification and PointInTimeRecoverySpecification",
        "both are applied to the table moto creates",
        upstream=True,
    ),
    Gap(
        "kms-key-policy",
        "AWS::KMS::Key stores KeyPolicy as the template's object, not JSON text: every call on the key "
        "answers 500",
        "the policy is stored as JSON text",
        upstream=True,
    ),
    Gap(
        "kms-key-tags",
        "AWS::KMS::Key reads Tags in the KMS API's shape (TagKey, TagValue), not CloudFormation's (Key, "
        "Value): a tagged key fails the stack's create with a 500",
        "the key's tags are handed to moto as TagKey and TagValue",
        upstream=True,
    ),
    Gap(
        "previous-default-parameter",
        "an update that keeps a parameter's previous value (UsePreviousValue, as the CDK CLI sends for "
        "BootstrapVersion) fails with a 500 when that value was the template's default",
        "such a parameter keeps its default, as CloudFormation does",
        upstream=True,
    ),
    Gap(
        "update-drops-resource",
        "an update that changes a resource of a type moto cannot update (a table's DeletionPolicy, say) "
        "forgets the resource: every Ref to it then resolves to nothing, and the functions lose the "
        "variables that name it",
        "the resource is kept as it was (a property change moto cannot make is then caught by the checks)",
        upstream=True,
    ),
    Gap(
        "ec2-network-delete",
        "AWS::EC2::RouteTable, Route, SubnetRouteTableAssociation, VPCGatewayAttachment and "
        "InternetGateway are created but never deleted: deleting a stack with a VPC (the container "
        "pool's) fails with 'The vpc ... has dependencies and cannot be deleted'",
        "each of the five is deleted with the EC2 backend's own calls (disassociate, delete the route "
        "and the table, detach and delete the gateway)",
        upstream=True,
    ),
    Gap(
        "ecs-task-definition-properties",
        "AWS::ECS::TaskDefinition keeps only the family, containers, volumes and memory: the CPU, the "
        "runtime platform (arm64), the network mode, the compatibilities and the two roles are dropped",
        "they are applied to the task definition moto registers",
        upstream=True,
    ),
    Gap(
        "ecs-task-definition-update",
        "an update of AWS::ECS::TaskDefinition registers a new revision whose containers keep the "
        "template's PascalCase keys, and the AWS::ECS::Service that refers to it goes on running the "
        "old, deregistered revision (its own properties did not change)",
        "the new revision's containers are stored as ECS answers them, and the services of the old "
        "revision are moved to the new one, as CloudFormation's update of the service does",
        upstream=True,
    ),
    Gap(
        "sqs-mapping-invokes",
        "an SQS event source mapping invokes its function inside moto on every send (in Docker, which "
        "is not here), and a failed invoke moves the messages towards the DLQ",
        "mappings are created and readable but deliver nothing; the rehearsal's pollers deliver, as "
        "`jobsched dev` does",
    ),
)

#: Resource-type independent gaps the harness handles outside the server (counted in the summary).
HARNESS_GAPS = (
    Gap(
        "template-url-host",
        "a change set's TemplateURL is read path-style only when its host contains 'localhost'",
        "AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION names the server as localhost",
        upstream=True,
    ),
    Gap(
        "change-set-update",
        "an update through a change set fails",
        "deploys run with --method=direct (CreateStack/UpdateStack, what the CLI does without change sets)",
        upstream=True,
    ),
    Gap(
        "no-rollback",
        "a failed create is not rolled back",
        "the rehearsal deletes the stack itself after a failure",
    ),
)


def substitute(definition: str, substitutions: dict[str, Any]) -> str:
    """``${Name}`` in a Step Functions definition replaced as CloudFormation does
    (``DefinitionSubstitutions``); other ``${...}`` text is left alone."""
    for name, value in substitutions.items():
        definition = definition.replace("${" + name + "}", str(value))
    return definition


def _resolved_definition(properties: dict[str, Any]) -> None:
    if "Definition" in properties and "DefinitionString" not in properties:
        properties["DefinitionString"] = json.dumps(properties.pop("Definition"))
    substitutions = properties.get("DefinitionSubstitutions") or {}
    if substitutions and "DefinitionString" in properties:
        properties["DefinitionString"] = substitute(properties["DefinitionString"], substitutions)


#: What :func:`apply` replaced: (owner, attribute, the original), for :func:`restore`.
_REPLACED: list[tuple[Any, str, Any]] = []


_INHERITED = object()


def _replace(owner: Any, attribute: str, value: Any) -> None:
    _REPLACED.append((owner, attribute, owner.__dict__.get(attribute, _INHERITED)))
    setattr(owner, attribute, value)


def _wrap(model: Any, method: str, *, before: Any = None, after: Any = None) -> None:
    """Replace a CloudFormation classmethod of a moto model with one that calls ``before`` on the
    resource's JSON first and ``after(resource, json, account, region)`` on what it made."""
    original = getattr(model, method).__func__
    if getattr(original, "__isabstractmethod__", False):
        return  # moto does not update this type at all (nothing to wrap; it skips the resource)
    signature = inspect.signature(original)

    def wrapped(cls: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(cls, *args, **kwargs).arguments
        properties = arguments["cloudformation_json"].setdefault("Properties", {})
        if before is not None:
            before(properties)
        made = original(cls, *args, **kwargs)
        if after is not None:
            # moto's update answers None when it changed the resource in place
            resource = made if made is not None else arguments.get("original_resource")
            after(resource, properties, arguments["account_id"], arguments["region_name"])
        return made

    _replace(model, method, classmethod(wrapped))


def _patch_state_machine() -> None:
    from moto.stepfunctions.models import StateMachine

    for method in ("create_from_cloudformation_json", "update_from_cloudformation_json"):
        _wrap(StateMachine, method, before=_resolved_definition)


class _ServedBackends:
    """``stepfunctions_backends[account][region]`` as the API answers it (moto's ``get_backend``)."""

    def __getitem__(self, account_id: str) -> Any:
        from moto.stepfunctions.responses import get_backend

        class _Regions:
            def __getitem__(self, region: str) -> Any:
                return get_backend(account_id, region)

        return _Regions()


def _patch_state_machine_backend() -> None:
    from moto.stepfunctions import models

    _replace(models, "stepfunctions_backends", _ServedBackends())


def _apply_table_settings(table: Any, properties: dict[str, Any], account_id: str, region: str) -> None:
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[account_id][region]
    ttl = properties.get("TimeToLiveSpecification")
    if ttl:
        backend.update_time_to_live(table.name, ttl)
    pitr = properties.get("PointInTimeRecoverySpecification")
    if pitr:
        backend.update_continuous_backups(table.name, pitr)


def _patch_tables() -> None:
    from moto.dynamodb.models.table import Table

    for method in ("create_from_cloudformation_json", "update_from_cloudformation_json"):
        _wrap(Table, method, after=_apply_table_settings)


def _text_policy(properties: dict[str, Any]) -> None:
    if isinstance(properties.get("KeyPolicy"), dict):
        properties["KeyPolicy"] = json.dumps(properties["KeyPolicy"])


def _kms_tags(properties: dict[str, Any]) -> None:
    tags = properties.get("Tags")
    if isinstance(tags, list):
        properties["Tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} for t in tags if "Key" in t]


def _kms_key_properties(properties: dict[str, Any]) -> None:
    _text_policy(properties)
    _kms_tags(properties)


def _patch_kms_key() -> None:
    from moto.kms.models import Key

    _wrap(Key, "create_from_cloudformation_json", before=_kms_key_properties)


def _patch_mappings() -> None:
    from moto.awslambda.models import LambdaBackend
    from moto.sqs.models import sqs_backends

    create = LambdaBackend.create_event_source_mapping

    def create_quiet(self: Any, spec: dict[str, Any]) -> Any:
        mapping = create(self, spec)
        for queue in sqs_backends[self.account_id][self.region_name].queues.values():
            if queue.lambda_event_source_mappings.get(mapping.function_arn) is mapping:
                del queue.lambda_event_source_mappings[mapping.function_arn]
        return mapping

    _replace(LambdaBackend, "create_event_source_mapping", create_quiet)


def _patch_previous_parameters() -> None:
    from moto.cloudformation.models import CloudFormationBackend

    resolve = CloudFormationBackend._resolve_update_parameters

    def resolve_defaults(self: Any, instance: Any, incoming_params: list[dict[str, str]]) -> dict[str, str]:
        known = [
            p
            for p in incoming_params
            if not p.get("UsePreviousValue") or p["ParameterKey"] in instance.parameters
        ]
        return resolve(self, instance, known)

    _replace(CloudFormationBackend, "_resolve_update_parameters", resolve_defaults)


def _patch_kept_on_update() -> None:
    from moto.cloudformation import parsing

    update = parsing.parse_and_update_resource

    def update_or_keep(logical_id: str, resource_json: Any, resources_map: Any, **kwargs: Any) -> Any:
        updated = update(logical_id, resource_json, resources_map, **kwargs)
        return updated if updated is not None else resources_map[logical_id]

    _replace(parsing, "parse_and_update_resource", update_or_keep)


#: AWS::ECS::TaskDefinition properties moto's CloudFormation drops -> the attribute its model keeps.
_TASK_DEFINITION_PROPERTIES = {
    "Cpu": "cpu",
    "RuntimePlatform": "runtime_platform",
    "NetworkMode": "network_mode",
    "RequiresCompatibilities": "requires_compatibilities",
    "TaskRoleArn": "task_role_arn",
    "ExecutionRoleArn": "execution_role_arn",
}


def _apply_task_definition(task: Any, properties: dict[str, Any], account_id: str, region: str) -> None:
    for name, attribute in _TASK_DEFINITION_PROPERTIES.items():
        if name in properties:
            value = properties[name]
            if name == "RuntimePlatform":
                value = {k[0].lower() + k[1:]: v for k, v in value.items()}
            setattr(task, attribute, value)
    if "FARGATE" in properties.get("RequiresCompatibilities", []):
        task.compatibilities = ["EC2", "FARGATE"]


def _patch_task_definition() -> None:
    from moto.core.utils import pascal_to_camelcase, remap_nested_keys
    from moto.ecs.models import TaskDefinition, ecs_backends

    _wrap(TaskDefinition, "create_from_cloudformation_json", after=_apply_task_definition)
    update = getattr(TaskDefinition, "update_from_cloudformation_json").__func__  # noqa: B009

    def update_and_follow(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        made = update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name)
        if made is not original_resource:
            made.container_definitions = remap_nested_keys(made.container_definitions, pascal_to_camelcase)
            for service in ecs_backends[account_id][region_name].services.values():
                if service.task_definition == original_resource.arn:
                    service.task_definition = made.arn
        _apply_task_definition(made, cloudformation_json.get("Properties", {}), account_id, region_name)
        return made

    _replace(TaskDefinition, "update_from_cloudformation_json", classmethod(update_and_follow))


def _ec2(account_id: str, region: str) -> Any:
    from moto.ec2.models import ec2_backends

    return ec2_backends[account_id][region]


def _delete_route_table(self: Any, account_id: str, region: str) -> None:
    _ec2(account_id, region).delete_route_table(self.id)


def _delete_route(self: Any, account_id: str, region: str) -> None:
    backend = _ec2(account_id, region)
    if self.route_table.id in backend.route_tables:  # deleting the table took its routes with it
        backend.delete_route(
            self.route_table.id, self.destination_cidr_block or self.destination_ipv6_cidr_block
        )


def _delete_association(self: Any, account_id: str, region: str) -> None:
    _ec2(account_id, region).subnet_associations.pop(f"{self.route_table_id}:{self.subnet_id}", None)


def _delete_attachment(self: Any, account_id: str, region: str) -> None:
    if self.gateway_id and self.gateway_id.startswith("igw-"):
        _ec2(account_id, region).detach_internet_gateway(self.gateway_id, self.vpc_id)


def _delete_gateway(self: Any, account_id: str, region: str) -> None:
    _ec2(account_id, region).delete_internet_gateway(self.id)


def _patch_network_deletes() -> None:
    from moto.ec2.models.internet_gateways import InternetGateway
    from moto.ec2.models.route_tables import Route, RouteTable
    from moto.ec2.models.subnets import SubnetRouteTableAssociation
    from moto.ec2.models.vpn_gateway import VPCGatewayAttachment

    # moto's stack delete calls resource.delete(account, region) and retries what fails (a dependency)
    # in a later pass, so the order in which the five go does not matter.
    for model, delete in (
        (RouteTable, _delete_route_table),
        (Route, _delete_route),
        (SubnetRouteTableAssociation, _delete_association),
        (VPCGatewayAttachment, _delete_attachment),
        (InternetGateway, _delete_gateway),
    ):
        _replace(model, "delete", delete)


_applied = False


def apply() -> tuple[Gap, ...]:
    """Patch every gap of :data:`GAPS` into this process's moto (idempotent); return them."""
    global _applied
    if not _applied:
        register_placeholders()
        _patch_state_machine()
        _patch_state_machine_backend()
        _patch_tables()
        _patch_kms_key()
        _patch_mappings()
        _patch_previous_parameters()
        _patch_kept_on_update()
        _patch_network_deletes()
        _patch_task_definition()
        _applied = True
    return GAPS


def restore() -> None:
    """Undo :func:`apply` (the tests apply the patches in their own process). The placeholder types
    stay known to moto's CloudFormation: nothing else deploys those types."""
    global _applied
    while _REPLACED:
        owner, attribute, original = _REPLACED.pop()
        if original is _INHERITED:
            delattr(owner, attribute)
        else:
            setattr(owner, attribute, original)
    _applied = False
