"""A declarations file for ``jobsched apply`` (docs/schedules-as-code.md), read with the line of every
field, so an error found in the file or answered by the API names the line and the field.

The file is YAML (or JSON, which the YAML loader reads too) with two optional lists::

    jobs:
      - name: nightly-report          # each entry: the body of PUT /jobs/by-name/{name}
        schedule: "0 2 * * *"
        target: {handler: reports.nightly}
    workflows:
      - name: etl                     # the body of PUT /workflows/by-name/{name}
        schedule: "0 3 * * *"
        nodes: [...]

An entry's fields are not checked here beyond its ``name``: the API checks them (the same checks as
``POST``), and its 422 is mapped back to the line of the field it names (:func:`locate`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.job_specs import SPEC_FIELDS

KINDS = ("jobs", "workflows")
_PATH_PREFIX = re.compile(r"^([A-Za-z_][\w]*(?:\.[\w]+)*)\s*:")
_QUOTED = re.compile(r"'([^']{1,200})'")


class DeclarationError(ValidationError):
    """Raised when a declarations file cannot be read or its shape is wrong; names the line."""

    code = "bad_file"


@dataclass
class Entry:
    """One declared job or workflow: its body, and the line of each field path (``("schedule",)``,
    ``("nodes", 1, "target", "handler")``; ``()`` is the entry's own line)."""

    kind: str  # "jobs" | "workflows"
    index: int
    name: str
    body: dict[str, Any]
    lines: dict[tuple[Any, ...], int] = field(default_factory=dict)

    @property
    def noun(self) -> str:
        return "job" if self.kind == "jobs" else "workflow"

    def line_of(self, path: tuple[Any, ...]) -> int:
        """The line of ``path``, or of the nearest enclosing field that has one."""
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines[path]


@dataclass
class Declarations:
    path: str
    entries: list[Entry]

    def names(self) -> set[str]:
        return {e.name for e in self.entries}


def load(path: str) -> Declarations:
    """Read and shape-check ``path``: :class:`DeclarationError` naming the line of the first problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DeclarationError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    root, lines = _parse(path, text)
    if root is None:
        root = {}
    if not isinstance(root, dict):
        raise DeclarationError(
            f"{path}:{lines.get((), 1)}: the file must be a mapping with jobs: and workflows:"
        )
    for key in root:
        if key not in KINDS:
            raise DeclarationError(
                f"{path}:{lines[(key,)]}: unknown key {key!r}: a file declares jobs: and workflows: "
                "(the tenant comes from your credentials)"
            )
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for kind in KINDS:
        items = root.get(kind) or []
        if not isinstance(items, list):
            raise DeclarationError(f"{path}:{lines[(kind,)]}: {kind} must be a list of definitions")
        for index, body in enumerate(items):
            at = (kind, index)
            if not isinstance(body, dict):
                raise DeclarationError(f"{path}:{lines[at]}: {kind}[{index}] must be a mapping of fields")
            name = body.get("name")
            if not isinstance(name, str) or not name.strip():
                raise DeclarationError(f"{path}:{lines[at]}: {kind}[{index}] name: a name is required")
            if name in seen:
                raise DeclarationError(
                    f"{path}:{lines[(*at, 'name')]}: {kind}[{index}] name: {name!r} is declared twice "
                    f"(first on line {seen[name]}); jobs and workflows share one name space"
                )
            seen[name] = lines[(*at, "name")]
            own = {p[2:]: line for p, line in lines.items() if p[:2] == at}
            entries.append(Entry(kind, index, name, body, own))
    return Declarations(path, entries)


def describe(entry: Entry, message: str) -> tuple[int, str, str]:
    """(line, field, message) for an API error ``message`` about ``entry``: :func:`locate`, and the
    message without the field prefix it started with (the caller prints the field)."""
    line, field = locate(entry, message)
    match = _PATH_PREFIX.match(message)
    if match and field.startswith(match.group(1)):
        message = message[match.end() :].lstrip()
    return line, field, message


def locate(entry: Entry, message: str) -> tuple[int, str]:
    """(line, field) for an API error ``message`` about ``entry``.

    The API starts a message with the field it is about (``schedule: …``, ``nodes.1.target.handler: …``);
    a value the message quotes (``unknown handler 'no.such'``) found in that field places it on the
    line of the value. Without a field prefix, the longest field of the entry the message names, else
    the quoted value anywhere in the entry, else the entry's own line and ``name``."""
    prefix: tuple[Any, ...] | None = None
    for part in message.split("; "):
        match = _PATH_PREFIX.match(part)
        if match:
            path = tuple(int(p) if p.isdigit() else p for p in match.group(1).split("."))
            if path[0] in entry.body or path[0] in _FIELDS:
                prefix = path
                break
    quoted = _QUOTED.findall(message)
    within = list(_scalars(_at(entry.body, prefix or ()), prefix or ()))
    for value in quoted:
        for path, scalar in within:
            if str(scalar) == value:
                return entry.line_of(path), _dotted(path)
    if prefix is not None:
        return entry.line_of(prefix), _dotted(prefix)
    fields = sorted(
        (p for p in entry.lines if p and all(isinstance(x, str) for x in p)), key=len, reverse=True
    )
    for path in fields:
        if re.search(rf"(?<![\w.]){re.escape(_dotted(path))}(?![\w])", message):
            return entry.lines[path], _dotted(path)
    return entry.line_of(()), "name"


def _dotted(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path)


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    """The part of ``value`` at ``path`` (None where the path leads nowhere)."""
    for key in path:
        in_dict = isinstance(value, dict) and key in value
        in_list = isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value)
        if in_dict or in_list:
            value = value[key]
        else:
            return None
    return value


#: The fields a message may name, present in the entry or not (one left out is on the entry's line).
_FIELDS = frozenset(SPEC_FIELDS) | {"nodes"}


def _scalars(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _scalars(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _scalars(item, (*path, index))
    else:
        yield path, value


def _parse(path: str, text: str) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """The document and the line of each path in it (1-based). YAML when PyYAML is installed; without
    it, JSON only, every path on line 1."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML is present wherever the tests run
        if not path.endswith(".json"):
            raise DeclarationError(
                f"{path}: reading YAML needs PyYAML (pip install pyyaml); or use JSON"
            ) from None
        try:
            return json.loads(text), {}
        except ValueError as exc:
            raise DeclarationError(f"{path}:{getattr(exc, 'lineno', 1)}: not valid JSON: {exc}") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {(): 1}
        lines: dict[tuple[Any, ...], int] = {}
        return _build(loader, node, (), lines, path), lines
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise DeclarationError(f"{path}:{line}: not valid YAML: {exc.problem or exc}") from None
    finally:
        loader.dispose()


def _build(loader: Any, node: Any, at: tuple[Any, ...], lines: dict[tuple[Any, ...], int], path: str) -> Any:
    import yaml

    lines[at] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise DeclarationError(
                    f"{path}:{key_node.start_mark.line + 1}: keys must be strings, got {key!r}"
                )
            if key in out:
                raise DeclarationError(f"{path}:{key_node.start_mark.line + 1}: {key!r} is given twice")
            out[key] = _build(loader, value_node, (*at, key), lines, path)
            lines[(*at, key)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(loader, item, (*at, i), lines, path) for i, item in enumerate(node.value)]
    value = loader.construct_object(node, deep=True)
    if hasattr(value, "isoformat"):  # YAML 1.1 reads 2026-12-01 as a date: the API takes text
        value = value.isoformat()
    return value
