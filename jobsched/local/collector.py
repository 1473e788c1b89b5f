"""The garbage collector's settings for the embedded mode's processes and the test suite's.

**A tenth to a quarter of these processes' CPU went to the cyclic garbage collector** (measured with a
``gc.callbacks`` timer in every process of the parallel test run, decision 0044's twelfth pass): moto's
servers, ``jobsched dev``, the test processes. Each of them imports a large, long-lived heap (boto3's
and botocore's models, moto, the functions, aws_cdk in the tests) and then allocates quickly (every
request parses and builds JSON and botocore objects), so CPython's default thresholds (a collection of
the youngest generation every 700 allocations net, a full one every hundred of those while the heap
grows) ran thousands of collections, the full ones walking every module and model again.

:func:`settle` is what a process calls once its start-up imports are done: one collection, then every
object alive moved out of the collector's sight (``gc.freeze``: they live as long as the process), then
:data:`THRESHOLDS`. Garbage is still collected -- every cycle made after the call is found by the next
collection of its generation -- only less often, so each collection finds more and the fixed cost of
walking the generations is paid fewer times. :func:`quiet` switches the collector off for the imports
themselves (every object they make lives on; a collection then would find nothing).
"""

from __future__ import annotations

import gc

#: The collector's thresholds after :func:`settle`: the youngest generation is collected after 50,000
#: allocations net instead of 700; the middle one after 20 of those instead of 10; the oldest after 10
#: of those (and, as CPython always adds, only once a quarter as many objects as it holds are pending).
THRESHOLDS = (50_000, 20, 10)


def quiet() -> None:
    """Switch the collector off until :func:`settle` (a process's start-up imports)."""
    gc.disable()


def settle() -> int:
    """Collect once, freeze what is alive (``gc.freeze``), set :data:`THRESHOLDS` and switch the
    collector on; returns how many objects are frozen (all of them, including earlier calls')."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    gc.enable()
    return gc.get_freeze_count()
