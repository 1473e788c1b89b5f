"""Suite-wide: moto's fixes (jobsched/local/moto_fixes/, decision 0042) in every test process, as
in the embedded mode and the benchmarks: the dispatcher and the worker write from threads. And each
test starts with an empty worker-container cache of tenant limits, as a new container does.

Every AWS call a function makes in the session is recorded (jobsched/local/iam/recorder.py), in this
process and in the embedded-mode processes the end-to-end tests start (``IAM_CALLS_DIR``); the last
test, tests/infra/test_permissions_by_use.py, checks each against the function's role (decision 0038).

The suite runs on several pytest-xdist workers (``make test``, ``make test-fast``; decision 0044):
- every worker records into the same ``IAM_CALLS_DIR`` (its own ``<pid>.json``, and the test files it
  collected in ``<pid>.paths``), and the permissions check, which judges the whole run, is left out of
  a parallel run and run after it (``make test`` does) as its own session on that directory;
- the tests marked ``serial`` (:data:`SERIAL`: real-time assertions a busy CPU breaks) run after the
  parallel run too, before the check, in two processes side by side (``tests/serial.py``'s lanes);
- a test that uses a fixture wider than a function (a synthesized app, a running ``jobsched dev``, a
  module's embedded mode) is grouped with the tests that share it (``--dist loadgroup``), so the
  fixture is built once, on one worker; the other tests are spread one by one.
"""

import inspect
import os
import sys
import time
from pathlib import Path

import pytest

from jobsched.aws.tenant_limits import CONTAINER_CACHE
from jobsched.local import botocore_loader, collector, moto_fixes
from jobsched.local.iam import recorder
from jobsched.runtime import observability
from tests.serial import LAST, SERIAL, serial_files

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
#: Beside each ``<pid>.json`` recording: the test files that process's session collected.
PATHS_SUFFIX = ".paths"


moto_fixes.apply()
botocore_loader.share()  # each test's new session reads the models parsed once
SESSION_RECORDING = recorder.install()
if not os.environ.get(recorder.ENV_CALLS_DIR):
    # A directory of this session's own (`make iam-report` reads the newest): a session running beside
    # this one in the same checkout keeps its recordings. The xdist workers inherit the variable.
    os.environ[recorder.ENV_CALLS_DIR] = str(
        ROOT / ".iam-calls" / "pytest" / f"{time.time_ns()}-{os.getpid()}"
    )
Path(os.environ[recorder.ENV_CALLS_DIR]).mkdir(parents=True, exist_ok=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "units: a test of tests/api that asserts capacity units: the fakes reached as a DynamoDB client",
    )
    # The functions' log lines go to the process's own stdout (pytest's capture shows them in each
    # test's report), never into a test's capsys: threads some tests leave running (moto's Step
    # Functions executions, waiting out a heartbeat) log after their test has ended, and a line of
    # theirs in a CLI test's stdout is not the CLI's output (docs/testing.md).
    observability.set_log_stream(sys.__stdout__)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (aws_cdk, moto, boto3's models, Playwright, hypothesis...) lives as
    long as the process: frozen out of the garbage collector's sight, and the collector's thresholds
    those of the embedded mode's processes (:mod:`jobsched.local.collector`). A quarter of an xdist
    worker's CPU went to collections at CPython's defaults, most of it full ones walking that heap
    again (decision 0044, twelfth pass). Not in the xdist controller, which collects nothing."""
    collector.settle()


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


#: The seconds a bare ``slow`` mark stands for when the units are ordered (``slow(seconds=N)``: more).
SLOW_SECONDS = 10


def _xdist_group(item: pytest.Item) -> str | None:
    """The group of tests that must share ``item``'s worker: those sharing its widest fixture.

    A session fixture defined in a conftest groups the tests of that conftest's directory, one
    defined in a test module (or a module, class or package fixture) the tests of that file or
    package. Fixtures of pytest and its plugins (``tmp_path_factory``...) do not count: they are cheap.
    """
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    if fixtureinfo is None:
        return None
    group, widest = None, 0
    rank = {"class": 1, "module": 1, "package": 2, "session": 3}
    for name in fixtureinfo.names_closure:
        for fixturedef in fixtureinfo.name2fixturedefs.get(name, ()):
            scope = fixturedef.scope
            if scope not in rank or rank[scope] <= widest:
                continue
            defined_in = Path(inspect.getfile(fixturedef.func)).resolve()
            if not defined_in.is_relative_to(TESTS):
                continue
            if scope == "session" or scope == "package":
                where = defined_in.parent if defined_in.name == "conftest.py" else defined_in
            else:
                where = item.path
            group, widest = str(where.relative_to(ROOT)), rank[scope]
    return group


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The permissions check runs after every other test: it judges what they recorded. On an xdist
    worker it is left out (the run's other workers may still be recording): ``make test`` runs it
    after the parallel run, on the same ``IAM_CALLS_DIR``. Every other test gets its xdist group."""
    items.sort(key=lambda item: item.path.name == LAST)
    for item in items:
        if str(item.path.relative_to(ROOT)) in SERIAL:
            item.add_marker(pytest.mark.serial)
    if items and _is_xdist_worker(config):
        # The serial session collects only tests.serial's files: a serial test outside them would run
        # in neither part of make test.
        listed = set(serial_files())
        unlisted = sorted(
            {str(i.path.relative_to(ROOT)) for i in items if i.get_closest_marker("serial")} - listed
        )
        if unlisted:
            raise pytest.UsageError(
                f"serial tests in {', '.join(unlisted)}, which tests/serial.py does not list (it finds "
                f"files by the text `mark.serial`): add the file to SERIAL there"
            )
    if _is_xdist_worker(config):
        deselected = [item for item in items if item.path.name == LAST]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if item.path.name != LAST]
    groups = {item: _xdist_group(item) for item in items if item.get_closest_marker("xdist_group") is None}
    # A file's other tests go with its group too: they ran beside that fixture in one process, and may
    # depend on it unawares (tests/local/test_runner.py's own embedded modes build their clients from
    # the process environment, which the package's running machinery had set).
    by_file: dict[Path, str] = {}
    for item, group in groups.items():
        if group is not None:
            by_file.setdefault(item.path, group)
    for item, group in groups.items():
        group = group or by_file.get(item.path)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if _is_xdist_worker(config):
        items[:] = slow_units_first(items)


def _work_unit(item: pytest.Item) -> str:
    """What ``--dist loadgroup`` hands a worker at once: the item's xdist group, or the item alone."""
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "")) if marker else item.nodeid


def slow_units_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the work units that hold ``slow`` tests first, longest first, the rest after,
    each in its collection order (decision 0044, eighth and thirteenth passes). A unit's length is the
    sum over its files of the largest ``seconds`` their tests' ``slow`` marks give (a bare ``slow``:
    :data:`SLOW_SECONDS`). ``--dist loadgroup --no-loadscope-reorder`` (``make test``'s
    ``PYTEST_PARALLEL``; pytest-xdist's default re-sorts the units by their number of tests) hands them
    out in this order, one to each worker that asks: the long ones (an embedded mode, a browser, a
    synthesis) start first, the longest before them, and the thousands of short ones fill the workers'
    ends, so no worker starts a unit of a minute while the others are nearly done.

    A unit that waits (a file of it marked ``slow(waits=True)``: it spends its minute or two waiting on
    real time, a tick or an instant, with a core's tenth or less) never follows another that waits
    while a unit that does not is left: the next such unit goes between them (decision 0044,
    twenty-fourth pass). Handed out longest first alone, the four that wait longest started together
    and left a third of the two cores idle for a minute."""
    per_file: dict[tuple[str, Path], int] = {}
    waiting: set[str] = set()
    for item in items:
        marker = item.get_closest_marker("slow")
        if marker is not None:
            key = (_work_unit(item), item.path)
            per_file[key] = max(per_file.get(key, 0), int(marker.kwargs.get("seconds", SLOW_SECONDS)))
            if marker.kwargs.get("waits"):
                waiting.add(key[0])
    length: dict[str, int] = {}
    for (unit, _path), seconds in per_file.items():
        length[unit] = length.get(unit, 0) + seconds
    longest_first = sorted(length, key=lambda unit: -length[unit])  # sorted() keeps ties in order
    order: list[str] = []
    while longest_first:
        pick = 0
        if order and order[-1] in waiting and longest_first[0] in waiting:
            pick = next((i for i, unit in enumerate(longest_first) if unit not in waiting), 0)
        order.append(longest_first.pop(pick))
    rank = {unit: index for index, unit in enumerate(order)}
    return sorted(items, key=lambda item: rank.get(_work_unit(item), len(rank)))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) and not _is_xdist_worker(config):
        terminalreporter.write_line(
            f"{LAST} is not run on xdist workers: it judges the whole run, so it runs after it, as "
            f"make test does: {recorder.ENV_CALLS_DIR}={os.environ[recorder.ENV_CALLS_DIR]} "
            f"python -m pytest -m serial $(python -m tests.serial)"
        )


def collected_paths(directory: str | os.PathLike[str]) -> set[str]:
    """Every test file the sessions that recorded into ``directory`` collected (``<pid>.paths``)."""
    out: set[str] = set()
    for path in Path(directory).glob(f"*{PATHS_SUFFIX}"):
        out.update(line for line in path.read_text().splitlines() if line)
    return out


def pytest_sessionfinish(session: pytest.Session) -> None:
    """This process's recording beside the child processes' (``make iam-report`` reads them), and the
    test files its session collected (the permissions check, run after a parallel run, reads them)."""
    directory = Path(os.environ[recorder.ENV_CALLS_DIR])
    recorder.write(SESSION_RECORDING, directory)
    paths = sorted({str(item.path) for item in getattr(session, "items", ())})
    if paths:
        (directory / f"{os.getpid()}{PATHS_SUFFIX}").write_text("\n".join(paths) + "\n")


@pytest.fixture(autouse=True)
def _fresh_container_limits():
    """A limit read against one test's tables must not answer for the next test's."""
    CONTAINER_CACHE.forget()
    yield
    CONTAINER_CACHE.forget()
