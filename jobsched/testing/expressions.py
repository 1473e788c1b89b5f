"""DynamoDB's expression language over plain Python items, for :class:`jobsched.testing.InMemoryTables`.

The fake evaluates the very condition, update, key-condition and filter expressions the stores send to
DynamoDB, so a conditional write keeps its meaning in tests by construction (a fake that re-implements
each store's logic could forget a condition; this one cannot). Covered: comparisons (``= <> < <= > >=``),
``BETWEEN``, ``IN``, ``AND``/``OR``/``NOT``, parentheses, ``attribute_exists``, ``attribute_not_exists``,
``attribute_type``, ``begins_with``, ``contains``, ``size``; ``SET`` (with ``+``/``-``,
``if_not_exists``, ``list_append``), ``REMOVE``, ``ADD`` and ``DELETE``; document paths (``a.b``,
``a[0]``) and ``#name``/``:value`` placeholders. Anything else raises :class:`ExpressionError`
(DynamoDB would answer ``ValidationException``).

Missing attributes compare as DynamoDB does: ``=`` and the ordering operators are false, ``<>`` true.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from jobsched.testing.reserved_words import RESERVED_WORDS

__all__ = ["MISSING", "ExpressionError", "apply_update", "condition_holds", "get_path", "parse_path"]


class ExpressionError(ValueError):
    """An expression the fake cannot parse or apply (DynamoDB answers ``ValidationException``)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<name>[#:]?[A-Za-z_][A-Za-z0-9_]*)|(?P<op><>|<=|>=|[=<>(),.\[\]+\-]))"
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"}


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ExpressionError(f"cannot read the expression at {text[pos:]!r}")
        out.append(match.group(match.lastgroup or "op"))
        pos = match.end()
    return out


# --- AST: tuples, cheap to cache ----------------------------------------------------------------------
# path:    ("path", (segment, ...))        segment: "#n" / "name" (str) or int (list index)
# value:   ("value", ":v")
# size:    ("size", path)
# compare: ("cmp", op, left, right); ("between", x, lo, hi); ("in", x, (y, ...))
# logic:   ("and", a, b); ("or", a, b); ("not", a)
# calls:   ("fn", name, (args...))


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, offset: int = 0) -> str | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok.upper() != expected):
            raise ExpressionError(f"expected {expected or 'more'} in {self.text!r}, found {tok!r}")
        self.i += 1
        return tok

    def at_keyword(self, *words: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.upper() in words

    def done(self) -> None:
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()!r} in {self.text!r}")

    # conditions
    def condition(self) -> tuple:
        left = self.conjunction()
        while self.at_keyword("OR"):
            self.take()
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> tuple:
        left = self.negation()
        while self.at_keyword("AND"):
            self.take()
            left = ("and", left, self.negation())
        return left

    def negation(self) -> tuple:
        if self.at_keyword("NOT"):
            self.take()
            return ("not", self.negation())
        return self.primary()

    def primary(self) -> tuple:
        if self.peek() == "(":
            self.take()
            inner = self.condition()
            self.take(")")
            return inner
        tok = self.peek() or ""
        if self.peek(1) == "(" and tok.lower() in {
            "attribute_exists",
            "attribute_not_exists",
            "attribute_type",
            "begins_with",
            "contains",
        }:
            return self.function()
        left = self.operand()
        if self.at_keyword("BETWEEN"):
            self.take()
            low = self.operand()
            self.take("AND")
            return ("between", left, low, self.operand())
        if self.at_keyword("IN"):
            self.take()
            self.take("(")
            items = [self.operand()]
            while self.peek() == ",":
                self.take()
                items.append(self.operand())
            self.take(")")
            return ("in", left, tuple(items))
        op = self.take()
        if op not in {"=", "<>", "<", "<=", ">", ">="}:
            raise ExpressionError(f"expected a comparison in {self.text!r}, found {op!r}")
        return ("cmp", op, left, self.operand())

    def function(self) -> tuple:
        name = self.take().lower()
        self.take("(")
        args = [self.operand()]
        while self.peek() == ",":
            self.take()
            args.append(self.operand())
        self.take(")")
        return ("fn", name, tuple(args))

    def operand(self) -> tuple:
        tok = self.peek() or ""
        if tok.lower() == "size" and self.peek(1) == "(":
            self.take()
            self.take("(")
            inner = self.path()
            self.take(")")
            return ("size", inner)
        if tok.startswith(":"):
            self.take()
            return ("value", tok)
        return self.path()

    def path(self) -> tuple:
        tok = self.name()
        segments: list[str | int] = [tok]
        while self.peek() in (".", "["):
            if self.take() == ".":
                segments.append(self.name())
            else:
                segments.append(int(self.take()))
                self.take("]")
        return ("path", tuple(segments))

    def name(self) -> str:
        tok = self.take()
        if not (tok[0].isalpha() or tok[0] in "#_") or tok.upper() in _KEYWORDS:
            raise ExpressionError(f"expected an attribute in {self.text!r}, found {tok!r}")
        if not tok.startswith("#") and tok.upper() in RESERVED_WORDS:
            raise ExpressionError(f"Attribute name is a reserved keyword; reserved keyword: {tok}")
        return tok

    # updates
    def update(self) -> list[tuple[str, tuple]]:
        actions: list[tuple[str, tuple]] = []
        seen: set[str] = set()
        while self.peek() is not None:
            clause = self.take().upper()
            if clause not in {"SET", "REMOVE", "ADD", "DELETE"} or clause in seen:
                raise ExpressionError(f"unexpected {clause!r} in {self.text!r}")
            seen.add(clause)
            while True:
                target = self.path()
                if clause == "SET":
                    self.take("=")
                    actions.append(("SET", (target, self.set_value())))
                elif clause == "REMOVE":
                    actions.append(("REMOVE", (target,)))
                else:
                    actions.append((clause, (target, self.operand())))
                if self.peek() != ",":
                    break
                self.take()
        return actions

    def set_value(self) -> tuple:
        left = self.set_term()
        if self.peek() in ("+", "-"):
            op = self.take()
            return ("arith", op, left, self.set_term())
        return left

    def set_term(self) -> tuple:
        tok = (self.peek() or "").lower()
        if tok in ("if_not_exists", "list_append") and self.peek(1) == "(":
            self.take()
            self.take("(")
            first = self.set_value() if tok == "list_append" else self.path()
            self.take(",")
            second = self.set_value()
            self.take(")")
            return (tok, first, second)
        return self.operand()


@lru_cache(maxsize=2048)
def _parse_condition(text: str) -> tuple:
    parser = _Parser(text)
    tree = parser.condition()
    parser.done()
    return tree


@lru_cache(maxsize=2048)
def _parse_update(text: str) -> tuple[tuple[str, tuple], ...]:
    return tuple(_Parser(text).update())


def parse_path(text: str) -> tuple[str | int, ...]:
    """``a.b[0]`` -> ``("a", "b", 0)`` (placeholders kept as written)."""
    parser = _Parser(text)
    tree = parser.path()
    parser.done()
    return tuple(tree[1])


# --- evaluation -----------------------------------------------------------------------------------------


class _Scope:
    def __init__(self, names: Mapping[str, str] | None, values: Mapping[str, Any] | None):
        self.names = dict(names or {})
        self.values = dict(values or {})

    def segments(self, path: tuple) -> list[str | int]:
        out: list[str | int] = []
        for segment in path[1]:
            if isinstance(segment, str) and segment.startswith("#"):
                if segment not in self.names:
                    raise ExpressionError(f"{segment} is not in the expression attribute names")
                out.append(self.names[segment])
            else:
                out.append(segment)
        return out

    def value(self, placeholder: str) -> Any:
        if placeholder not in self.values:
            raise ExpressionError(f"{placeholder} is not in the expression attribute values")
        return self.values[placeholder]


def get_path(item: Mapping[str, Any] | None, segments: list[str | int] | tuple[str | int, ...]) -> Any:
    """The value at ``segments`` in ``item``, or :data:`MISSING`."""
    current: Any = item if item is not None else {}
    for segment in segments:
        if isinstance(segment, int):
            if not isinstance(current, list) or segment >= len(current):
                return MISSING
            current = current[segment]
        else:
            if not isinstance(current, dict) or segment not in current:
                return MISSING
            current = current[segment]
    return current


def _operand(node: tuple, item: Mapping[str, Any] | None, scope: _Scope) -> Any:
    kind = node[0]
    if kind == "value":
        return scope.value(node[1])
    if kind == "path":
        return get_path(item, scope.segments(node))
    if kind == "size":
        value = get_path(item, scope.segments(node[1]))
        if value is MISSING or not isinstance(value, str | bytes | bytearray | list | dict | set | frozenset):
            return MISSING
        return Decimal(len(value.encode()) if isinstance(value, str) else len(value))
    raise ExpressionError(f"not an operand: {node[0]}")


def _comparable(a: Any, b: Any) -> bool:
    numbers = (int, float, Decimal)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if isinstance(a, numbers) and isinstance(b, numbers):
        return True
    return type(a) is type(b) and isinstance(a, str | bytes)


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "=":
        return a is not MISSING and b is not MISSING and _equal(a, b)
    if op == "<>":
        return not (a is not MISSING and b is not MISSING and _equal(a, b))
    if a is MISSING or b is MISSING or not _comparable(a, b):
        return False
    if isinstance(a, str):
        a, b = a.encode(), b.encode()  # DynamoDB orders strings by their UTF-8 bytes
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "S": lambda v: isinstance(v, str),
    "N": lambda v: isinstance(v, int | float | Decimal) and not isinstance(v, bool),
    "B": lambda v: isinstance(v, bytes | bytearray),
    "BOOL": lambda v: isinstance(v, bool),
    "NULL": lambda v: v is None,
    "M": lambda v: isinstance(v, dict),
    "L": lambda v: isinstance(v, list),
    "SS": lambda v: isinstance(v, set | frozenset) and all(isinstance(x, str) for x in v),
    "NS": lambda v: isinstance(v, set | frozenset) and all(isinstance(x, int | Decimal) for x in v),
}


def _evaluate(node: tuple, item: Mapping[str, Any] | None, scope: _Scope) -> bool:
    kind = node[0]
    if kind == "and":
        return _evaluate(node[1], item, scope) and _evaluate(node[2], item, scope)
    if kind == "or":
        return _evaluate(node[1], item, scope) or _evaluate(node[2], item, scope)
    if kind == "not":
        return not _evaluate(node[1], item, scope)
    if kind == "cmp":
        return _compare(node[1], _operand(node[2], item, scope), _operand(node[3], item, scope))
    if kind == "between":
        value = _operand(node[1], item, scope)
        low, high = _operand(node[2], item, scope), _operand(node[3], item, scope)
        return _compare(">=", value, low) and _compare("<=", value, high)
    if kind == "in":
        value = _operand(node[1], item, scope)
        return any(_compare("=", value, _operand(option, item, scope)) for option in node[2])
    if kind == "fn":
        name, args = node[1], node[2]
        if name in ("attribute_exists", "attribute_not_exists"):
            exists = _operand(args[0], item, scope) is not MISSING
            return exists if name == "attribute_exists" else not exists
        value = _operand(args[0], item, scope)
        other = _operand(args[1], item, scope) if len(args) > 1 else MISSING
        if name == "begins_with":
            return (
                isinstance(value, str | bytes) and type(value) is type(other) and value.startswith(other)  # type: ignore[arg-type]
            )
        if name == "contains":
            if isinstance(value, str):
                return isinstance(other, str) and other in value
            if isinstance(value, set | frozenset | list):
                return any(_compare("=", element, other) for element in value)
            return False
        if name == "attribute_type":
            return value is not MISSING and _TYPES.get(str(other), lambda _: False)(value)
    raise ExpressionError(f"cannot evaluate {kind}")


def condition_holds(
    expression: str,
    item: Mapping[str, Any] | None,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
) -> bool:
    """Whether a condition (or key condition, or filter) ``expression`` holds on ``item`` (None: absent)."""
    return _evaluate(_parse_condition(expression), item, _Scope(names, values))


def _set_value(node: tuple, item: Mapping[str, Any], scope: _Scope) -> Any:
    kind = node[0]
    if kind == "arith":
        left, right = _set_value(node[2], item, scope), _set_value(node[3], item, scope)
        if not (_TYPES["N"](left) and _TYPES["N"](right)):
            raise ExpressionError("an operand in the update expression has an incorrect data type")
        return Decimal(left) + Decimal(right) if node[1] == "+" else Decimal(left) - Decimal(right)
    if kind == "if_not_exists":
        current = _operand(node[1], item, scope)
        return _set_value(node[2], item, scope) if current is MISSING else current
    if kind == "list_append":
        first, second = _set_value(node[1], item, scope), _set_value(node[2], item, scope)
        if not (isinstance(first, list) and isinstance(second, list)):
            raise ExpressionError("list_append takes two lists")
        return [*first, *second]
    value = _operand(node, item, scope)
    if value is MISSING:
        raise ExpressionError(
            "the provided expression refers to an attribute that does not exist in the item"
        )
    return value


def _assign(item: dict[str, Any], segments: list[str | int], value: Any) -> None:
    parent: Any = get_path(item, segments[:-1]) if len(segments) > 1 else item
    last = segments[-1]
    if isinstance(last, int):
        if not isinstance(parent, list):
            raise ExpressionError("the document path provided in the update expression is invalid for update")
        if last >= len(parent):
            parent.append(value)
        else:
            parent[last] = value
    else:
        if not isinstance(parent, dict):
            raise ExpressionError("the document path provided in the update expression is invalid for update")
        parent[last] = value


def _remove(item: dict[str, Any], segments: list[str | int]) -> None:
    parent: Any = get_path(item, segments[:-1]) if len(segments) > 1 else item
    last = segments[-1]
    if isinstance(last, int):
        if isinstance(parent, list) and last < len(parent):
            del parent[last]
    elif isinstance(parent, dict):
        parent.pop(last, None)


def apply_update(
    expression: str,
    item: dict[str, Any],
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``item`` (a copy the caller owns) with the update ``expression`` applied; every operand is read
    from the item as it was before the update, as DynamoDB does."""
    import copy

    scope = _Scope(names, values)
    before = copy.deepcopy(item)
    targets: list[tuple[str, ...]] = []
    planned: list[tuple[str, list[str | int], Any]] = []
    for clause, args in _parse_update(expression):
        segments = scope.segments(args[0])
        key = tuple(str(s) for s in segments)
        for other in targets:  # DynamoDB refuses two actions on overlapping paths
            if other[: len(key)] == key[: len(other)]:
                raise ExpressionError("two document paths overlap with each other")
        targets.append(key)
        if clause == "SET":
            planned.append(("SET", segments, _set_value(args[1], before, scope)))
        elif clause == "REMOVE":
            planned.append(("REMOVE", segments, None))
        else:
            planned.append((clause, segments, _operand(args[1], before, scope)))
    removals = [p for p in planned if p[0] == "REMOVE"]
    for clause, segments, value in planned:
        if clause == "SET":
            _assign(item, segments, value)
        elif clause == "ADD":
            current = get_path(before, segments)
            if _TYPES["N"](value):
                base = Decimal(0) if current is MISSING else current
                if not _TYPES["N"](base):
                    raise ExpressionError("an operand in the update expression has an incorrect data type")
                _assign(item, segments, Decimal(base) + Decimal(value))
            elif isinstance(value, set | frozenset):
                base_set = set() if current is MISSING else set(current)
                _assign(item, segments, base_set | set(value))
            else:
                raise ExpressionError("ADD takes a number or a set")
        elif clause == "DELETE":
            current = get_path(before, segments)
            if current is not MISSING:
                left = set(current) - set(value)
                if left:
                    _assign(item, segments, left)
                else:
                    _remove(item, segments)
    # list elements removed from the highest index down, so earlier indexes stay valid
    for _, segments, _ in sorted(removals, key=lambda p: [(-s if isinstance(s, int) else 0) for s in p[1]]):
        _remove(item, segments)
    return item
