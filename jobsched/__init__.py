"""jobsched: a serverless, multi-tenant job scheduler for AWS, with an embedded mode for one machine."""

__version__ = "0.1.0"
