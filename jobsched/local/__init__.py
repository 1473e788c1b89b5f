"""The embedded mode: all of jobsched on one machine, against an in-process moto (``jobsched dev``).

What runs, and what it stands in for on AWS:

============================  =====================================================================
``server.MotoServer``         AWS itself: moto's ThreadedMotoServer on 127.0.0.1 (Step Functions
                              executions switched on)
``provision.provision``       ``cdk deploy``: tables, queues + DLQs (redrive), bucket and the
                              chunked-job state machine, from :mod:`jobsched.runtime.resources` like infra/
``http_bridge.HttpBridge``    API Gateway HTTP API: each request -> a payload 2.0 event -> the api
                              function -> the HTTP response
``ticker.Periodic``           EventBridge Scheduler: the dispatcher per shard every second (a minute
                              on AWS; the local tick is finer so runs start on time without waiting),
                              the sweeper on its interval
``pollers.QueuePoller``       Lambda SQS event source mappings: batches, partial batch failures,
                              visibility timeout and redrive left to SQS, slots per priority
                              (MaximumConcurrency); the DLQs feed the DLQ consumer
``events.RunEventWatcher``    the console's run list: one log line per run state change
``runner.EmbeddedMode``       all of the above, started in order and stopped cleanly
============================  =====================================================================

The functions are the real ones, imported by their ``resources.FUNCTIONS`` handler path after the
environment is set (``AWS_ENDPOINT_URL`` plus the variables infra sets), so they build their clients
exactly as on AWS: one code path, only the endpoint and settings differ. Differences that remain:
every function shares one process (module state, Powertools singletons), the visibility timeout is
a local setting (60 s rather than 6x the worker timeout) so a crashed batch comes back quickly, and
invocations still running at shutdown are abandoned, as after a Lambda crash.
"""
