"""The composition room: the one place that knows which adapter backs which port.

:mod:`jobsched.compose.pipeline` builds the run pipeline's services (dispatcher, worker, sweeper, DLQ
consumer, the job and backfill services) from :class:`jobsched.runtime.settings.Settings` and
:class:`jobsched.aws.clients.Clients` (or the in-memory fakes' bundle); :mod:`jobsched.compose.api`
builds the HTTP API's services and app from the environment; :mod:`jobsched.compose.seam` is each
Lambda function's injection seam (what it builds its services from, installed by tests and the
benchmarks, the deployment's own on AWS). The ``functions/`` entry points, the
embedded mode and the benchmarks build through here, so a service is assembled the same way on AWS,
locally and under test. Nothing below this floor imports it (import-linter, ``make lint``).
"""
