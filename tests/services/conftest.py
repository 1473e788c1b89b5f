"""The services' tests (jobsched/services, and the stores and wiring they run on), on the in-memory
fakes of jobsched.testing (decision 0043).

The fixtures are tests/aws's, re-exported: ``clock`` (a fake clock at a fixed instant), and ``aws`` and
``pipeline`` as their in-memory twins (tests/aws/memory.py), so a test here never starts moto. A file
that asserts capacity units imports ``memory_aws_units`` (the fakes reached as a DynamoDB client, so
the metering adapter estimates units as over moto) in place of ``aws``.
"""

from tests.aws.conftest import clock  # noqa: F401  (re-exported fixture)
from tests.aws.memory import memory_aws, memory_pipeline  # noqa: F401  (re-exported fixtures: aws, pipeline)
