"""Rendering for the client commands: fixed-column tables for people, ``--json`` for scripts.

No external library: a table is a list of ``Column`` (header, how to get the cell, max width); cells
are single-line strings, long ones are cut with an ellipsis so a row stays one line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

EMPTY = "-"


@dataclass(frozen=True)
class Column:
    """One table column: its header, how to read the cell from an item, and its maximum width."""

    header: str
    get: Callable[[dict], Any]
    max_width: int = 40


def field(name: str) -> Callable[[dict], Any]:
    """A getter for one top-level key (missing or null shows as ``-``)."""
    return lambda item: item.get(name)


def cell(value: Any, max_width: int) -> str:
    """One table cell: a single line, at most ``max_width`` characters."""
    if value is None or value == "":
        text = EMPTY
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    else:
        text = str(value)
    text = " ".join(text.split())
    if len(text) > max_width:
        text = text[: max(max_width - 1, 0)] + "…"
    return text


def render_table(items: Iterable[dict], columns: Sequence[Column]) -> str:
    """Rows under a header, columns padded to their widest cell, two spaces apart."""
    rows = [[cell(col.get(item), col.max_width) for col in columns] for item in items]
    headers = [col.header for col in columns]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = [
        "  ".join(text.ljust(w) for text, w in zip(line, widths, strict=True)).rstrip()
        for line in [headers, *rows]
    ]
    return "\n".join(lines)


def render_fields(item: dict, fields: Sequence[tuple[str, Callable[[dict], Any]]]) -> str:
    """A record as ``label: value`` lines, labels aligned (the ``get`` commands)."""
    width = max(len(label) for label, _ in fields)
    return "\n".join(f"{label + ':':<{width + 1}}  {cell(get(item), 200)}" for label, get in fields)


def print_json(data: Any, out: TextIO | None = None) -> None:
    """One JSON document, indented, keys in the API's order: what scripts parse with ``jq``."""
    print(json.dumps(data, indent=2, ensure_ascii=False), file=out or sys.stdout)


def print_page(
    page: dict,
    columns: Sequence[Column],
    noun: str,
    *,
    as_json: bool,
    quiet: bool = False,
    id_key: str = "id",
) -> None:
    """A list page: the API's JSON as is, the ids one per line (``--quiet``), or a table plus a hint on
    stderr when more pages exist."""
    if as_json:
        print_json(page)
        return
    items = page.get("items") or []
    if quiet:
        for item in items:
            print(item.get(id_key))
        return
    print(render_table(items, columns) if items else f"no {noun}")
    if page.get("next_cursor"):
        print(f"more {noun}: add --cursor {page['next_cursor']} (or --all)", file=sys.stderr)


def short_time(value: str | None) -> str | None:
    """An API timestamp (``2026-11-29T20:46:16.123Z``) without sub-seconds, for table cells."""
    if not value:
        return None
    if "." in value and value.endswith("Z"):
        return value.split(".", 1)[0] + "Z"
    return value
