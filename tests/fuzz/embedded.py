"""``make fuzz``: start the embedded mode (tenant ``fuzz``, an administrator) and run schemathesis
against it (:mod:`tests.fuzz.run`); ``python -m tests.fuzz.embedded [--examples N] [--seed S]``.
Without ``--seed`` (``make fuzz`` without ``SEED=``) a random seed is drawn and printed before the
run starts, so a failing run can be replayed with ``make fuzz SEED=<it>``."""

from __future__ import annotations

import argparse
import random
import sys

from tests.fuzz.run import run
from tests.local.e2e_helpers import EmbeddedProcess

TOKEN = "tok-fuzz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"schemathesis seed {seed} (replay: make fuzz SEED={seed})", flush=True)
    process = EmbeddedProcess({"fuzz": TOKEN}, admins=["fuzz"])
    try:
        url = process.wait_ready()
        result = run(url, TOKEN, examples=args.examples, seed=seed)
    finally:
        process.stop()
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
