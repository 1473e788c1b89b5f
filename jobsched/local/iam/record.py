"""Run a module with every function's AWS calls recorded: ``python -m jobsched.local.iam.record DIR
MODULE [ARGS...]`` runs ``python -m MODULE ARGS...`` (the fault battery, a benchmark) in this process
with the recorder installed, then writes the recording into DIR (``make iam-report`` reads it)."""

from __future__ import annotations

import os
import runpy
import sys

from jobsched.local.iam import recorder


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    directory, module, *args = argv
    os.environ[recorder.ENV_CALLS_DIR] = directory  # embedded-mode children record there too
    recording = recorder.install()
    sys.argv = [module, *args]
    status = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        path = recorder.write(recording, directory)
        print(
            f"recorded {recording.calls} calls of {len(recording.triples)} triples -> {path}", file=sys.stderr
        )
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
