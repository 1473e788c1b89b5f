"""The operator console: a static bundle (``static/``) the API serves at ``/ui``, and its settings.

The console is a browser client of the public API only; this module just finds its files and says
which sign-in the deployment offers (``/ui/config.json``). No build step: the sources in
``static/app/`` are plain ES modules, the libraries in ``static/vendor/`` are copied from their npm
tarballs (``static/vendor/VENDORED.md``). See docs/console.md and decision 0024.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
#: Where the API serves the console.
CONSOLE_PATH = "/ui"
#: The stack sets these when it creates the console's Cognito user pool (infra/console.py).
ENV_CONSOLE_COGNITO_CLIENT_ID = "JOBSCHED_CONSOLE_COGNITO_CLIENT_ID"
ENV_CONSOLE_COGNITO_REGION = "JOBSCHED_CONSOLE_COGNITO_REGION"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".md": "text/markdown; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
#: A file name the console serves: one folder level at most, no dot files, no "..".
_ASSET_NAME = re.compile(r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]*/)?[A-Za-z0-9_-][A-Za-z0-9._-]*$")
_IMPORT_MAP = re.compile(r'<script type="importmap">(.*?)</script>', re.S)
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")


@dataclass(frozen=True)
class ConsoleConfig:
    """How a browser signs in: always with a pasted bearer token (token or JWT); with a username
    and password too when the stack created the console's Cognito user pool."""

    cognito_client_id: str = ""
    cognito_region: str = ""

    def __post_init__(self) -> None:
        if bool(self.cognito_client_id) != bool(self.cognito_region):
            raise ValueError(
                f"{ENV_CONSOLE_COGNITO_CLIENT_ID} and {ENV_CONSOLE_COGNITO_REGION} go together: "
                "set both or none"
            )
        if self.cognito_region and not _REGION.match(self.cognito_region):
            raise ValueError(f"{ENV_CONSOLE_COGNITO_REGION} is not an AWS region: {self.cognito_region!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ConsoleConfig:
        return cls(
            cognito_client_id=env.get(ENV_CONSOLE_COGNITO_CLIENT_ID, "").strip(),
            cognito_region=env.get(ENV_CONSOLE_COGNITO_REGION, "").strip(),
        )

    @property
    def cognito_endpoint(self) -> str | None:
        """The Cognito user-pool API the console's sign-in form calls (``InitiateAuth``)."""
        return f"https://cognito-idp.{self.cognito_region}.amazonaws.com/" if self.cognito_region else None

    def document(self, auth_mode: str) -> dict[str, object]:
        """``GET /ui/config.json``: what the login page offers."""
        cognito = None
        if self.cognito_client_id:
            cognito = {
                "client_id": self.cognito_client_id,
                "region": self.cognito_region,
                "endpoint": self.cognito_endpoint,
            }
        return {"auth_mode": auth_mode, "api_base": "", "cognito": cognito}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str


def asset(name: str) -> Asset | None:
    """The static file ``name`` (``"app/main.js"``), or ``None`` when there is no such file."""
    if not _ASSET_NAME.match(name) or ".." in name:
        return None
    path = STATIC_DIR / name
    content_type = CONTENT_TYPES.get(path.suffix)
    if content_type is None or not path.is_file():
        return None
    return Asset(path.read_bytes(), content_type)


@cache
def index_html() -> bytes:
    return (STATIC_DIR / "index.html").read_bytes()


@cache
def _import_map_hash() -> str:
    match = _IMPORT_MAP.search(index_html().decode("utf-8"))
    if match is None:
        raise RuntimeError("static/index.html has no import map")
    digest = hashlib.sha256(match.group(1).encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


def content_security_policy(config: ConsoleConfig) -> str:
    """Scripts only from the console itself (and its one inline import map, by hash); requests only
    to the API (and the Cognito endpoint when the sign-in form uses it); no framing."""
    connect = "'self'" + (f" {config.cognito_endpoint}" if config.cognito_endpoint else "")
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' {_import_map_hash()}",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src {connect}",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
        ]
    )
