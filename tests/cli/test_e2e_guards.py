"""The CLI's end-to-end fixtures fail, never skip, when a piece they drive is missing (issue 27 §6:
``pytest.skip`` for missing routes or modules, left from when the API was landing, would turn a
regression into a skip and a green run)."""

from __future__ import annotations

import pytest

from tests.cli import conftest, test_quickstart


def test_a_document_without_the_runs_route_fails_the_fixture_and_names_it():
    """Given an OpenAPI document with /jobs and /dead-letters but no /runs, When the embedded fixture's
    check reads it, Then it raises AssertionError (a failure) naming /runs, not pytest's Skipped."""
    document = {"paths": {"/jobs": {}, "/dead-letters": {}}}
    with pytest.raises(AssertionError, match="/runs"):
        conftest.require_routes(document)


def test_the_documented_routes_pass_the_check():
    conftest.require_routes({"paths": {path: {} for path in conftest.REQUIRED_ROUTES}})


def test_a_missing_pipeline_module_fails_the_quickstart_and_names_it():
    """Given the quickstart's pipeline with one module that does not exist, Then the check raises
    AssertionError naming it; the real pipeline passes it."""
    with pytest.raises(AssertionError, match=r"functions\.no_such_function"):
        conftest.require_modules([*test_quickstart.PIPELINE, "functions.no_such_function"])
    conftest.require_modules(test_quickstart.PIPELINE)


def test_no_end_to_end_fixture_or_quickstart_test_calls_pytest_skip():
    """Given the sources of the CLI's end-to-end fixtures and the quickstart test, Then neither calls
    pytest.skip (the checks above are what runs instead)."""
    import inspect

    for source in (inspect.getsource(conftest.embedded), inspect.getsource(test_quickstart)):
        assert "pytest.skip(" not in source
