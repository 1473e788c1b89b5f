"""Suite-wide: moto's thread-safety fixes (jobsched/local/moto_fixes.py) in every test process, as
in the embedded mode and the benchmarks: the dispatcher and the worker write from threads."""

from jobsched.local import moto_fixes

moto_fixes.apply()
