"""tests/serial.py: the files the serial session of ``make test`` collects."""

from __future__ import annotations

from pathlib import Path

from tests.serial import ROOT, SERIAL, serial_files


def test_the_files_are_the_listed_ones_and_those_whose_text_marks_a_test_serial(tmp_path: Path) -> None:
    # Given a tree with one file marking a test serial, one marking a module, and one without
    (tmp_path / "tests" / "a").mkdir(parents=True)
    (tmp_path / "tests" / "a" / "test_marked.py").write_text("@pytest.mark.serial\ndef test_x(): ...\n")
    (tmp_path / "tests" / "test_module.py").write_text("pytestmark = [pytest.mark.serial]\n")
    (tmp_path / "tests" / "test_plain.py").write_text("def test_y(): ...\n")
    (tmp_path / "tests" / "helpers.py").write_text("pytest.mark.serial\n")  # not a test file
    # Then the marked test files are listed with SERIAL's, sorted, once each
    files = serial_files(tmp_path)
    assert files == sorted(SERIAL | {"tests/a/test_marked.py", "tests/test_module.py"})


def test_every_file_serial_names_exists() -> None:
    assert [name for name in sorted(SERIAL) if not (ROOT / name).is_file()] == []
