"""IAM identity-policy evaluation, offline: does a role's policy allow ``action`` on ``resource``?

Implements the part of AWS's documented policy evaluation logic that applies to a Lambda function's
execution role within one account (no SCPs, permission boundaries, session or resource policies):

* a request is **explicitly denied** when a ``Deny`` statement applies to it; an explicit deny wins
  over any allow;
* otherwise it is **allowed** when an ``Allow`` statement applies to it;
* otherwise it is **implicitly denied**.

A statement applies when its ``Action`` matches the action (or its ``NotAction`` does not) and its
``Resource`` matches the resource (or its ``NotResource`` does not). Actions are matched without
regard to case, resources with it. In both, ``*`` matches any run of characters and ``?`` any one;
in a resource ARN a wildcard stays within its colon-separated segment, but a ``*`` that ends a
segment may run past the colons (IAM User Guide, "IAM JSON policy elements: Resource").

A statement with a ``Condition`` cannot be proved to apply without the request context, so this
evaluator is conservative both ways: a conditional ``Allow`` allows nothing, a conditional ``Deny``
always applies. Policy variables (``${aws:username}``) are refused rather than guessed at.

Why not moto's ``IAMPolicyStatement`` (docs/decisions/0038-permissions-proved-by-use.md): it ignores
``NotResource`` (a statement with one applies to every resource), matches actions case-sensitively,
turns ``?`` into a regular-expression quantifier and does not escape ``.``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any


class Decision(Enum):
    ALLOWED = "allowed"
    EXPLICIT_DENY = "explicitly denied"
    IMPLICIT_DENY = "implicitly denied"


class PolicyError(ValueError):
    """A policy this evaluator cannot judge soundly (a policy variable, a statement with neither
    Action nor NotAction, an unknown Effect)."""


@lru_cache(maxsize=4096)
def _action_regex(pattern: str) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{body}$", re.IGNORECASE | re.DOTALL)


@lru_cache(maxsize=4096)
def _resource_regex(pattern: str) -> re.Pattern[str]:
    if "${" in pattern:
        raise PolicyError(f"policy variables are not supported: {pattern!r}")
    out = []
    for i, c in enumerate(pattern):
        if c == "*":
            ends_segment = i + 1 == len(pattern) or pattern[i + 1] == ":"
            out.append(".*" if ends_segment else "[^:]*")
        elif c == "?":
            out.append("[^:]")
        else:
            out.append(re.escape(c))
    return re.compile("^" + "".join(out) + "$", re.DOTALL)


def action_matches(pattern: str, action: str) -> bool:
    """``pattern`` (from Action/NotAction) matches ``action`` ("service:Operation"), any case."""
    return _action_regex(pattern).match(action) is not None


def resource_matches(pattern: str, resource: str) -> bool:
    """``pattern`` (from Resource/NotResource) matches the ARN ``resource``, case-sensitively."""
    return pattern == "*" or _resource_regex(pattern).match(resource) is not None


def _values(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class Statement:
    """One policy statement, normalised: each element a tuple of strings, ``None`` when absent."""

    effect: str
    actions: tuple[str, ...] | None
    not_actions: tuple[str, ...] | None
    resources: tuple[str, ...] | None
    not_resources: tuple[str, ...] | None
    conditional: bool
    sid: str | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Statement:
        effect = raw.get("Effect")
        if effect not in ("Allow", "Deny"):
            raise PolicyError(f"Effect must be Allow or Deny, got {effect!r}")
        if ("Action" in raw) == ("NotAction" in raw):
            raise PolicyError("a statement needs exactly one of Action and NotAction")
        if ("Resource" in raw) == ("NotResource" in raw):
            raise PolicyError("a statement needs exactly one of Resource and NotResource")

        def get(key: str) -> tuple[str, ...] | None:
            return _values(raw[key]) if key in raw else None

        return cls(
            effect=effect,
            actions=get("Action"),
            not_actions=get("NotAction"),
            resources=get("Resource"),
            not_resources=get("NotResource"),
            conditional=bool(raw.get("Condition")),
            sid=raw.get("Sid"),
        )

    def covers_action(self, action: str) -> bool:
        if self.actions is not None:
            return any(action_matches(p, action) for p in self.actions)
        return not any(action_matches(p, action) for p in self.not_actions or ())

    def covers_resource(self, resource: str) -> bool:
        if self.resources is not None:
            return any(resource_matches(p, resource) for p in self.resources)
        return not any(resource_matches(p, resource) for p in self.not_resources or ())

    def applies(self, action: str, resource: str) -> bool:
        """The statement applies to the request (its Condition aside)."""
        return self.covers_action(action) and self.covers_resource(resource)


def statements_of(documents: Iterable[Mapping[str, Any]]) -> list[Statement]:
    """The statements of policy documents (``{"Version": ..., "Statement": [...] | {...}}``)."""
    out = []
    for document in documents:
        raw = document.get("Statement", [])
        for statement in [raw] if isinstance(raw, Mapping) else raw:
            out.append(Statement.parse(statement))
    return out


def evaluate(statements: Sequence[Statement], action: str, resource: str) -> Decision:
    """The decision for ``action`` on ``resource`` under ``statements`` (explicit deny wins)."""
    allowed = False
    for statement in statements:
        if not statement.applies(action, resource):
            continue
        if statement.effect == "Deny":
            return Decision.EXPLICIT_DENY  # a conditional Deny counts as applying: conservative
        if not statement.conditional:
            allowed = True
    return Decision.ALLOWED if allowed else Decision.IMPLICIT_DENY
