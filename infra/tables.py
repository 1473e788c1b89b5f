"""DynamoDB tables, one per :data:`jobsched.runtime.resources.TABLES` spec.

On-demand billing, point-in-time recovery, encryption with DynamoDB's AWS-managed key or the stack's
customer-managed key (``encryption=cmk``, infra/encryption.py), TTL where the spec names an
attribute, and the spec's secondary indexes with their projections. Tables are retained on stack
deletion unless the deployment opts in to destroying them (``removal_policy_destroy``).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.encryption import AWS_KEY_REASONS
from infra.nag import skip_checkov
from jobsched.runtime.resources import TABLES, Key, TableSpec

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}
_AWS_MANAGED = dynamodb.TableEncryption.AWS_MANAGED
_PROJECTIONS = {
    "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
    "ALL": dynamodb.ProjectionType.ALL,
    "INCLUDE": dynamodb.ProjectionType.INCLUDE,
}


def _attribute(key: Key | None) -> dynamodb.Attribute | None:
    return dynamodb.Attribute(name=key.name, type=_TYPES[key.type]) if key else None


class Tables(Construct):
    """All jobsched tables; ``table(spec)`` returns the one built for a spec."""

    def __init__(
        self, scope: Construct, construct_id: str, *, destroy: bool = False, key: kms.IKey | None = None
    ) -> None:
        super().__init__(scope, construct_id)
        self._tables: dict[str, dynamodb.Table] = {}
        for spec in TABLES:
            self._tables[spec.logical_name] = self._build(spec, destroy, key)

    def _build(self, spec: TableSpec, destroy: bool, key: kms.IKey | None) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            spec.logical_name,
            partition_key=_attribute(spec.partition),
            sort_key=_attribute(spec.sort),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # CDK's grant_read_write_data adds the key's actions for every grantee of a CMK table.
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED if key else _AWS_MANAGED,
            encryption_key=key,
            time_to_live_attribute=spec.ttl_attribute,
            removal_policy=cdk.RemovalPolicy.DESTROY if destroy else cdk.RemovalPolicy.RETAIN,
        )
        for index in spec.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attribute(index.partition),
                sort_key=_attribute(index.sort),
                projection_type=_PROJECTIONS[index.projection],
                non_key_attributes=list(index.include) or None,
            )
        if key is None:
            skip_checkov(table, "CKV_AWS_119", AWS_KEY_REASONS["CKV_AWS_119"])
        return table

    def table(self, spec: TableSpec) -> dynamodb.Table:
        return self._tables[spec.logical_name]

    def environment(self, *specs: TableSpec) -> dict[str, str]:
        """``{env var: table name}`` for the given specs (all tables when none are given)."""
        return {spec.env_var: self.table(spec).table_name for spec in specs or TABLES}
