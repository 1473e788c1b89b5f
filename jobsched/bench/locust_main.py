"""``python -m jobsched.bench.locust_main <locust options>``: the ``locust`` command, made importable
next to botocore's urllib3 1.26 (locust 2.x imports ``urllib3.util.create_urllib3_context``, which
urllib3 1.26 has only in ``urllib3.util.ssl_``). gevent patches the standard library first, as
locust's own entry point does."""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

import urllib3.util  # noqa: E402
import urllib3.util.ssl_  # noqa: E402

if not hasattr(urllib3.util, "create_urllib3_context"):
    urllib3.util.create_urllib3_context = urllib3.util.ssl_.create_urllib3_context

from locust.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
