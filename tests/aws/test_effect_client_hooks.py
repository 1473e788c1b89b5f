"""Building the worker's idempotent effects per invocation must not add a hook to the shared client
each time: Powertools' persistence layer registers one on the client it is given, for good."""

from __future__ import annotations

import boto3

from jobsched.targets.context import IdempotentEffects


def _hooks(client) -> int:
    return len(list(client.meta.events._emitter._handlers.prefix_search("request-created.dynamodb.GetItem")))


def test_effects_built_per_invocation_register_powertools_hook_once(aws_environ):
    # Given one DynamoDB client, as a warm container (or the embedded mode) keeps for all invocations
    client = boto3.client("dynamodb", region_name="us-east-1")
    before = _hooks(client)
    # When 50 invocations each build their effects on it and use them (the layer is made on first use)
    effects = [IdempotentEffects(client, aws_environ.settings.idempotency_table) for _ in range(50)]
    layers = {id(e._persistence) for e in effects}
    # Then the client gained one hook, not 50 (each ran on every request of the client)
    assert _hooks(client) == before + 1
    assert len(layers) == 1


def test_a_layer_is_per_client_and_table(aws_environ):
    first, second = (
        boto3.client("dynamodb", region_name="us-east-1"),
        boto3.client("dynamodb", region_name="us-east-1"),
    )
    table = aws_environ.settings.idempotency_table
    assert IdempotentEffects(first, table)._persistence is not IdempotentEffects(second, table)._persistence
    assert (
        IdempotentEffects(first, table)._persistence
        is not IdempotentEffects(first, table + "-other")._persistence
    )
