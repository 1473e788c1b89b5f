"""Suite-wide: moto's thread-safety fixes (jobsched/local/moto_fixes.py) in every test process, as
in the embedded mode and the benchmarks: the dispatcher and the worker write from threads. And each
test starts with an empty worker-container cache of tenant limits, as a new container does."""

import pytest

from jobsched.aws.tenant_limits import CONTAINER_CACHE
from jobsched.local import moto_fixes

moto_fixes.apply()


@pytest.fixture(autouse=True)
def _fresh_container_limits():
    """A limit read against one test's tables must not answer for the next test's."""
    CONTAINER_CACHE.forget()
    yield
    CONTAINER_CACHE.forget()
