"""Command groups of the ``jobsched`` console script.

Each module here exposes ``register(subparsers) -> None``, which adds its subparser(s) and sets
``func`` (called with the parsed ``argparse.Namespace``, returning an exit status) via
``set_defaults``. ``jobsched.cli.main.COMMAND_MODULES`` lists the modules to load.
"""
