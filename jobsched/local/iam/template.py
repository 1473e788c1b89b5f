"""A synthesized template read as the functions' roles see it: each function's policy statements,
with every CloudFormation intrinsic resolved, and the key that encrypts each resource.

Resources are named the way :mod:`jobsched.local.iam.requests` names what a call reached: a resource
that a function's environment variable names (``JOBSCHED_RUNS_TABLE: {"Ref": "TablesRuns..."}``) is
called ``<JOBSCHED_RUNS_TABLE>``, any other ``<LogicalId>``; the partition, region and account are
:data:`PARTITION`, :data:`REGION` and :data:`ACCOUNT`. So a grant on ``{"Fn::GetAtt": ["TablesRuns...",
"Arn"]}`` reads ``arn:aws:dynamodb:us-east-1:123456789012:table/<JOBSCHED_RUNS_TABLE>``, the same
string a call to the table the function found in that variable is recorded as: code and template
meet exactly where they meet on AWS, in the function's environment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobsched.local.iam.policy import Statement, statements_of
from jobsched.runtime.resources import CONTAINER_KIND, ENV_QUEUE_URL_PREFIX

PARTITION, REGION, ACCOUNT = "aws", "us-east-1", "123456789012"
PSEUDO = {
    "AWS::Partition": PARTITION,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "Jobsched",
    "AWS::NoValue": None,
}

#: The construct ids of the high and long queues' workers (infra/workers.py), in their functions'
#: logical ids, and the names they are judged as.
WORKER_CONSTRUCTS = {"WorkerHigh": "worker_high", "WorkerLong": "worker_long"}
#: The container pool's tasks (infra/containers.py) are judged as this function, against their task
#: role: the recorder attributes the container loop's calls to it (jobsched/local/iam/recorder.py).
CONTAINER_FUNCTION = "container_worker"
CONTAINER_QUEUE_ENV = ENV_QUEUE_URL_PREFIX + CONTAINER_KIND.upper()
CONTAINER_COMMAND = ("jobsched", "worker", "--pool", CONTAINER_KIND)


class TemplateError(ValueError):
    """The template holds something this reader cannot resolve (an unknown intrinsic or attribute)."""


def env_token(name: str) -> str:
    """How a resource named by the environment variable ``name`` is written on both sides of the
    evaluation (recorded calls and the template's policies): ``<JOBSCHED_RUNS_TABLE>``."""
    return f"<{name}>"


def _arn(service: str, resource: str, *, region: str = REGION, account: str = ACCOUNT) -> str:
    return f"arn:{PARTITION}:{service}:{region}:{account}:{resource}"


def _attribute(kind: str, name: str, attribute: str | None) -> str:
    """``Ref`` (attribute None) or ``Fn::GetAtt`` of a resource of type ``kind`` called ``name``."""
    forms: dict[str, dict[str | None, str]] = {
        "AWS::DynamoDB::Table": {None: name, "Arn": _arn("dynamodb", f"table/{name}")},
        "AWS::SQS::Queue": {
            None: f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
            "Arn": _arn("sqs", name),
            "QueueName": name,
            "QueueUrl": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
        },
        "AWS::S3::Bucket": {None: name, "Arn": f"arn:{PARTITION}:s3:::{name}"},
        "AWS::StepFunctions::StateMachine": {
            None: _arn("states", f"stateMachine:{name}"),
            "Arn": _arn("states", f"stateMachine:{name}"),
            "Name": name,
        },
        "AWS::SNS::Topic": {None: _arn("sns", name), "TopicArn": _arn("sns", name), "TopicName": name},
        "AWS::Logs::LogGroup": {None: name, "Arn": _arn("logs", f"log-group:{name}:*")},
        "AWS::KMS::Key": {None: name, "Arn": _arn("kms", f"key/{name}"), "KeyId": name},
        "AWS::Lambda::Function": {None: name, "Arn": _arn("lambda", f"function:{name}")},
        "AWS::Lambda::EventSourceMapping": {
            None: name,
            "Id": name,
            "EventSourceMappingArn": _arn("lambda", f"event-source-mapping:{name}"),
        },
        "AWS::IAM::Role": {None: name, "Arn": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}"},
        # The container pool (the capacity function's JOBSCHED_CAPACITY_CONTAINER_SERVICE and its grants
        # on the service); a service's ARN also names its cluster on AWS, not here: no call names it.
        "AWS::ECS::Cluster": {None: name, "Arn": _arn("ecs", f"cluster/{name}")},
        "AWS::ECS::Service": {None: _arn("ecs", f"service/{name}"), "Name": name},
    }
    try:
        return forms[kind][attribute]
    except KeyError:
        raise TemplateError(f"cannot resolve {attribute or 'Ref'} of a {kind}") from None


@dataclass
class Resolver:
    """Resolves intrinsics of one template; ``names`` maps a logical id to its symbolic name."""

    template: Mapping[str, Any]
    names: dict[str, str] = field(default_factory=dict)

    def name_of(self, logical_id: str) -> str:
        return self.names.get(logical_id, env_token(logical_id))

    def kind_of(self, logical_id: str) -> str:
        try:
            return str(self.template["Resources"][logical_id]["Type"])
        except KeyError:
            raise TemplateError(f"no resource {logical_id!r} in the template") from None

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {k: self.resolve(v) for k, v in value.items()}
        ((fn, arg),) = value.items()
        if fn == "Ref":
            if arg in PSEUDO:
                return PSEUDO[arg]
            return _attribute(self.kind_of(arg), self.name_of(arg), None)
        if fn == "Fn::GetAtt":
            logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return _attribute(self.kind_of(logical_id), self.name_of(logical_id), attribute)
        if fn == "Fn::Join":
            sep, parts = arg
            return sep.join(str(self.resolve(p)) for p in self.resolve(parts))
        if fn == "Fn::Split":
            sep, text = arg
            return str(self.resolve(text)).split(sep)
        if fn == "Fn::Select":
            index, items = arg
            return self.resolve(items)[int(self.resolve(index))]
        if fn == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else arg
            return self._sub(text, {k: self.resolve(v) for k, v in variables.items()})
        if fn.startswith("Fn::") or fn == "Condition":
            raise TemplateError(f"unsupported intrinsic {fn}")
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, text: str, variables: Mapping[str, Any]) -> str:
        out, rest = [], text
        while "${" in rest:
            before, _, after = rest.partition("${")
            name, _, rest = after.partition("}")
            out.append(before)
            if name in variables:
                out.append(str(variables[name]))
            elif name in PSEUDO:
                out.append(str(PSEUDO[name]))
            elif "." in name:
                logical_id, attribute = name.split(".", 1)
                out.append(_attribute(self.kind_of(logical_id), self.name_of(logical_id), attribute))
            else:
                out.append(self.resolve({"Ref": name}))
        return "".join(out) + rest


@dataclass(frozen=True)
class Role:
    """A function's role as evaluated: its statements and the literal environment it is given."""

    function: str
    logical_id: str
    statements: tuple[Statement, ...]
    raw_statements: tuple[dict[str, Any], ...]
    environment: Mapping[str, str]


@dataclass
class Roles:
    """Every function's role in one template, and the key of each encrypted resource."""

    roles: dict[str, Role]
    keys: dict[str, str]  # resource ARN (symbolic) -> ARN of the customer-managed key encrypting it
    consumed: set[tuple[str, str]] = field(default_factory=set)  # (function, queue ARN) it is mapped to

    def key_for(self, resource_arn: str) -> str | None:
        """The key that encrypts the resource ``resource_arn`` names (an index or object: its table or
        bucket), None when it is encrypted with an AWS-managed or AWS-owned key."""
        for arn, key in self.keys.items():
            if resource_arn == arn or resource_arn.startswith(arn + "/"):
                return key
        return None


def _function_ids(template: Mapping[str, Any]) -> dict[str, str]:
    """Function name -> logical id of its AWS::Lambda::Function, or of the container pool's
    AWS::ECS::TaskDefinition (``container_worker``: the task whose container runs
    :data:`CONTAINER_COMMAND`). A
    function is named by its handler (``functions.<name>.handler``); of the three running
    ``functions.worker.handler``, those whose constructs are ``WorkerHigh`` and ``WorkerLong``
    (infra/workers.py) are ``worker_high`` and ``worker_long``."""
    found: dict[str, str] = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::ECS::TaskDefinition":
            containers = resource["Properties"].get("ContainerDefinitions", [])
            if not containers or containers[0].get("Command") != list(CONTAINER_COMMAND):
                continue
            name = CONTAINER_FUNCTION
        elif resource["Type"] == "AWS::Lambda::Function":
            handler = str(resource["Properties"].get("Handler", ""))
            if not handler.startswith("functions.") or handler.count(".") != 2:
                continue
            name = handler.split(".")[1]
            if name == "worker":
                name = next((n for c, n in WORKER_CONSTRUCTS.items() if c in logical_id), name)
        else:
            continue
        if name in found:
            raise TemplateError(f"two functions are {name}: {found[name]} and {logical_id}")
        found[name] = logical_id
    return found


def _task_environment(resource: Mapping[str, Any]) -> dict[str, Any]:
    """The environment of a task definition's (first) container, as a mapping like a function's."""
    containers = resource["Properties"].get("ContainerDefinitions", [])
    if not containers:
        return {}
    return {item["Name"]: item["Value"] for item in containers[0].get("Environment", [])}


def _environment_and_role(resource: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """A function's environment variables and role, or a task definition's and its task role."""
    props = resource["Properties"]
    if resource["Type"] == "AWS::ECS::TaskDefinition":
        return _task_environment(resource), props.get("TaskRoleArn")
    return props.get("Environment", {}).get("Variables", {}), props["Role"]


_ENCRYPTION_PATHS = {
    "AWS::DynamoDB::Table": ("SSESpecification", "KMSMasterKeyId"),
    "AWS::SQS::Queue": ("KmsMasterKeyId",),
    "AWS::SNS::Topic": ("KmsMasterKeyId",),
    "AWS::StepFunctions::StateMachine": ("EncryptionConfiguration", "KmsKeyId"),
}


_ARN_ATTRIBUTE = {"AWS::StepFunctions::StateMachine": None, "AWS::SNS::Topic": "TopicArn"}


def _key_reference(resource: Mapping[str, Any]) -> Any:
    props = resource.get("Properties", {})
    if resource["Type"] == "AWS::S3::Bucket":
        for rule in props.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", []):
            default = rule.get("ServerSideEncryptionByDefault", {})
            if default.get("SSEAlgorithm") in ("aws:kms", "aws:kms:dsse") and "KMSMasterKeyID" in default:
                return default["KMSMasterKeyID"]
        return None
    value: Any = props
    for step in _ENCRYPTION_PATHS.get(resource["Type"], ("-",)):
        value = value.get(step) if isinstance(value, Mapping) else None
    return value


def _listed(value: Any) -> list[Any]:
    return [value] if isinstance(value, Mapping) else list(value)


def _referenced_id(value: Any) -> str | None:
    if isinstance(value, Mapping):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            att = value["Fn::GetAtt"]
            return str(att[0] if isinstance(att, list) else att.split(".")[0])
    return None


def _alias_in(value: Any, resources: Mapping[str, Any]) -> str:
    """The logical id of the alias a mapping's ``FunctionName`` names by ``<function name>:<alias>``
    (CDK writes ``Fn::Join`` of the name it selects from the alias's ``Ref``), "" when none."""
    if isinstance(value, Mapping):
        ref = value.get("Ref")
        if isinstance(ref, str) and resources.get(ref, {}).get("Type") == "AWS::Lambda::Alias":
            return ref
        return next((found for v in value.values() if (found := _alias_in(v, resources))), "")
    if isinstance(value, list):
        return next((found for v in value if (found := _alias_in(v, resources))), "")
    return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def read_roles(template: Mapping[str, Any]) -> Roles:
    """Every function's role policy in ``template`` (a synthesized jobsched stack), resolved."""
    resources = template["Resources"]
    roles: dict[str, Role] = {}
    names: dict[str, str] = {}
    environments: dict[str, dict[str, Any]] = {}
    for function, logical_id in _function_ids(template).items():
        variables, _ = _environment_and_role(resources[logical_id])
        environments[function] = variables
        for var, value in variables.items():
            ref = _referenced_id(value)
            if ref is not None and ref not in PSEUDO:
                names.setdefault(ref, env_token(var))
    resolver = Resolver(template, names)
    for function, logical_id in _function_ids(template).items():
        role_id = _referenced_id(_environment_and_role(resources[logical_id])[1])
        documents = []
        role_props = resources[role_id]["Properties"] if role_id else {}
        if role_props.get("ManagedPolicyArns"):
            raise TemplateError(f"{function}'s role has managed policies: they cannot be read offline")
        documents += [p["PolicyDocument"] for p in role_props.get("Policies", [])]
        for resource in resources.values():
            if resource["Type"] != "AWS::IAM::Policy":
                continue
            attached = [_referenced_id(r) for r in resource["Properties"].get("Roles", [])]
            if role_id in attached:
                documents.append(resource["Properties"]["PolicyDocument"])
        resolved = [resolver.resolve(d) for d in documents]
        raw = tuple(s for d in resolved for s in _listed(d["Statement"]))
        environment = {
            k: v if isinstance(v, str) else _text(resolver.resolve(v))
            for k, v in environments[function].items()
        }
        roles[function] = Role(function, logical_id, tuple(statements_of(resolved)), raw, environment)
    keys: dict[str, str] = {}
    for logical_id, resource in resources.items():
        key_id = _referenced_id(_key_reference(resource))
        if key_id is None or resolver.kind_of(key_id) != "AWS::KMS::Key":
            continue
        kind, name = resource["Type"], resolver.name_of(logical_id)
        arn = _attribute(kind, name, _ARN_ATTRIBUTE.get(kind, "Arn"))
        keys[arn] = _attribute("AWS::KMS::Key", resolver.name_of(key_id), "Arn")
    by_id = {role.logical_id: name for name, role in roles.items()}
    consumed: set[tuple[str, str]] = set()
    for resource in resources.values():
        if resource["Type"] == "AWS::Lambda::EventSourceMapping":
            props = resource["Properties"]
            target = _referenced_id(props.get("FunctionName")) or _alias_in(
                props.get("FunctionName"), resources
            )
            if resources.get(target, {}).get("Type") == "AWS::Lambda::Alias":
                # a mapping that invokes an alias (the worker's ``live``) consumes for its function
                target = _referenced_id(resources[target]["Properties"].get("FunctionName")) or ""
            mapped = by_id.get(target)
            if mapped is not None:
                consumed.add((mapped, str(resolver.resolve(props["EventSourceArn"]))))
    if CONTAINER_FUNCTION in roles:
        # The container loop consumes its queue itself (receive, delete, re-time), as a mapping would.
        queue_id = _referenced_id(environments[CONTAINER_FUNCTION].get(CONTAINER_QUEUE_ENV))
        if queue_id is not None:
            consumed.add(
                (CONTAINER_FUNCTION, _attribute("AWS::SQS::Queue", resolver.name_of(queue_id), "Arn"))
            )
    return Roles(roles, keys, consumed)
