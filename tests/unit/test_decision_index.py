"""The records people look for stay true to the files they name.

docs/decisions/README.md is the index of the decision records: every record in docs/decisions/ has a
row, no number is skipped without a row saying the record is missing, and each row's status is its
record's (the first sentence of the record's ``Status:`` line). CHANGELOG.md names only docs/ paths
that exist.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECISIONS = ROOT / "docs" / "decisions"
INDEX = DECISIONS / "README.md"
RECORD_NAME = re.compile(r"^(\d{4})-.+\.md$")
ROW = re.compile(r"^\|\s*(\d{4})\s*\|")
LINK = re.compile(r"\]\(([^)#\s]+)")
DOCS_PATH = re.compile(r"(?<![\w./-])(docs/[\w./-]*\w)")


def folded(text: str) -> str:
    return " ".join(text.split())


def records() -> dict[str, Path]:
    """The records in docs/decisions/, by number."""
    found = {}
    for path in DECISIONS.iterdir():
        if match := RECORD_NAME.match(path.name):
            found[match.group(1)] = path
    return found


def record_status(path: Path) -> str:
    """The first sentence of the record's ``Status:`` line (the line may wrap, and may follow other
    words on its line), looked for before the record's first section."""
    head = path.read_text().split("\n## ")[0]
    match = re.search(r"\bStatus:(.*?)(?:\n\s*\n|\Z)", head, re.S)
    assert match, f"{path.name}: no 'Status:' line before its first section"
    paragraph = folded(match.group(1))
    sentence = re.match(r"(.+?)\.(?:\s|$)", paragraph)
    return sentence.group(1) if sentence else paragraph


def index_rows() -> dict[str, tuple[str | None, str]]:
    """The index's rows by number: the file the row links to (None if it links to none) and its
    status cell."""
    assert INDEX.exists(), "docs/decisions/README.md, the index of the decision records, is missing"
    rows: dict[str, tuple[str | None, str]] = {}
    for line in INDEX.read_text().splitlines():
        if not (match := ROW.match(line)):
            continue
        number = match.group(1)
        assert number not in rows, f"the index has two rows for {number}"
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) >= 3, f"the index's row {number} has no status cell"
        link = LINK.search(cells[1])
        rows[number] = (link.group(1) if link else None, folded(cells[2]))
    return rows


def test_every_record_has_a_row_that_links_to_it():
    """Given the records in docs/decisions/, When the index is read, Then each has the row of its number,
    linking to its file."""
    rows = index_rows()
    missing = sorted(number for number in records() if number not in rows)
    assert not missing, f"records with no row in docs/decisions/README.md: {missing}"
    wrong = {number: rows[number][0] for number, path in records().items() if rows[number][0] != path.name}
    assert not wrong, f"rows that do not link to their record's file: {wrong}"


def test_every_row_names_a_record_or_says_it_is_missing():
    """Given the index, Then a row's link names a file that exists, a row without a link says the record
    is missing, and no number up to the highest is left without a row."""
    rows = index_rows()
    dangling = {
        number: link
        for number, (link, _) in rows.items()
        if link is not None and not (DECISIONS / link).is_file()
    }
    assert not dangling, f"rows linking to no file: {dangling}"
    unexplained = [
        number for number, (link, status) in rows.items() if link is None and not status.startswith("missing")
    ]
    assert not unexplained, f"rows with no record whose status does not say 'missing': {unexplained}"
    highest = max(int(number) for number in [*rows, *records()])
    skipped = [f"{n:04d}" for n in range(1, highest + 1) if f"{n:04d}" not in rows]
    assert not skipped, f"numbers with no row in the index: {skipped}"


def test_each_rows_status_is_its_records():
    """Given a row that links to a record, Then its status cell is the first sentence of that record's
    Status line, as written (whitespace aside)."""
    rows = index_rows()
    differ = {
        number: {"index": status, "record": record_status(path)}
        for number, path in sorted(records().items())
        if number in rows and (status := rows[number][1]) != record_status(path)
    }
    assert not differ, f"statuses that differ between the index and the record: {differ}"


def test_the_changelog_names_only_docs_that_exist():
    """Given CHANGELOG.md, Then every docs/ path it names (as a link or in its text) exists."""
    text = (ROOT / "CHANGELOG.md").read_text()
    named = {link for link in LINK.findall(text) if link.startswith("docs/")} | set(DOCS_PATH.findall(text))
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"CHANGELOG.md names docs/ paths that do not exist: {missing}"
