"""The code version of a deployment run from a working directory: its git revision.

``jobsched dev`` records it on every attempt (``JOBSCHED_CODE_VERSION``) and ``jobsched deploy-check``
records it with a forced check. A light module (no emulator imports), so the CLI can ask it cheaply.
"""

from __future__ import annotations

import subprocess

#: The code version of an embedded mode outside a git work tree (or without git).
NO_GIT_CODE_VERSION = "dev"


def local_code_version(cwd: str | None = None) -> str:
    """The embedded mode's code version: ``git rev-parse --short HEAD`` of ``cwd`` (default: the
    working directory, the project ``jobsched dev`` runs in), else :data:`NO_GIT_CODE_VERSION`."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return NO_GIT_CODE_VERSION
    revision = done.stdout.strip()
    return revision if done.returncode == 0 and revision else NO_GIT_CODE_VERSION
