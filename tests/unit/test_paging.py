"""filtered_page: a filtered page ends the list when nothing can follow (issue 12 §4)."""

from __future__ import annotations

from jobsched.core.paging import filtered_page


def _store(items: list[int]):
    """A store of ints paged by "start after this value", ``Limit``-like: a full page has a cursor."""

    def fetch(n: int, after: int | None) -> tuple[list[int], int | None]:
        rest = [i for i in items if after is None or i > after]
        page = rest[:n]
        return page, (page[-1] if len(page) == n and page else None)

    return fetch


def test_a_page_holding_the_last_match_has_no_cursor():
    # Given 1..10 where only 3 and 7 are kept / When pages of 2 are read
    found, cursor = filtered_page(
        _store(list(range(1, 11))), lambda i: i, lambda i: i in (3, 7), limit=2, start_after=None
    )
    # Then one page holds both and says the list ended
    assert (found, cursor) == ([3, 7], None)


def test_a_page_filled_at_the_end_of_the_fetched_items_with_nothing_after_has_no_cursor():
    # Given exactly two items, both kept / When a page of 2 is read (the store returned fewer than asked)
    found, cursor = filtered_page(_store([1, 2, 3]), lambda i: i, lambda i: i != 3, limit=2, start_after=None)
    # Then the page is full and, the rest of the fetched items holding no match, the list ends
    assert (found, cursor) == ([1, 2], None)


def test_a_full_page_with_more_matches_after_it_has_a_cursor():
    found, cursor = filtered_page(
        _store(list(range(1, 11))), lambda i: i, lambda i: i % 2 == 0, limit=2, start_after=None
    )
    assert found == [2, 4] and cursor == 4
    more, _ = filtered_page(
        _store(list(range(1, 11))), lambda i: i, lambda i: i % 2 == 0, limit=2, start_after=cursor
    )
    assert more == [6, 8]


def test_the_examined_bound_still_gives_a_cursor_when_the_store_goes_on():
    found, cursor = filtered_page(
        _store(list(range(1, 101))),
        lambda i: i,
        lambda i: i == 99,
        limit=5,
        start_after=None,
        max_examined=10,
    )
    assert found == [] and cursor == 10
