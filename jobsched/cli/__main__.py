"""``python -m jobsched.cli`` (the same as ``jobsched``)."""

from jobsched.cli.main import entry

entry()
