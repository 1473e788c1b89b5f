"""DynamoDB tables: one per spec in jobsched.runtime.resources, on-demand, PITR, encrypted, TTL, indexes."""

from __future__ import annotations

import pytest

from jobsched.runtime.resources import TABLES, TableSpec


def _table(synth, spec: TableSpec) -> dict:
    return synth.template["Resources"][synth.logical_id(synth.stack.tables.table(spec))]["Properties"]


def test_one_table_per_spec(synth):
    # Given the synthesized stack / When counting tables / Then there is one per TableSpec
    synth.assertions.resource_count_is("AWS::DynamoDB::Table", len(TABLES))


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.logical_name)
def test_table_is_on_demand_with_pitr_and_encryption(synth, spec):
    props = _table(synth, spec)
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.logical_name)
def test_table_keys_match_the_spec(synth, spec):
    props = _table(synth, spec)
    expected = [{"AttributeName": spec.partition.name, "KeyType": "HASH"}]
    if spec.sort:
        expected.append({"AttributeName": spec.sort.name, "KeyType": "RANGE"})
    assert props["KeySchema"] == expected
    assert sorted(props["AttributeDefinitions"], key=str) == sorted(spec.attribute_definitions(), key=str)


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.logical_name)
def test_ttl_is_enabled_exactly_where_records_expire(synth, spec):
    ttl = _table(synth, spec).get("TimeToLiveSpecification")
    if spec.ttl_attribute:
        assert ttl == {"AttributeName": spec.ttl_attribute, "Enabled": True}
    else:
        assert ttl is None


@pytest.mark.parametrize("spec", [s for s in TABLES if s.indexes], ids=lambda s: s.logical_name)
def test_secondary_indexes_match_the_spec(synth, spec):
    # Given a spec with indexes / Then the table has the same GSIs, keys and projections (the local
    # mode creates the same ones from the same spec, so cloud and laptop cannot drift)
    indexes = {i["IndexName"]: i for i in _table(synth, spec)["GlobalSecondaryIndexes"]}
    assert set(indexes) == {i.name for i in spec.indexes}
    for index in spec.indexes:
        got = indexes[index.name]
        assert got["KeySchema"][0] == {"AttributeName": index.partition.name, "KeyType": "HASH"}
        if index.sort:
            assert got["KeySchema"][1] == {"AttributeName": index.sort.name, "KeyType": "RANGE"}
        assert got["Projection"]["ProjectionType"] == index.projection


def test_the_runs_table_has_no_tenant_index(synth):
    # A tenant's runs are listed through the run feed items (docs/decisions/0004), not a GSI entry per run
    from jobsched.runtime.resources import RUNS_TABLE

    indexes = [i["IndexName"] for i in _table(synth, RUNS_TABLE)["GlobalSecondaryIndexes"]]
    assert indexes == ["dead_letter_index"]


def test_tables_are_retained_on_stack_deletion_by_default(synth):
    for spec in TABLES:
        logical_id = synth.logical_id(synth.stack.tables.table(spec))
        assert synth.template["Resources"][logical_id]["DeletionPolicy"] == "Retain"
