"""The emulator boundary: what the embedded mode, the benchmarks, the deploy rehearsal and the test
suite change in moto before they use it, applied by :func:`apply` in every process that runs moto
(docs/decisions/0042-emulator-boundary.md lists each patch, its purpose and why).

The patches are grouped by purpose:

* :mod:`.correctness` — where moto does not do what AWS documents and our guarantees rely on it (a
  send lost during a delete, conditional writes that are not atomic, a long poll a second late). Each
  is a moto bug with an upstream-ready reproduction in the decision record, and
  ``tests/local/test_moto_bugs.py`` runs each against unpatched moto, so that a moto release that
  fixes one says which patch to drop.
* :mod:`.speed` (and :mod:`.speed_dynamodb`) — work and memory moto spends that its answers do not
  need; the answers stay moto's (``tests/local/test_moto_fixes.py`` compares them).
* :mod:`.keepalive` — moto's server keeps its connections open: werkzeug's closed each after one
  request, so every request cost a TCP connection and a thread, queued behind a burst's.
* :mod:`.lanes` — the fairness lanes: moto's server serves a few requests of one tenant at once, as
  AWS serves one tenant on capacity another tenant's burst does not use (decision 0033).

The patches reach into moto's internals, so they are written for one minor version of it:
:data:`SUPPORTED_MOTO`, the range requirements-dev.txt pins. :func:`apply` refuses any other version
(:class:`UnsupportedMotoVersion`) rather than patch what may have changed underneath.

:func:`apply` is idempotent.
"""

from __future__ import annotations

import re
from importlib import metadata

from jobsched.local.moto_fixes import correctness, keepalive, lanes, speed, speed_dynamodb
from jobsched.local.moto_fixes.correctness import (
    DYNAMODB_READS,
    DYNAMODB_WRITES,
    VISIBLE_MARGIN_SECONDS,
    WRITE_LOCK,
)
from jobsched.local.moto_fixes.lanes import LANE_CONCURRENCY, lane_slots
from jobsched.local.moto_fixes.speed import KEEP_DELETED_HANDLES, BoundedHandles
from jobsched.local.moto_fixes.speed_dynamodb import (
    KEEP_PARSED_EXPRESSIONS,
    PLAIN_ANSWERS,
    TEXT_ONLY_CHECKS,
)
from jobsched.runtime.resources import LANE_HEADER

__all__ = [
    "DYNAMODB_READS",
    "DYNAMODB_WRITES",
    "KEEP_DELETED_HANDLES",
    "KEEP_PARSED_EXPRESSIONS",
    "LANE_CONCURRENCY",
    "LANE_HEADER",
    "MOTO_BELOW",
    "MOTO_FROM",
    "PLAIN_ANSWERS",
    "SUPPORTED_MOTO",
    "TEXT_ONLY_CHECKS",
    "VISIBLE_MARGIN_SECONDS",
    "WRITE_LOCK",
    "BoundedHandles",
    "UnsupportedMotoVersion",
    "apply",
    "check_moto_version",
    "correctness",
    "installed_moto_version",
    "keepalive",
    "lane_slots",
    "lanes",
    "speed",
    "speed_dynamodb",
]

#: The moto versions the patches are written for: from this one (inclusive) ...
MOTO_FROM = (5, 2, 6)
#: ... to this one (exclusive): the next minor version may move what the patches reach into.
MOTO_BELOW = (5, 3)
#: The same range as a pip requirement; requirements-dev.txt pins moto to it (a test compares them).
SUPPORTED_MOTO = f">={'.'.join(map(str, MOTO_FROM))},<{'.'.join(map(str, MOTO_BELOW))}"


class UnsupportedMotoVersion(RuntimeError):
    """Raised by :func:`apply` (before it patches anything) when the installed moto is outside
    :data:`SUPPORTED_MOTO`, or its version cannot be read: the patches reach into moto's internals, and
    on another version they could miss a fix silently or break moto."""


def installed_moto_version() -> str:
    """The version of the moto distribution installed in this environment (without importing it)."""
    return metadata.version("moto")


def check_moto_version() -> None:
    """Raise :class:`UnsupportedMotoVersion` unless the installed moto is in :data:`SUPPORTED_MOTO`."""
    try:
        installed = installed_moto_version()
    except metadata.PackageNotFoundError:
        installed = "none"
    numbers = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", installed)
    version = tuple(int(part or 0) for part in numbers.groups()) if numbers else None
    if version is not None and version >= MOTO_FROM and version[:2] < MOTO_BELOW:
        return
    raise UnsupportedMotoVersion(
        f"moto {installed} is installed, but jobsched's moto fixes (jobsched/local/moto_fixes/) are "
        f"written for moto{SUPPORTED_MOTO}, the range requirements-dev.txt pins. Run `make install` "
        f"(or `pip install 'moto[server,dynamodb,s3,sqs,stepfunctions]{SUPPORTED_MOTO}'`) to get a "
        "supported moto. To move to another moto, on a branch: change MOTO_FROM/MOTO_BELOW in "
        "jobsched/local/moto_fixes/__init__.py and the pin in requirements-dev.txt together, then run "
        "tests/local/test_moto_bugs.py (drop the patch of each bug the new moto fixed) and "
        "tests/local/test_moto_fixes.py (port each patch that fails) "
        "(docs/decisions/0042-emulator-boundary.md)."
    )


def apply() -> None:
    """Check the installed moto (:func:`check_moto_version`), then apply the :mod:`.correctness`, the
    :mod:`.speed`, the :mod:`.keepalive` and the :mod:`.lanes` patches (once each)."""
    check_moto_version()
    correctness.apply()
    speed.apply()
    keepalive.apply()
    lanes.apply()
