"""The list that orders the longest test files first names files that exist."""

from tests.conftest import LONGEST_FIRST, TESTS


def test_every_file_named_longest_first_exists():
    assert [name for name in LONGEST_FIRST if not (TESTS / name).is_file()] == []


def test_no_file_is_named_twice():
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
