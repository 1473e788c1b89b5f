"""ECS task scale-in protection, set by the task itself through the ECS container agent's endpoint.

The agent injects ``ECS_AGENT_URI`` into every container of an ECS task. ``PUT
$ECS_AGENT_URI/task-protection/v1/state`` with ``{"ProtectionEnabled": true, "ExpiresInMinutes": N}``
(1-2880; the agent's default is 120) keeps the service's scale-in and deployments from stopping the
task until then; ``{"ProtectionEnabled": false}`` gives it up. The agent answers
``{"protection": {...}}``, or ``{"failure": {...}}`` / ``{"error": {...}}`` (the AWS documentation's
"Amazon ECS task scale-in protection endpoint").

The container worker protects its task while it runs at least one run and clears the protection when
it is idle (:mod:`jobsched.compose.container_worker`). Without ``ECS_AGENT_URI`` (the embedded mode, a
user's own Kubernetes) every call is a no-op. A refused or failed call is logged and never stops the
worker: protection only spares a busy task a scale-in; a task stopped anyway hands its runs back.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping

logger = logging.getLogger(__name__)

#: The variable the ECS agent injects into a task's containers.
ENV_ECS_AGENT_URI = "ECS_AGENT_URI"
PROTECTION_PATH = "/task-protection/v1/state"
#: How long one protection lasts; renewed while the task stays busy (every half of it).
DEFAULT_EXPIRES_MINUTES = 60
#: The agent's limits on ``ExpiresInMinutes``.
MIN_EXPIRES_MINUTES, MAX_EXPIRES_MINUTES = 1, 2880
REQUEST_TIMEOUT_SECONDS = 5.0


class TaskProtection:
    """Sets and clears this task's scale-in protection (a no-op without an agent URI)."""

    def __init__(self, agent_uri: str | None, *, expires_minutes: int = DEFAULT_EXPIRES_MINUTES):
        if not MIN_EXPIRES_MINUTES <= expires_minutes <= MAX_EXPIRES_MINUTES:
            raise ValueError(
                f"expires_minutes must be {MIN_EXPIRES_MINUTES}..{MAX_EXPIRES_MINUTES}, not {expires_minutes}"
            )
        self.url = agent_uri.rstrip("/") + PROTECTION_PATH if agent_uri else None
        self.expires_minutes = expires_minutes
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> TaskProtection:
        return cls(environ.get(ENV_ECS_AGENT_URI) or None)

    @property
    def active(self) -> bool:
        """Whether there is an agent to call (``ECS_AGENT_URI`` set)."""
        return self.url is not None

    @property
    def renew_seconds(self) -> float:
        """How often a busy task renews its protection: half of its length."""
        return self.expires_minutes * 60 / 2

    def protect(self) -> bool:
        """Protect the task for :attr:`expires_minutes`; True when the agent confirmed it."""
        return self._put({"ProtectionEnabled": True, "ExpiresInMinutes": self.expires_minutes})

    def clear(self) -> bool:
        """Give the protection up; True when the agent confirmed it."""
        return self._put({"ProtectionEnabled": False})

    def _put(self, body: dict[str, object]) -> bool:
        if self.url is None:
            return False
        request = urllib.request.Request(
            self.url,
            data=json.dumps(body).encode(),
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        with self._lock:  # one state at a time: a protect never overtakes the clear sent before it
            try:
                with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
                    answer = json.loads(response.read() or b"{}")
            except (urllib.error.URLError, OSError, ValueError) as exc:
                logger.warning("task protection %s failed: %s", body, exc)
                return False
        if not isinstance(answer, dict) or "protection" not in answer:
            logger.warning("task protection %s refused by the ECS agent: %s", body, answer)
            return False
        return True
