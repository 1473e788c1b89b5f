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
    """``fetch(n, after) -> (items, last_key)``; ``stop(item)`` ends the list (an ordered bound)."""
    kept: list[T] = []
    after = start_after
    examined = 0
    while True:
        items, last = fetch(limit, after)
        for item in items:
            if stop(item):
                return kept, None
            examined += 1
            after = key_of(item)
            if keep(item):
                kept.append(item)
                if len(kept) == limit:
                    return kept, after
            if examined >= max_examined:
                return kept, after
        if last is None:
            return kept, None
        after = last
