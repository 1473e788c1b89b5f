"""The ``jobsched`` command (:mod:`jobsched.cli.main`), its API client and one module per command group."""
