"""``GET /ui``: the operator console's static files and its sign-in settings, without credentials.

The files hold no tenant data (the console calls the public API with the token the user signs in
with), so they are public like ``/docs``; ``jobsched.api.gate`` and the gateway's routes
(``infra/api.py``) exempt ``/ui`` and ``/ui/*`` alike. An unknown file answers 404 ``not_found``.
"""

import json

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from jobsched.api.deps import AuthenticatorDep, ConsoleDep
from jobsched.console import CONSOLE_PATH, ConsoleConfig, asset, content_security_policy, index_html
from jobsched.core.errors import NotFoundError

router = Router()


def _headers(config: ConsoleConfig) -> dict[str, str]:
    return {
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Content-Security-Policy": content_security_policy(config),
    }


def _page(config: ConsoleConfig) -> Response:
    return Response(
        status_code=200, content_type="text/html; charset=utf-8", body=index_html(), headers=_headers(config)
    )


def _file(name: str, config: ConsoleConfig) -> Response:
    found = asset(name)
    if found is None:
        raise NotFoundError(f"the console has no file {name!r}")
    if name == "index.html":
        return _page(config)
    return Response(
        status_code=200, content_type=found.content_type, body=found.body, headers=_headers(config)
    )


@router.get(CONSOLE_PATH, include_in_schema=False)
def console_index(config: ConsoleDep):
    return _page(config)


@router.get(CONSOLE_PATH + "/", include_in_schema=False)
def console_index_slash(config: ConsoleDep):
    return _page(config)


@router.get(f"{CONSOLE_PATH}/config.json", include_in_schema=False)
def console_config(config: ConsoleDep, authenticator: AuthenticatorDep):
    body = json.dumps(config.document(authenticator.config.mode))
    return Response(
        status_code=200, content_type=content_types.APPLICATION_JSON, body=body, headers=_headers(config)
    )


@router.get(f"{CONSOLE_PATH}/<name>", include_in_schema=False)
def console_file(name: str, config: ConsoleDep):
    return _file(name, config)


@router.get(f"{CONSOLE_PATH}/<folder>/<name>", include_in_schema=False)
def console_nested_file(folder: str, name: str, config: ConsoleDep):
    return _file(f"{folder}/{name}", config)
