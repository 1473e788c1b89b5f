"""The emulated AWS of the embedded mode: moto's ``ThreadedMotoServer`` on 127.0.0.1.

The server runs in a thread of this process; the functions reach it over HTTP through
``AWS_ENDPOINT_URL``, exactly as they reach AWS in the cloud (one code path, only the endpoint differs).
"""

from __future__ import annotations

import json
import logging
import socket
import urllib.request
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

LOCAL_HOST = "127.0.0.1"

# moto executes Step Functions state machines only when asked to (the long-jobs workflow needs it).
MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}}


def free_port(host: str = LOCAL_HOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class MotoServer:
    """Lifecycle of one in-process moto server bound to 127.0.0.1.

    ``MOTO_PORT`` must hold the port before the server starts, because moto builds URLs it hands out
    (queue URLs, for one) from it; the caller passes ``environ`` (normally ``os.environ``) so that
    the change is visible and can be undone by whoever owns the process environment.
    """

    def __init__(self, port: int | None = None, *, host: str = LOCAL_HOST):
        self.host = host
        #: Whether the port was picked here (none asked for): a start that finds it taken since may
        #: pick another (:meth:`jobsched.local.embedded.MotoProcess.start`).
        self.port_picked = not port
        self.port = port or free_port(host)
        self._server: ThreadedMotoServer | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, environ: dict[str, str]) -> None:
        """Start serving (with :mod:`jobsched.local.moto_fixes` applied) and switch on the moto features
        the embedded mode needs."""
        # Imported here: the embedded mode's own process (``jobsched dev``) runs moto in child processes
        # (:class:`jobsched.local.embedded.MotoProcess`) and does not import moto, Flask or werkzeug
        # (about 0.2 s of CPU at each start, decision 0044, nineteenth pass).
        from moto.server import ThreadedMotoServer

        from jobsched.local import moto_fixes

        moto_fixes.apply()
        environ["MOTO_PORT"] = str(self.port)
        # werkzeug logs every request at INFO to stderr unless its logger already has a level.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        server.start()
        self._server = server
        self._post_config(MOTO_CONFIG)

    def _post_config(self, config: dict) -> None:
        request = urllib.request.Request(
            f"{self.endpoint_url}/moto-api/config",
            data=json.dumps(config).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def stop(self) -> None:
        """Stop serving and wait for the server thread (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()
