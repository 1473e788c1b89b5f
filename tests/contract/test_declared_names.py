"""The name item of a declared job (decision 0060), over each backend's Table (the fake and DynamoDB on
moto): a claim is written once, a replacement and a release only while the claim names the id given,
and neither the tenant's job listing nor another tenant sees it."""

from __future__ import annotations

from datetime import timedelta

from jobsched.aws.jobs_store import JobsStore
from jobsched.core.models import Job
from tests.aws.conftest import T0


def _store(backend) -> JobsStore:
    return JobsStore(backend.table, backend.settings.jobs_table)


def _job(job_id: str, name: str, tenant: str = "acme") -> Job:
    return Job(
        id=job_id,
        tenant=tenant,
        name=name,
        schedule="0 3 * * *",
        target={"handler": "demo.echo"},
        created_at=T0,
        updated_at=T0,
    )


def test_a_name_is_claimed_once_and_names_its_job(backend):
    store = _store(backend)
    assert store.claim_name("acme", "nightly", "ja", T0) is True
    assert store.claim_name("acme", "nightly", "jb", T0 + timedelta(seconds=1)) is False
    assert store.name_ref("acme", "nightly") == ("ja", T0)
    assert store.name_ref("globex", "nightly") is None


def test_a_claim_is_replaced_and_released_only_while_it_names_the_id_given(backend):
    store = _store(backend)
    store.claim_name("acme", "nightly", "ja", T0)
    later = T0 + timedelta(minutes=5)
    assert store.claim_name("acme", "nightly", "jc", later, replacing="jb") is False
    assert store.claim_name("acme", "nightly", "jc", later, replacing="ja") is True
    assert store.name_ref("acme", "nightly") == ("jc", later)
    assert store.release_name("acme", "nightly", "ja") is False
    assert store.release_name("acme", "nightly", "jc") is True
    assert store.name_ref("acme", "nightly") is None


def test_declared_names_and_named_jobs_leave_the_name_items_out_of_the_listing(backend):
    # Given two jobs, one declared under its name, and another tenant's declared name
    store = _store(backend)
    store.create(_job("ja", "nightly"))
    store.create(_job("jb", "nightly"))
    store.create(_job("jz", "other"))
    store.claim_name("acme", "nightly", "ja", T0)
    store.claim_name("globex", "nightly", "jg", T0)
    # Then the tenant's declared names are its own, the jobs named "nightly" are both jobs,
    # and the listing of jobs holds jobs only
    assert store.declared_names("acme") == {"nightly": "ja"}
    assert sorted(j.id for j in store.named("acme", "nightly")) == ["ja", "jb"]
    jobs, _ = store.list("acme")
    assert sorted(j.id for j in jobs) == ["ja", "jb", "jz"]
