"""Suite-wide: moto's fixes (jobsched/local/moto_fixes/, decision 0042) in every test process, as
in the embedded mode and the benchmarks: the dispatcher and the worker write from threads. And each
test starts with an empty worker-container cache of tenant limits, as a new container does.

Every AWS call a function makes in the session is recorded (jobsched/local/iam/recorder.py), in this
process and in the embedded-mode processes the end-to-end tests start (``IAM_CALLS_DIR``); the last
test, tests/infra/test_permissions_by_use.py, checks each against the function's role (decision 0038).
"""

import os
import time
from pathlib import Path

import pytest

from jobsched.aws.tenant_limits import CONTAINER_CACHE
from jobsched.local import moto_fixes
from jobsched.local.iam import recorder

moto_fixes.apply()
SESSION_RECORDING = recorder.install()
if not os.environ.get(recorder.ENV_CALLS_DIR):
    # A directory of this session's own (`make iam-report` reads the newest): a session running beside
    # this one in the same checkout keeps its recordings.
    calls = (
        Path(__file__).resolve().parent.parent / ".iam-calls" / "pytest" / f"{time.time_ns()}-{os.getpid()}"
    )
    calls.mkdir(parents=True)
    os.environ[recorder.ENV_CALLS_DIR] = str(calls)
LAST = "test_permissions_by_use.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The permissions check runs after every other test: it judges what they recorded."""
    items.sort(key=lambda item: item.path.name == LAST)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """This process's recording beside the child processes' (``make iam-report`` reads them)."""
    recorder.write(SESSION_RECORDING, os.environ[recorder.ENV_CALLS_DIR])


@pytest.fixture(autouse=True)
def _fresh_container_limits():
    """A limit read against one test's tables must not answer for the next test's."""
    CONTAINER_CACHE.forget()
    yield
    CONTAINER_CACHE.forget()
