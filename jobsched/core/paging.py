"""Filtered pages over a store that pages by "start after this key".

A filter DynamoDB cannot apply in the key condition (a run state, a lower bound on a descending
index) is applied here: pages are read until ``limit`` items match, a bounded number of items has
been examined, or the list ends. The next cursor is the key of the last item *examined*, so the next
page resumes exactly there and nothing is skipped or repeated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K")  # the key a page resumes after (a sort key string, or a DynamoDB key)

#: At most this many items are examined for one filtered page (bounded latency and cost); a page
#: may then hold fewer than ``limit`` items while ``next_cursor`` says more follow.
MAX_EXAMINED = 1000


def filtered_page(
    fetch: Callable[[int, K | None], tuple[list[T], K | None]],
    key_of: Callable[[T], K],
    keep: Callable[[T], bool],
    *,
    limit: int,
    start_after: K | None,
    stop: Callable[[T], bool] = lambda _: False,
    max_examined: int = MAX_EXAMINED,
) -> tuple[list[T], K | None]:
    """``fetch(n, after) -> (items, last_key)``; ``stop(item)`` ends the list (an ordered bound).

    The cursor returned is None when nothing can follow: once the page is full, the items after it
    are looked at (those already fetched, then further pages, within the same ``max_examined``
    budget) until one would be kept (then the cursor is the page's last item) or the list ends (then
    None), so a filtered page that holds the last match ends the list instead of sending the caller
    to an empty page. A page cut short by the budget keeps its cursor: more may follow."""
    kept: list[T] = []
    after = start_after
    examined = 0
    while True:
        items, last = fetch(limit, after)
        for i, item in enumerate(items):
            if stop(item):
                return kept, None
            examined += 1
            after = key_of(item)
            if keep(item):
                kept.append(item)
            if examined >= max_examined and len(kept) < limit:
                return kept, (after if last is not None or _more(items[i + 1 :], keep, stop) else None)
            if len(kept) == limit:
                return kept, _cursor_if_more(
                    fetch, keep, stop, items[i + 1 :], last, after, limit, max_examined - examined
                )
        if last is None:
            return kept, None
        after = last


def _cursor_if_more(
    fetch: Callable[[int, K | None], tuple[list[T], K | None]],
    keep: Callable[[T], bool],
    stop: Callable[[T], bool],
    rest: list[T],
    last: K | None,
    page_end: K,
    limit: int,
    budget: int,
) -> K | None:
    """``page_end`` if an item after the full page would be kept (or the budget ends first), else None."""
    while True:
        for item in rest:
            if stop(item):
                return None
            if keep(item) or budget <= 0:
                return page_end
            budget -= 1
        if last is None:
            return None
        rest, last = fetch(limit, last)


def _more(rest: list[T], keep: Callable[[T], bool], stop: Callable[[T], bool]) -> bool:
    """Whether the items fetched but not examined hold one that would be kept (before a stop)."""
    for item in rest:
        if stop(item):
            return False
        if keep(item):
            return True
    return False
