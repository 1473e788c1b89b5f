"""What a deploy of new handler code would strand: the comparison behind ``jobsched deploy-check``.

Pure: it compares two values and reads nothing else. One is what the deployed system still refers to,
as ``GET /handlers`` lists it (docs/api.md): per registered ``(name, version)`` the active jobs that
will run it and its runs queued, running, retrying and dead-lettered; the unpinned jobs' payload
versions per name; and ``missing``, the references to handlers the deployed code does not register.
The other is the handlers of the code about to be deployed (:func:`code_from`, from the registry's
``Registered.describe()``). :func:`strandings` returns a :class:`Problem` for each thing the new code
would leave without a handler (decision 0050):

* a ``(name, version)`` the new code lacks while pinned jobs or runs bound or pinned to it remain
  (queued, running, retrying, dead-lettered);
* a name the new code lacks entirely while any job or run refers to it (unpinned jobs and unbound
  queued runs included: they would bind to a version of that name);
* unpinned jobs whose ``payload_version`` the new code's newest version of their handler can neither
  take nor upgrade (``Registered.accepts_payload_of``);
* a reference the deployed code already lacks (``missing``) that the new code does not register either.

The embedded mode runs the same comparison at start against the code it loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The run counts of a ``GET /handlers`` entry, in the order they are reported.
RUN_COUNTS = ("queued", "running", "retrying", "dead_lettered")
#: How ``render`` names each count (singular; an ``s`` is added for more than one).
_COUNT_NOUNS = {
    "jobs": "job",
    "queued": "queued run",
    "running": "running run",
    "retrying": "retrying run",
    "dead_lettered": "dead-lettered run",
}

#: The new code's handlers: ``{name: {version: the versions it upgrades payloads from}}``.
CodeHandlers = Mapping[str, Mapping[int, frozenset[int]]]


def code_from(descriptions: Iterable[Mapping[str, Any]]) -> dict[str, dict[int, frozenset[int]]]:
    """The new code's handlers from ``Registered.describe()`` dicts (``name``, ``version``,
    ``upgrades_from``)."""
    code: dict[str, dict[int, frozenset[int]]] = {}
    for entry in descriptions:
        upgrades = frozenset(int(v) for v in entry.get("upgrades_from") or ())
        code.setdefault(str(entry["name"]), {})[int(entry["version"])] = upgrades
    return code


@dataclass(frozen=True)
class Problem:
    """One thing the new code would strand: the handler (``version`` None: its unbound references),
    why, how many jobs and runs refer to it, and up to ten of their ids."""

    #: ``removed`` (the new code lacks a version or name the deployed one has), ``missing`` (the
    #: deployed code already lacks it), ``payload`` (unpinned jobs' payloads the new code cannot take).
    kind: str
    name: str
    version: int | None
    reason: str
    counts: Mapping[str, int]
    jobs: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    #: The payload versions concerned (unpinned jobs whose payload the new code cannot take).
    payload_versions: tuple[int, ...] = field(default=())

    def describe(self) -> dict[str, Any]:
        """The problem as ``--json`` prints it and ``POST /handlers/deploy-checks`` records it."""
        described: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "version": self.version,
            "problem": self.reason,
        }
        described.update({key: int(self.counts.get(key, 0)) for key in _COUNT_NOUNS})
        if self.payload_versions:
            described["payload_versions"] = list(self.payload_versions)
        described["examples"] = {"jobs": list(self.jobs), "runs": list(self.runs)}
        return described

    def render(self) -> str:
        """One line for people: the reason, the counts, the ids of the jobs and runs."""
        return f"{self.reason}: {self.referred()}"

    def referred(self) -> str:
        """What refers to it: the counts, then the ids of the jobs and runs."""
        counted = [
            f"{count} {_COUNT_NOUNS[key]}{'s' if count != 1 else ''}"
            for key in _COUNT_NOUNS
            if (count := int(self.counts.get(key, 0)))
        ]
        line = ", ".join(counted) or "referred to"
        if self.jobs:
            line += f"; jobs {', '.join(self.jobs)}"
        if self.runs:
            line += f"; runs {', '.join(self.runs)}"
        return line


def strandings(listing: Mapping[str, Any], code: CodeHandlers) -> list[Problem]:
    """Every :class:`Problem` the code ``code`` would meet in a system that lists ``listing`` (the
    ``GET /handlers`` document), in the listing's order: removed versions, already-missing handlers,
    then payloads that cannot be upgraded."""
    unpinned = _unpinned_payload_versions(listing.get("unpinned_payload_versions") or {})
    problems = [
        problem
        for entry in listing.get("handlers") or ()
        if (problem := _removed(entry, code, unpinned.get(str(entry["name"]), {}))) is not None
    ]
    problems += [
        problem
        for entry in listing.get("missing") or ()
        if (problem := _still_missing(entry, code)) is not None
    ]
    examples = {str(e["name"]): e for e in listing.get("handlers") or () if e.get("newest")}
    for name, versions in unpinned.items():
        problem = _payload_problem(name, versions, code, examples.get(name, {}))
        if problem is not None:
            problems.append(problem)
    return problems


def _removed(entry: Mapping[str, Any], code: CodeHandlers, unpinned: Mapping[int, int]) -> Problem | None:
    """A registered version the new code lacks, when something still needs it."""
    name, version = str(entry["name"]), int(entry["version"])
    kept = code.get(name)
    if kept is not None and version in kept:
        return None
    counts = {key: int(entry.get(key) or 0) for key in ("jobs", *RUN_COUNTS)}
    if kept is None:
        reason = f"handler {name!r} is not in the new code (version {version} is referred to)"
    else:
        # Unpinned jobs of the newest version move to the new code's newest version (its payload
        # check is the payload problem's); pinned ones stay on this version and are stranded.
        # GET /handlers counts a name's unbound queued runs with its newest version's queued runs,
        # so they are kept in: removing the newest version is the second deploy's work (docs/handlers.md).
        if entry.get("newest"):
            counts["jobs"] = max(counts["jobs"] - sum(unpinned.values()), 0)
        reason = (
            f"handler {name!r} version {version} is not in the new code "
            f"(it has version{'s' if len(kept) > 1 else ''} {', '.join(str(v) for v in sorted(kept))})"
        )
        if entry.get("newest") and counts["queued"]:
            reason += "; its queued count includes the name's unbound runs"
    if not any(counts.values()):
        return None
    return Problem("removed", name, version, reason, counts, *_examples(entry))


def _still_missing(entry: Mapping[str, Any], code: CodeHandlers) -> Problem | None:
    """A reference the deployed code already lacks, unless the new code registers it again."""
    name = str(entry["name"])
    version = None if entry.get("version") is None else int(entry["version"])
    kept = code.get(name)
    if kept is not None and (version is None or version in kept):
        return None
    counts = {key: int(entry.get(key) or 0) for key in ("jobs", *RUN_COUNTS)}
    if not any(counts.values()):
        return None
    what = f"handler {name!r}" if version is None else f"handler {name!r} version {version}"
    reason = f"{what} is missing from the deployed code and not in the new code either"
    return Problem("missing", name, version, reason, counts, *_examples(entry))


def _payload_problem(
    name: str, versions: Mapping[int, int], code: CodeHandlers, example: Mapping[str, Any]
) -> Problem | None:
    """Unpinned jobs of ``name`` whose payload the new code's newest version cannot take."""
    kept = code.get(name)
    if not kept:
        return None  # the whole name is gone: reported with its version
    newest = max(kept)
    takes = {newest, *kept[newest]}
    refused = {
        version: count for version, count in sorted(versions.items()) if count and version not in takes
    }
    if not refused:
        return None
    upgrades = ", ".join(str(v) for v in sorted(kept[newest])) or "no version"
    written = ", ".join(str(v) for v in refused)
    reason = (
        f"unpinned jobs of {name!r} have payloads written for version {written}: the new code's newest "
        f"version {newest} neither takes nor upgrades them (it upgrades from {upgrades})"
    )
    jobs, _runs = _examples(example)
    return Problem("payload", name, newest, reason, {"jobs": sum(refused.values())}, jobs, (), tuple(refused))


def _unpinned_payload_versions(raw: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """``{name: {"<payload version>": count}}`` with the versions as ints; a job written before
    versions existed (no payload version) means version 1 (decision 0048)."""
    parsed: dict[str, dict[int, int]] = {}
    for name, counts in raw.items():
        versions = parsed.setdefault(str(name), {})
        for key, count in (counts or {}).items():
            version = int(key) if str(key).isdigit() else 1
            versions[version] = versions.get(version, 0) + int(count or 0)
    return parsed


def _examples(entry: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    examples = entry.get("examples") or {}
    return tuple(str(j) for j in examples.get("jobs") or ()), tuple(
        str(r) for r in examples.get("runs") or ()
    )
