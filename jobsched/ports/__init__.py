"""The ports: what services, long jobs, the API and targets need from outside, as Protocols.

A port names the operations and the semantics the guarantees rest on; :mod:`jobsched.aws` holds the
only real implementations (DynamoDB, SQS, Step Functions, S3), :mod:`jobsched.testing` in-memory ones
held to the same contract suite (``tests/contract``). Ports import the core only.

* :mod:`~jobsched.ports.tables` -- :class:`~jobsched.ports.tables.Table`, the item store every store
  of jobs, runs and attempts, leases, limits, usage, notifications and workflows is written on:
  conditional put, fenced update, the stored item returned on a refused condition
  (:class:`~jobsched.ports.tables.ConditionFailed`), queries over the tables' keys and indexes.
* :mod:`~jobsched.ports.queues` -- the SQS calls of the run pipeline (send with delay, receive with
  visibility, receive count, redrive to a dead-letter queue).
* :mod:`~jobsched.ports.state_machine` -- the Step Functions calls of chunked jobs.
* :mod:`~jobsched.ports.objects` -- the bucket of large outputs and payloads.
* :mod:`~jobsched.ports.stores` -- the stores the services use, by what they do (jobs, runs,
  attempts, leases, semaphores, buckets, outputs, notifications, usage).
* :mod:`~jobsched.ports.api` -- the API's own records: idempotency keys, principals, job quotas.
"""
