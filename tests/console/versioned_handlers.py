"""Handlers the console's handler tests load into ``jobsched dev`` (``JOBSCHED_HANDLER_MODULES``):
``console.report`` versions 1 (no payload schema) and 2 (``rows`` required, upgrading version 1)."""

from __future__ import annotations

from jobsched.targets.registry import job

REPORT_V2 = {
    "type": "object",
    "properties": {
        "rows": {"type": "integer", "minimum": 0},
        "title": {"type": "string", "default": "report"},
    },
    "required": ["rows"],
}


@job("console.report", description="the old report")
def report_v1(payload: dict, ctx: object) -> dict:
    return {"lines": len(payload.get("lines", []))}


@job(
    "console.report", version=2, payload=REPORT_V2, upgrades={1: lambda p: {"rows": len(p.get("lines", []))}}
)
def report_v2(payload: dict, ctx: object) -> dict:
    return {"rows": payload["rows"]}
