"""One botocore data loader for every session a process creates (the embedded mode's, the tests').

Each function the embedded mode runs builds its clients from a boto3 session of its own, as each Lambda
container does, and every new botocore session parses botocore's JSON service models again: 0.11-0.17 s
of CPU for a first client of a service in a new session on this machine, against 4-10 ms from a session
that has parsed it (decision 0044, twentieth pass). In AWS each container pays that once; one process
running every function paid it for each function's session: over part of a test run, 20 ``jobsched
dev``s made 74 sessions and parsed 1,227 model files, 8.1 s of CPU in ``create_client``. A loader
caches what it parsed, so sharing one is what one long-lived session does; nothing a loader holds
depends on the session (credentials, region and endpoints are the session's and the client's).

boto3 appends its own data path to the loader of every session it wraps, so the shared loader keeps one
copy of each path. The Lambda functions never call this: it is the embedded mode's and the tests'.
"""

from __future__ import annotations

import functools

import botocore.loaders
import botocore.session


class _SearchPaths(list[str]):
    """A loader's search paths that take each path once (boto3 appends its own at every session)."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


@functools.cache
def _create_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
    loader = botocore.loaders.create_loader(search_path_string)
    loader._search_paths = _SearchPaths(loader.search_paths)
    return loader


def share() -> None:
    """From now on, every botocore session of this process uses one loader per ``AWS_DATA_PATH`` value
    (idempotent)."""
    botocore.session.create_loader = _create_loader
