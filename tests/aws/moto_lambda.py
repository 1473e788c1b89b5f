"""A Lambda function in moto for tests that need event source mappings (the capacity port and the
capacity function): a stub handler under a stub role, never invoked."""

from __future__ import annotations

import io
import zipfile
from typing import Any


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


def create_stub_function(clients: Any, name: str = "worker") -> Any:
    """Create the function ``name`` in moto and answer the Lambda client."""
    role = clients.client("iam").create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lam = clients.client("lambda")
    lam.create_function(
        FunctionName=name, Runtime="python3.12", Role=role, Handler="index.handler", Code={"ZipFile": _zip()}
    )
    return lam
