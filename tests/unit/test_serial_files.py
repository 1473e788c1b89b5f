"""tests/serial.py: the files the serial session of ``make test`` collects."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.serial import LAST, ROOT, SECOND_LANE, SERIAL, THIRD_LANE, main, serial_files


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


def test_the_permissions_check_is_printed_apart_or_left_out() -> None:
    # Given the real tree, When the serial files are printed whole, before the last, and the last
    every = main([]).splitlines()
    before = main(["--before-last"]).splitlines()
    last = main(["--last"]).splitlines()
    # Then the permissions check is the one file apart, and together they are every serial file
    assert last == [f"tests/infra/{LAST}"]
    assert f"tests/infra/{LAST}" not in before
    assert sorted(before + last) == every == serial_files()


def test_the_three_lanes_hold_every_serial_file_but_the_permissions_check_once() -> None:
    # Given the real tree, When the three lanes are printed
    first = main(["--lane", "1"]).splitlines()
    second = main(["--lane", "2"]).splitlines()
    third = main(["--lane", "3"]).splitlines()
    # Then the second and third are SECOND_LANE's and THIRD_LANE's files, each a serial file, and the
    # first the rest before the last
    assert second == sorted(SECOND_LANE)
    assert third == sorted(THIRD_LANE)
    assert set(second) | set(third) <= set(serial_files())
    assert not set(first) & set(second) and not set(first) & set(third) and not set(second) & set(third)
    assert sorted(first + second + third) == main(["--before-last"]).splitlines()


def test_a_serial_file_no_lane_names_goes_to_the_first(tmp_path: Path) -> None:
    # Given a tree whose one new file marks a test serial (every SERIAL file present too)
    for name in SERIAL | SECOND_LANE | THIRD_LANE:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "tests" / "test_new.py").write_text("@pytest.mark.serial\ndef test_x(): ...\n")
    # Then the first lane runs it, the second and third do not
    assert "tests/test_new.py" in main(["--lane", "1"], tmp_path).splitlines()
    assert "tests/test_new.py" not in main(["--lane", "2"], tmp_path).splitlines()
    assert "tests/test_new.py" not in main(["--lane", "3"], tmp_path).splitlines()


def test_an_unknown_option_is_refused() -> None:
    with pytest.raises(SystemExit, match=r"usage: python -m tests\.serial"):
        main(["--first"])
    with pytest.raises(SystemExit, match=r"usage: python -m tests\.serial"):
        main(["--lane", "4"])
