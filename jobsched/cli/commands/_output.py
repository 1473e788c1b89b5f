"""Rendering for the client commands: fixed-column tables for people, ``--json`` for scripts.

No external library (docs/decisions/0009-cli-output-stdlib.md): a table is a list of ``Column``
(header, how to get the cell, max width); cells are single-line strings, long ones are cut with an
ellipsis so a row stays one line. A record (the ``get`` commands) is ``label: value`` lines; a JSON
value in it is pretty-printed (on one line when short, indented otherwise) and cut after
:data:`FIELD_MAX_LINES` lines of at most :data:`FIELD_MAX_WIDTH` characters, with a hint that
``--json`` shows all of it. Numbers print as the API sent them, except that a whole float shows
without its ``.0`` (``base_seconds: 2``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

EMPTY = "-"
#: A ``get`` field's value is cut after this many lines ...
FIELD_MAX_LINES = 12
#: ... and each of its lines after this many characters.
FIELD_MAX_WIDTH = 200
#: A JSON value that fits in this many characters is shown on one line.
INLINE_JSON_WIDTH = 80
#: What a field getter returns for a row that does not apply to this record (the row is left out).
OMIT = object()
TRUNCATED_HINT = "(cut; --json shows all)"


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
        text = json.dumps(_tidy(value), separators=(",", ":"), sort_keys=True)
    elif isinstance(value, float):
        text = _number(value)
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
    """A record as ``label: value`` lines, labels aligned (the ``get`` commands). A getter returning
    :data:`OMIT` leaves its row out; a multi-line value continues under the first line's value."""
    rows = [(label, value) for label, get in fields if (value := get(item)) is not OMIT]
    width = max(len(label) for label, _ in rows) + 1
    lines = []
    for label, value in rows:
        first, *rest = field_value_lines(value)
        lines.append(f"{label + ':':<{width}}  {first}")
        lines += [f"{'':<{width}}  {line}" for line in rest]
    return "\n".join(lines)


def field_value_lines(value: Any) -> list[str]:
    """One field's value as display lines: pretty JSON for objects and arrays, cut when long."""
    if isinstance(value, (dict, list)) and value:
        tidy = _tidy(value)
        inline = json.dumps(tidy, ensure_ascii=False)
        lines = [inline] if len(inline) <= INLINE_JSON_WIDTH else json.dumps(tidy, indent=2).splitlines()
    elif isinstance(value, (dict, list)):
        lines = [json.dumps(value)]
    elif isinstance(value, str) and value:
        lines = value.splitlines() or [value]
    else:
        lines = [cell(value, FIELD_MAX_WIDTH)]
    cut = len(lines) > FIELD_MAX_LINES
    lines = lines[:FIELD_MAX_LINES]
    shown = []
    for line in lines:
        if len(line) > FIELD_MAX_WIDTH:
            line, cut = line[: FIELD_MAX_WIDTH - 1] + "…", True
        shown.append(line)
    if cut:
        shown.append(TRUNCATED_HINT)
    return shown


def _number(value: float) -> str:
    """A float as people write it: ``2`` for 2.0, ``0.5`` for 0.5."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _tidy(value: Any) -> Any:
    """A JSON value with whole floats made ints, for display only (``--json`` prints the API's own)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    if isinstance(value, dict):
        return {k: _tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    return value


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
