"""The services: one module per moving part, called by the ``functions/`` entry point of the same name.

``dispatcher`` (with ``backpressure``), ``worker`` (with ``outcome``; ``deliveries`` routes a queue record
to it, the chunk runner or the backfill service), ``dlq_consumer``, ``sweeper``, and the API's ``jobs``,
``runs`` and ``dead_letters``. They build on :mod:`jobsched.core` (pure rules) and take their tunables in
a frozen config (``DispatcherConfig``, ``WorkerConfig``, ``SweeperConfig``) and their collaborators as
ports (:mod:`jobsched.ports`: stores, the run queues, a clock); :mod:`jobsched.compose.pipeline` builds
them from settings and clients with the adapters of :mod:`jobsched.aws`.
"""
