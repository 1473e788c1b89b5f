"""The Table port's contract: jobsched.testing.InMemoryTables and jobsched.aws.metering.Dynamo (on moto)
answer every call alike. Each test runs on both (``[memory]``, ``[moto]``).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from jobsched.aws.errors import AwsRefused
from jobsched.ports.tables import ConditionFailed


def runs(backend):
    return backend.settings.runs_table


def leases(backend):
    return backend.settings.leases_table


# --- conditional put: one run per occurrence -----------------------------------------------------


def test_a_conditional_put_creates_once_and_a_second_gets_the_stored_item(backend):
    # Given a run item put under "attribute_not_exists"
    item = {"job_id": "j1", "run_key": "r1", "state": "queued", "attempt": 1}
    backend.table.put(runs(backend), item, condition="attribute_not_exists(run_key)")
    # When the same put comes again with other content
    with pytest.raises(ConditionFailed) as refused:
        backend.table.put(
            runs(backend), {**item, "state": "running"}, condition="attribute_not_exists(run_key)"
        )
    # Then it is refused with the item as stored, and nothing changed
    assert refused.value.existing == {"job_id": "j1", "run_key": "r1", "state": "queued", "attempt": 1}
    assert (
        backend.table.get(runs(backend), {"job_id": "j1", "run_key": "r1"}, consistent=True)["state"]
        == "queued"
    )


def test_a_refused_put_on_a_missing_item_carries_none(backend):
    with pytest.raises(ConditionFailed) as refused:
        backend.table.put(leases(backend), {"lease_key": "k"}, condition="attribute_exists(lease_key)")
    assert refused.value.existing is None
    assert backend.table.get(leases(backend), {"lease_key": "k"}) is None


def test_numbers_come_back_as_decimals_and_floats_keep_their_value(backend):
    backend.table.put(
        leases(backend), {"lease_key": "n", "i": 3, "f": 0.1, "nested": {"l": [1, "a", True, None]}}
    )
    got = backend.table.get(leases(backend), {"lease_key": "n"}, consistent=True)
    assert got == {
        "lease_key": "n",
        "i": Decimal(3),
        "f": Decimal("0.1"),
        "nested": {"l": [Decimal(1), "a", True, None]},
    }
    assert isinstance(got["i"], Decimal)


# --- fenced update: the attempt number guards every write -----------------------------------------


def test_a_fenced_update_applies_only_to_the_current_attempt(backend):
    key = {"job_id": "j1", "run_key": "r1"}
    backend.table.put(runs(backend), {**key, "state": "running", "attempt": 2, "lease_owner": "w2"})
    # When the owner of attempt 1 (taken over) tries to finish it
    with pytest.raises(ConditionFailed) as refused:
        backend.table.update(
            runs(backend),
            key,
            "SET #s = :done, #out = :o",
            condition="attempt = :a AND lease_owner = :me",
            names={"#s": "state", "#out": "output"},
            values={":done": "succeeded", ":o": "old", ":a": 1, ":me": "w1"},
        )
    # Then the new owner's item is untouched, and came back with the refusal
    assert refused.value.existing["attempt"] == 2
    assert backend.table.get(runs(backend), key, consistent=True) == {
        **key,
        "state": "running",
        "attempt": 2,
        "lease_owner": "w2",
    }
    # And the current owner's write goes through, returning the new image
    new = backend.table.update(
        runs(backend),
        key,
        "SET #s = :done, #out = :o REMOVE lease_owner",
        condition="attempt = :a AND lease_owner = :me",
        names={"#s": "state", "#out": "output"},
        values={":done": "succeeded", ":o": {"n": 1}, ":a": 2, ":me": "w2"},
    )
    assert new == {**key, "state": "succeeded", "attempt": 2, "output": {"n": 1}}


def test_update_expressions_arithmetic_if_not_exists_list_append_add_and_remove(backend):
    key = {"lease_key": "u"}
    first = backend.table.update(
        leases(backend),
        key,
        "SET tries = if_not_exists(tries, :zero) + :one, "
        "history = list_append(if_not_exists(history, :empty), :h) ADD hits :one, tags :tag",
        values={":zero": 0, ":one": 1, ":empty": [], ":h": ["a"], ":tag": {"x"}},
    )
    assert first == {"lease_key": "u", "tries": 1, "history": ["a"], "hits": 1, "tags": {"x"}}
    third = backend.table.update(
        leases(backend),
        key,
        "SET tries = tries + :one, history = list_append(history, :h) ADD hits :one DELETE tags :tag",
        values={":one": 1, ":h": ["b"], ":tag": {"x"}},
    )
    assert third == {"lease_key": "u", "tries": 2, "history": ["a", "b"], "hits": 2}
    fourth = backend.table.update(
        leases(backend), key, "REMOVE history[0], hits SET tries = tries - :one", values={":one": 1}
    )
    assert fourth == {"lease_key": "u", "tries": 1, "history": ["b"]}


def test_an_update_of_a_missing_item_creates_it_unless_a_condition_refuses(backend):
    with pytest.raises(ConditionFailed) as refused:
        backend.table.update(
            leases(backend),
            {"lease_key": "m"},
            "SET a = :a",
            condition="attribute_exists(lease_key)",
            values={":a": 1},
        )
    assert refused.value.existing is None
    assert backend.table.get(leases(backend), {"lease_key": "m"}) is None
    assert backend.table.update(leases(backend), {"lease_key": "m"}, "SET a = :a", values={":a": 1}) == {
        "lease_key": "m",
        "a": 1,
    }


def test_a_refused_delete_keeps_the_item_and_carries_none(backend):
    backend.table.put(leases(backend), {"lease_key": "d", "owner": "a"})
    with pytest.raises(ConditionFailed) as refused:
        backend.table.delete(
            leases(backend),
            {"lease_key": "d"},
            condition="#o = :me",
            names={"#o": "owner"},
            values={":me": "b"},
        )
    assert refused.value.existing is None
    assert backend.table.delete(
        leases(backend), {"lease_key": "d"}, condition="#o = :me", names={"#o": "owner"}, values={":me": "a"}
    ) == {"lease_key": "d", "owner": "a"}
    assert backend.table.get(leases(backend), {"lease_key": "d"}) is None


@pytest.mark.parametrize(
    ("condition", "values", "holds"),
    [
        ("absent = :v", {":v": 1}, False),
        ("absent <> :v", {":v": 1}, True),
        ("absent < :v", {":v": 1}, False),
        ("n BETWEEN :a AND :b", {":a": 1, ":b": 5}, True),
        ("n IN (:a, :b)", {":a": 4, ":b": 5}, False),
        ("NOT (n > :a) OR s = :s", {":a": 10, ":s": "x"}, True),
        ("size(s) = :two AND size(l) = :two", {":two": 2}, True),
        ("begins_with(s, :p) AND contains(l, :e)", {":p": "a", ":e": "q"}, True),
        ("contains(s, :p)", {":p": "b"}, True),
        ("s < :t", {":t": "b"}, True),
        ("n = :s", {":s": "3"}, False),
        ("flag = :t", {":t": True}, True),
        ("m.deep[1] = :v", {":v": 7}, True),
        ("attribute_type(n, :n) AND attribute_not_exists(m.nope)", {":n": "N"}, True),
        ("#o = :v", {":v": 1}, False),
    ],
)
def test_conditions_hold_alike(backend, condition, values, holds):
    backend.table.put(
        leases(backend),
        {"lease_key": "c", "n": 3, "s": "ab", "l": ["q", "r"], "flag": True, "m": {"deep": [6, 7]}},
    )
    try:
        backend.table.update(
            leases(backend),
            {"lease_key": "c"},
            "SET seen = :one",
            condition=condition,
            names={"#o": "output"} if "#o" in condition else None,
            values={**values, ":one": 1},
        )
        held = True
    except ConditionFailed:
        held = False
    assert held is holds


def test_a_reserved_word_needs_a_placeholder(backend):
    with pytest.raises(AwsRefused) as error:
        backend.table.update(leases(backend), {"lease_key": "r"}, "SET output = :o", values={":o": 1})
    assert error.value.code == "ValidationException"
    assert backend.table.get(leases(backend), {"lease_key": "r"}) is None


def test_an_item_over_400_kb_is_refused(backend):
    with pytest.raises(AwsRefused) as error:
        backend.table.put(leases(backend), {"lease_key": "big", "blob": "x" * (400 * 1024 + 1)})
    assert error.value.code == "ValidationException"


def test_updating_a_key_attribute_is_refused(backend):
    backend.table.put(leases(backend), {"lease_key": "k1"})
    with pytest.raises(AwsRefused) as error:
        backend.table.update(leases(backend), {"lease_key": "k1"}, "SET lease_key = :k", values={":k": "k2"})
    assert error.value.code == "ValidationException"


# --- reads -------------------------------------------------------------------------------------------


def _seed_runs(backend):
    for i in range(7):
        backend.table.put(
            runs(backend),
            {
                "job_id": "j",
                "run_key": f"2026-03-0{i + 1}",
                "n": i,
                "state": "queued" if i % 2 else "skipped",
            },
        )
    backend.table.put(runs(backend), {"job_id": "other", "run_key": "2026-03-01", "n": 99})


def test_a_query_pages_in_sort_key_order_with_the_last_key(backend):
    _seed_runs(backend)
    page, last = backend.table.query(runs(backend), "job_id = :j", {":j": "j"}, limit=3)
    assert [i["n"] for i in page] == [0, 1, 2]
    assert last == {"job_id": "j", "run_key": "2026-03-03"}
    page, last = backend.table.query(runs(backend), "job_id = :j", {":j": "j"}, limit=3, start_key=last)
    assert [i["n"] for i in page] == [3, 4, 5]
    page, last = backend.table.query(runs(backend), "job_id = :j", {":j": "j"}, limit=3, start_key=last)
    assert [i["n"] for i in page] == [6]
    assert last is None


def test_a_query_backwards_between_bounds_with_a_filter_after_the_limit(backend):
    _seed_runs(backend)
    page, last = backend.table.query(
        runs(backend),
        "job_id = :j AND run_key BETWEEN :a AND :b",
        {":j": "j", ":a": "2026-03-02", ":b": "2026-03-06", ":q": "queued"},
        forward=False,
        limit=3,
        filter_expression="#s = :q",
        names={"#s": "state"},
    )
    # 06, 05, 04 read (the limit counts them before the filter); 06 and 04 kept (queued: odd n)
    assert [i["n"] for i in page] == [5, 3]
    assert last == {"job_id": "j", "run_key": "2026-03-04"}
    rest = backend.table.query_all(
        runs(backend), "job_id = :j AND begins_with(run_key, :p)", {":j": "j", ":p": "2026-03-0"}
    )
    assert [i["n"] for i in rest] == list(range(7))


def test_a_sparse_keys_only_index_holds_only_items_with_its_keys_and_projects_them(backend):
    jobs = backend.settings.jobs_table
    backend.table.put(
        jobs, {"tenant": "t", "job_id": "a", "due_shard": "s#1", "due_at": 20, "spec": {"big": 1}}
    )
    backend.table.put(jobs, {"tenant": "t", "job_id": "b", "due_shard": "s#1", "due_at": 10, "spec": {}})
    backend.table.put(jobs, {"tenant": "t", "job_id": "c", "spec": {}})  # not due: not in the index
    page, last = backend.table.query(
        jobs, "due_shard = :s AND due_at <= :now", {":s": "s#1", ":now": 15}, index="due_index"
    )
    assert page == [{"tenant": "t", "job_id": "b", "due_shard": "s#1", "due_at": 10}]
    assert last is None
    page, last = backend.table.query(jobs, "due_shard = :s", {":s": "s#1"}, index="due_index", limit=1)
    assert [i["job_id"] for i in page] == ["b"]
    assert last == {"tenant": "t", "job_id": "b", "due_shard": "s#1", "due_at": 10}


def test_a_scan_of_a_sparse_index_reads_only_the_items_with_its_keys(backend):
    # Given two dead-lettered runs (they carry the dead_letter_index keys) and one that is not
    for key, dead in (("r1", True), ("r2", False), ("r3", True)):
        keys = {"dl_tenant": "acme", "dl_at": f"2026-01-01T00:00:0{key[-1]}Z"} if dead else {}
        backend.table.put(runs(backend), {"job_id": "j1", "run_key": key, "state": "failed", **keys})
    # When the index is scanned
    found = backend.table.scan_all(runs(backend), index="dead_letter_index")
    # Then only the items on the index come back, whole (the index projects ALL)
    assert sorted(i["run_key"] for i in found) == ["r1", "r3"]
    assert all(i["state"] == "failed" for i in found)


def test_get_with_attributes_and_batch_reads_and_writes(backend):
    backend.table.batch_write(leases(backend), [{"lease_key": f"b{i}", "v": i, "w": "x"} for i in range(30)])
    assert backend.table.get(leases(backend), {"lease_key": "b3"}, attributes=["v"]) == {"v": 3}
    got = backend.table.batch_get(
        leases(backend),
        [{"lease_key": f"b{i}"} for i in range(0, 30, 3)] + [{"lease_key": "none"}],
        consistent=True,
    )
    assert sorted(int(i["v"]) for i in got) == list(range(0, 30, 3))
    everything = backend.table.scan_all(leases(backend))
    assert len(everything) == 30
    kept = backend.table.scan_all(
        leases(backend), filter_expression="begins_with(lease_key, :p)", values={":p": "b1"}
    )
    assert sorted(i["lease_key"] for i in kept) == ["b1"] + [f"b{i}" for i in range(10, 20)]


def test_an_item_past_its_ttl_is_still_read_until_the_sweep(backend):
    # DynamoDB removes expired items within days: code compares the TTL attribute with its clock
    expired = int(backend.clock.now().timestamp()) - 3600
    backend.table.put(leases(backend), {"lease_key": "old", "expires_at": expired})
    assert backend.table.get(leases(backend), {"lease_key": "old"}, consistent=True) is not None
    with pytest.raises(ConditionFailed):
        backend.table.put(
            leases(backend),
            {"lease_key": "old", "expires_at": expired + 7200},
            condition="attribute_not_exists(lease_key)",
        )
    backend.table.put(
        leases(backend),
        {"lease_key": "old", "expires_at": expired + 7200},
        condition="attribute_not_exists(lease_key) OR expires_at < :now",
        values={":now": int(backend.clock.now().timestamp())},
    )


def test_an_unknown_table_is_refused(backend):
    with pytest.raises(AwsRefused) as error:
        backend.table.get("no-such-table", {"k": "v"})
    assert error.value.code == "ResourceNotFoundException"
