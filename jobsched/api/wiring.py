"""Build the API from the environment: settings, clients, services, authenticator.

The one place that knows which concrete service backs which route. ``functions/api.py`` calls
:func:`app_from_env` once per container; tests call :func:`build_services` with moto clients and a
fake clock.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from jobsched.api.app import ApiServices, JobschedResolver, build_app
from jobsched.api.auth import AuthConfig, Authenticator
from jobsched.api.tenants import PrincipalStore
from jobsched.aws.clients import Clients
from jobsched.core.clock import Clock, SystemClock
from jobsched.settings import Settings


def build_services(settings: Settings, clients: Clients, clock: Clock) -> ApiServices:
    return ApiServices(
        clock=clock,
        principals=PrincipalStore(clients.dynamodb, settings.leases_table),
    )


def app_from_env(
    env: Mapping[str, str] | None = None, clients: Clients | None = None, clock: Clock | None = None
) -> JobschedResolver:
    env = os.environ if env is None else env
    settings = Settings.from_env(env)
    clients = clients or Clients()
    services = build_services(settings, clients, clock or SystemClock())
    config = AuthConfig.from_env(env)
    return build_app(services, Authenticator(config, services.principals))
