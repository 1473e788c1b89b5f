"""Usage that counts everything (decision 0059): what a function did for no one tenant, and its Lambda
duration and request, shared over the tenants it served; written once per (tenant, day) and
invocation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobsched.core.clock import FakeClock
from jobsched.core.usage import DayUsage
from jobsched.runtime import observability as obs
from jobsched.services.usage import FunctionUsage, TenantMeter, UsageRecorder, billed_gb_seconds

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def run_item(tenant: str) -> dict:
    """A run item as DynamoDB answers it (wire format)."""
    return {"id": {"S": f"r-{tenant}"}, "tenant": {"S": tenant}, "state": {"S": "queued"}}


class Store:
    """The usage items, as :class:`jobsched.ports.stores.UsageRecords` adds to them."""

    def __init__(self, meter: TenantMeter | None = None):
        self.added: list[DayUsage] = []
        self.meter = meter

    def add(self, usage: DayUsage) -> None:
        if self.meter is not None:  # the write itself, metered as the adapter would
            self.meter.record_dynamodb("UpdateItem", wcu=1.0)
            self.meter.record_items([run_item(usage.tenant)])
        self.added.append(usage)


def test_a_tenants_own_requests_are_its_own_and_the_shared_ones_split_by_the_items_it_had():
    """Given an invocation that made 2 WRU in acme's lane and 1 WRU in globex's, and a shard query
    (4 RRU, no lane) that returned two acme runs and one globex run,
    When it settles,
    Then acme has its 2 WRU and globex its 1; the 4 RRU are split 3:2 (acme: its request and two runs,
    globex: its request and one run), and together they add up to what the meter saw."""
    meter = TenantMeter()
    with obs.request_lane("acme"):
        meter.record_dynamodb("PutItem", wcu=2.0)
    with obs.request_lane("globex"):
        meter.record_dynamodb("PutItem", wcu=1.0)
    meter.record_dynamodb("Query", rcu=4.0)
    meter.record_items([run_item("acme"), run_item("acme"), run_item("globex")])

    settled = meter.settle()

    assert settled["acme"]["wru"] == 2.0 and settled["globex"]["wru"] == 1.0
    assert settled["acme"]["rru"] == pytest.approx(4.0 * 3 / 5)
    assert settled["globex"]["rru"] == pytest.approx(4.0 * 2 / 5)
    assert sum(u["wru"] for u in settled.values()) == sum(meter.wcu.values())
    assert sum(u["rru"] for u in settled.values()) == pytest.approx(sum(meter.rcu.values()))


def test_the_invocations_duration_and_request_are_shared_by_the_same_weights():
    """Given an invocation of 0.4002 s at 512 MB that touched three acme runs and one globex run,
    When it settles,
    Then Lambda's billed 0.401 s x 0.5 GB and its one request are split 3:1."""
    meter = TenantMeter()
    meter.record_items([run_item("acme")] * 3 + [run_item("globex")])
    meter.record_invocation(0.4002, 512)

    settled = meter.settle()

    assert billed_gb_seconds(0.4002, 512) == pytest.approx(0.401 * 0.5)
    assert settled["acme"]["gb_seconds"] == pytest.approx(0.401 * 0.5 * 3 / 4)
    assert settled["globex"]["gb_seconds"] == pytest.approx(0.401 * 0.5 / 4)
    assert settled["acme"]["invocations"] == pytest.approx(0.75)
    assert settled["globex"]["invocations"] == pytest.approx(0.25)


def test_an_invocation_that_served_no_tenant_carries_its_cost_to_the_next_one_that_does():
    """Given an idle tick (a lease write and an empty due query, 1 WRU and 0.5 RRU, 0.1 s) and then a
    tick that created an acme run (1 WRU in no lane, 0.1 s),
    When each settles,
    Then the first has no tenant to write for; the second gives acme both ticks' units, durations and
    invocations."""
    meter = TenantMeter()
    meter.record_dynamodb("UpdateItem", wcu=1.0)
    meter.record_dynamodb("Query", rcu=0.5)
    meter.record_invocation(0.1, 512)
    assert meter.settle() == {}

    meter.record_dynamodb("PutItem", wcu=1.0)
    meter.record_items([run_item("acme")])
    meter.record_invocation(0.1, 512)
    [(tenant, units)] = meter.settle().items()

    assert tenant == "acme"
    assert (units["wru"], units["rru"], units["invocations"]) == (2.0, 0.5, 2.0)
    assert units["gb_seconds"] == pytest.approx(2 * 0.1 * 0.5)
    assert meter.settle() == {}  # nothing left over


def test_the_event_source_mappings_receive_and_delete_are_shared_and_not_the_functions_own():
    """Given a worker batch of ten 1 KB records of which some succeeded,
    When the receive and delete are recorded,
    Then the batch's tenant is given 2 SQS requests (one 64 KiB receive, one delete) and the function's
    own request counts are unchanged; a batch with no success is given its receive alone."""
    meter = TenantMeter()
    meter.record_event_source([1024] * 10, deleted=True)
    with obs.request_lane("acme"):
        meter.record_dynamodb("UpdateItem", wcu=1.0)
    assert meter.settle()["acme"]["sqs"] == 2
    assert meter.sqs_billed_requests == 0 and not meter.requests.get("sqs.ReceiveMessage")

    meter.record_event_source([70 * 1024], deleted=False)
    with obs.request_lane("acme"):
        meter.record_dynamodb("UpdateItem", wcu=1.0)
    assert meter.settle()["acme"]["sqs"] == 2  # 70 KiB: two 64 KiB chunks, no delete


def test_a_flush_writes_once_per_tenant_with_its_share_and_its_own_write_unit():
    """Given a dispatcher invocation wrapped in FunctionUsage (512 MB) that made 3 WRU for no tenant and
    touched two acme runs and one globex run,
    When the invocation ends,
    Then one item per tenant is written, carrying its share of the WRU plus 1 WRU for its own write,
    its share of the duration and of the one request; the writes themselves are counted as counting's
    cost, not as a tenant's request of the next invocation."""
    meter = TenantMeter()
    store = Store(meter)
    usage = FunctionUsage(UsageRecorder(obs.NullSink(), FakeClock(T0), meter), store, 512)

    with usage.invocation():
        meter.record_dynamodb("PutItem", wcu=3.0)
        meter.record_items([run_item("acme"), run_item("acme"), run_item("globex")])

    by_tenant = {u.tenant: u for u in store.added}
    assert set(by_tenant) == {"acme", "globex"}
    assert by_tenant["acme"].wru == pytest.approx(2.0 + 1.0)
    assert by_tenant["globex"].wru == pytest.approx(1.0 + 1.0)
    assert by_tenant["acme"].lambda_requests + by_tenant["globex"].lambda_requests == pytest.approx(1.0)
    assert by_tenant["acme"].lambda_gb_seconds == pytest.approx(2 * by_tenant["globex"].lambda_gb_seconds)
    assert by_tenant["acme"].day == "2026-03-02"
    assert (meter.counting["wru"], meter.counting["requests"]) == (2.0, 2.0)
    assert meter.weights == {} and not meter.by_tenant  # the writes weigh no one next time


def test_a_plain_meter_counts_no_tenant_and_writes_nothing():
    """Given a function whose installed meter is a plain Meter (a test's), when an invocation ends, then
    no usage item is written."""
    from jobsched.aws.metering import Meter

    store = Store()
    usage = FunctionUsage(UsageRecorder(obs.NullSink(), FakeClock(T0), Meter()), store, 512)
    with usage.invocation():
        pass
    assert store.added == []


def test_the_estimate_prices_lambda_figures_when_the_item_has_them():
    """Given a day with 2 run-seconds, 0.75 GB-s and 3 Lambda requests, then the estimate prices the
    GB-seconds and requests (not the run-seconds); an item with no GB-seconds prices its run-seconds at
    the worker's memory, as before decision 0059."""
    new = DayUsage(
        tenant="t", day="2026-03-02", wru=10, run_seconds=2, lambda_gb_seconds=0.75, lambda_requests=3
    )
    old = DayUsage(tenant="t", day="2026-03-02", wru=10, run_seconds=2)
    assert round(new.estimated_usd(512) * 1e6, 4) == round(10 * 0.625 + 3 * 0.2 + 0.75 * 13.3334, 4)
    assert round(old.estimated_usd(512) * 1e6, 4) == round(10 * 0.625 + 2 * 0.5 * 13.3334, 4)
    assert DayUsage.from_item({**new.to_dict(512), "sqs_requests": "2.5"}).sqs_requests == 2.5
