"""The services: one module per moving part, called by the ``functions/`` entry point of the same name.

``dispatcher`` (with ``backpressure``), ``worker`` (with ``outcome``), ``dlq_consumer``, ``sweeper``, and the
API's ``jobs``, ``runs`` and ``dead_letters``. They build on :mod:`jobsched.core` (pure rules) and
:mod:`jobsched.aws` (every AWS call, metered); :mod:`jobsched.compose.pipeline` builds them from settings.
"""
