"""AWS CDK infrastructure of jobsched: one construct per concern, a stack that composes them.

``app.py`` reads :class:`infra.config.StackConfig` from CDK context and builds
:class:`infra.stack.JobschedStack`. Names of tables, queues and environment variables come from
``jobsched/runtime/resources.py``, shared with the functions and the embedded mode.
"""
