"""``python -m jobsched.rehearsal``: the deploy rehearsal (``make deploy-rehearsal``)."""

import sys

from jobsched.rehearsal.main import main

sys.exit(main())
