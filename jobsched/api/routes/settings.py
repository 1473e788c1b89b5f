"""``/settings/notify``: the calling tenant's default recipients of dead-letter notifications.

The tenant is the authenticated caller's (never a path or body field). ``PUT`` replaces the default
(``{}`` removes it); each route calls one :class:`jobsched.services.notifications.TenantNotifySettings`
method.
"""

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from jobsched.api.deps import ClockDep, NotifySettingsDep, Tenant
from jobsched.api.schemas import NotifyIn, NotifySettingsOut

router = Router()


@router.get("/settings/notify", tags=["settings"], summary="The tenant's default dead-letter recipients")
def get_notify(tenant: Tenant, notify_settings: NotifySettingsDep) -> NotifySettingsOut:
    return NotifySettingsOut(notify=notify_settings.get(tenant))


@router.put("/settings/notify", tags=["settings"], summary="Replace the tenant's default recipients")
def put_notify(
    body: Annotated[NotifyIn, Body()], tenant: Tenant, notify_settings: NotifySettingsDep, clock: ClockDep
) -> NotifySettingsOut:
    return NotifySettingsOut(notify=notify_settings.put(tenant, body.to_domain(), clock.now()))
