"""`jobsched dev` runs the project's own handlers: the working directory is importable, as with
`python -m`, so JOBSCHED_HANDLER_MODULES can name a package of the project it is started in."""

from __future__ import annotations

import importlib
import sys

from jobsched.cli.commands.dev import _import_from_working_directory


def test_a_handlers_package_in_the_working_directory_becomes_importable(tmp_path, monkeypatch):
    # Given a project with its own handlers package, and a sys.path without the working directory
    (tmp_path / "acme_handlers_pkg").mkdir()
    (tmp_path / "acme_handlers_pkg" / "__init__.py").write_text("MARK = 'acme'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    # When the dev command prepares the imports
    _import_from_working_directory()
    # Then the package imports (the worker and the API import JOBSCHED_HANDLER_MODULES the same way)
    module = importlib.import_module("acme_handlers_pkg")
    assert module.MARK == "acme"
    sys.modules.pop("acme_handlers_pkg", None)
