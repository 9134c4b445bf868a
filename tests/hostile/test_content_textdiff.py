"""Hostile text: a 40 MB multi-line .py or template, and line orders crafted against difflib.

``tracker.core.diff.text_diff`` is the one text diff: capped in bytes and lines per side, the
common head and tail skipped, the rest aligned by an exact bit-parallel LCS bounded by
``MAX_TEXT_DIFF_CELLS``; past a cap, one line of hashes and line counts. difflib took
over 300 s on the 40 MB file and ~50 s on 20,000 pairwise-swapped lines.
"""

from __future__ import annotations

import difflib
import hashlib
import re

import pytest

from tests.findings.sources import make_change
from tracker.core.diff import MAX_TEXT_DIFF_CELLS, diff_text, text_diff
from tracker.core.findings import remote_code
from tracker.core.findings.rules import SeverityRules

RULES = SeverityRules.default()


def short(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def apply(old: str, diff_lines: tuple[str, ...]) -> list[str]:
    """Rebuild the new text from a unified diff of ``old``: proves the diff is a correct one."""
    a, out, i, k = old.splitlines(), [], 0, 2
    while k < len(diff_lines):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@$", diff_lines[k])
        assert m, diff_lines[k]
        start = int(m.group(1)) - (1 if int(m.group(2) or 1) else 0)
        out += a[i:start]
        i, k = start, k + 1
        while k < len(diff_lines) and not diff_lines[k].startswith("@@"):
            tag, line = diff_lines[k][0], diff_lines[k][1:]
            if tag in " -":
                assert a[i] == line
                i += 1
            if tag in " +":
                out.append(line)
            k += 1
    return out + a[i:]


@pytest.mark.timeout(60)
def test_a_40_mb_python_file_is_summarised_by_hashes():
    big = b"".join(b"value_%d = compute(%d)  # padding padding padding\n" % (i, i) for i in range(800_000))
    assert len(big) > 40_000_000
    small = b"value_0 = compute(0)\n"
    diff = text_diff(small, big, "modeling.py")
    assert not diff.diffed and diff.added is None
    assert diff.lines == (f"changed: sha256 {short(small)} → {short(big)}, 1 lines → 800,000 lines "
                          "(not diffed: over 4,194,304 bytes)",)
    assert diff_text("chat_template.jinja", small, big) == {"kind": "text", "unified": diff.lines[0]}
    change, sources = make_change({"modeling.py": small}, {"modeling.py": big})
    [finding] = remote_code.analyse(change, sources, RULES)
    assert finding.summary == "Python file changed: modeling.py (too large to diff); not referenced by auto_map"
    assert finding.evidence["diff"] == diff.lines[0]
    assert (finding.evidence["lines_added"], finding.evidence["diff_truncated"]) == (None, True)


@pytest.mark.timeout(60)
def test_swapped_line_pairs_are_diffed_exactly_within_the_cap():
    n = 10_000
    old_lines = [f"line {i}" for i in range(n)]
    new_lines = [x for i in range(0, n, 2) for x in (old_lines[i + 1], old_lines[i])]
    old, new = "\n".join(old_lines), "\n".join(new_lines)
    diff = text_diff(old, new, "m.py", max_lines=10**6)
    assert diff.diffed and (diff.added, diff.removed) == (n // 2, n // 2)  # a minimal diff: one line per pair moves
    assert apply(old, diff.lines) == new_lines


@pytest.mark.timeout(60)
def test_a_changed_region_past_the_cell_cap_is_summarised():
    n = 20_000
    old_lines = [f"line {i}" for i in range(n)]
    new_lines = [x for i in range(0, n, 2) for x in (old_lines[i + 1], old_lines[i])]
    old, new = "\n".join(old_lines).encode(), "\n".join(new_lines).encode()
    assert n * n > MAX_TEXT_DIFF_CELLS
    assert text_diff(old, new, "m.py").lines == (
        f"changed: sha256 {short(old)} → {short(new)}, 20,000 lines → 20,000 lines "
        "(not diffed: changed region over 100,000,000 line pairs)",)


@pytest.mark.timeout(60)
def test_a_small_edit_in_a_huge_common_body_is_still_diffed():
    body = [f"x{i % 100} = {i % 100}" for i in range(90_000)]  # repetitive lines: difflib's worst friend
    old = "\n".join(body)
    new = "\n".join(body[:45_000] + ["import os; os.system('id')"] + body[45_000:])
    diff = text_diff(old, new, "m.py")
    assert (diff.added, diff.removed) == (1, 0)
    assert diff.lines == ("--- a/m.py", "+++ b/m.py", "@@ -44998,6 +44998,7 @@", " x97 = 97", " x98 = 98",
                          " x99 = 99", "+import os; os.system('id')", " x0 = 0", " x1 = 1", " x2 = 2")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("", "one\ntwo\n"),
        ("one\ntwo\n", ""),
        ("\n".join(map(str, range(40))), "\n".join(map(str, [*range(8), 99, *range(8, 20), *range(25, 40), 77]))),
        ("x\n" * 3 + "y\n", "y\n" + "x\n" * 3),
    ],
)
def test_ordinary_edits_read_as_difflib_writes_them(old, new):
    expected = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "a/f", "b/f", lineterm=""))
    assert apply(old, text_diff(old, new, "f").lines) == new.splitlines()
    if old.count("x") < 3:  # repeated lines may align elsewhere; both are correct diffs
        assert list(text_diff(old, new, "f").lines) == expected


def test_output_is_capped_with_exact_counts():
    old = "\n".join(f"a{i}" for i in range(1000))
    new = "\n".join(f"b{i}" for i in range(1000))
    diff = text_diff(old, new, "f", max_lines=10)
    assert (len(diff.lines), diff.total_lines, diff.added, diff.removed) == (10, 2003, 1000, 1000)
    assert diff.text().splitlines()[-1] == "... 1993 more lines"
