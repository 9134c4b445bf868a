"""Hostile YAML front matter: alias bombs in any position, deep nesting, absurd numbers.

The README's front matter is read twice, by the licence analyser and by the raw diff,
both through ``tracker.core.bounded.load_yaml``. The alias-refusing loader the licence
analyser had missed the raw diff altogether (``yaml.safe_load``), where a 453-byte
"billion laughs" took 35 s and 3.2 GB; and ``int()`` of a 5,000-digit or sexagesimal
scalar raised ``ValueError`` out of the analyser.
"""

from __future__ import annotations

import pytest

from tests.findings.sources import make_change
from tests.hostile.content_support import MiB, run_python
from tracker.core.diff import diff_text
from tracker.core.findings import licence
from tracker.core.findings.rules import SeverityRules

RULES = SeverityRules.default()
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
BOMBS = {
    # the classic, padded to the issue's 453 bytes
    "values": "---\nlicense: mit\n" + LAUGHS + "#" * (453 - 22 - len(LAUGHS)) + "\n---\n",
    # aliases as mapping keys: each level is a mapping whose complex keys are aliases
    "keys": "---\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} {{? *{p} : 1, ? [*{p}, *{p}] : 2, ? [*{p}, *{p}, *{p}] : 3, ? [*{p}, *{p}, *{p}, *{p}] : 4}}\n"
        for p, c in zip("abcdefgh", "bcdefghi")) + "---\n",
    # merge keys: every level merges the previous one and adds a list of aliases
    "merges": "---\na: &a {x0: [x, x, x, x, x, x, x, x, x]}\n" + "".join(
        f"{c}: &{c} {{<<: *{p}, {c}1: [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]}}\n"
        for p, c in zip("abcdefgh", "bcdefghi")) + "---\n",
    # flow style inside block style, aliases of aliases in one line each
    "flow": "---\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9)) + "---\n",
}
EXPANSION = "YAML refused: YAML expands to more than 100,000 nodes (aliases counted in full)"


def test_the_billion_laughs_is_453_bytes():
    assert len(BOMBS["values"].encode()) == 453


@pytest.mark.parametrize("shape", sorted(BOMBS))
def test_alias_bombs_are_refused_small_in_both_readers(shape):
    """Under a 512 MiB address space: the licence finding and the raw diff both say what was refused."""
    bomb = BOMBS[shape]
    result = run_python(
        f"""
        import json
        from tests.hostile.content_support import peak_mb
        from tracker.core.diff import diff_text
        from tracker.core.findings import licence
        bomb = {bomb!r}.encode()
        out = {{"licence": licence.front_matter(bomb), "diff": diff_text("README.md", b"---\\nlicense: mit\\n---\\n", bomb)}}
        out["peak_mb"] = peak_mb()
        print(json.dumps(out))
        """,
        memory=512 * MiB, timeout=300,
    ).result()
    assert result["licence"] == [{}, EXPANSION]
    assert result["diff"] == {"kind": "error", "side": "new",
                              "error": "UntrustedInput: YAML expands to more than 100,000 nodes (aliases counted in full)"}
    assert result["peak_mb"] < 200


def test_licence_analyser_reports_the_bomb_as_malformed_front_matter():
    change, sources = make_change({"README.md": b"---\nlicense: mit\n---\n"}, {"README.md": BOMBS["keys"].encode()})
    found = licence.analyse(change, sources, RULES)
    assert [(f.code, f.after) for f in found] == [
        ("licence.front_matter_malformed", EXPANSION),
        ("licence.more_restrictive", {}),
    ]


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("x: " + "[" * 100_000 + "]" * 100_000, "YAML refused: YAML nested deeper than 64 levels"),
        ("x: " + "{a: " * 20_000 + "1" + "}" * 20_000, "YAML refused: YAML nested deeper than 64 levels"),
        ("".join("  " * i + f"k{i}:\n" for i in range(200)), "YAML refused: YAML nested deeper than 64 levels"),
        ("a: &a [1, *a]", "YAML refused: YAML alias refers to a node that contains it (recursive alias)"),
    ],
    ids=["flow-sequences", "flow-mappings", "block-mappings", "recursive-alias"],
)
def test_deep_or_recursive_front_matter_is_refused(block, problem):
    assert licence.front_matter(f"---\n{block}\n---\n".encode()) == ({}, problem)
    assert diff_text("README.md", None, f"---\n{block}\n---\n".encode()) == {
        "kind": "error", "side": "new", "error": problem.replace("YAML refused: ", "UntrustedInput: ").replace(
            "UntrustedInput: YAML nested", "NestedTooDeep: YAML nested")}


def test_absurd_numbers_stay_text_instead_of_raising():
    digits = "9" * 5000
    sexagesimal = ":".join(["1"] * 20_000)
    old = b"---\nlicense: mit\n---\n"
    new = f"---\nlicense: {digits}\nbase_model: {sexagesimal}\n---\n".encode()
    change, sources = make_change({"README.md": old}, {"README.md": new})
    found = licence.analyse(change, sources, RULES)
    assert [f.code for f in found] == ["licence.more_restrictive", "licence.base_model_changed"]
    assert found[0].after == {"license": digits}
    assert found[1].after == sexagesimal
    assert diff_text("README.md", old, new)["deepdiff"]["values_changed"]["root['license']"] == {
        "new_value": digits, "old_value": "mit"}


def test_plain_aliases_as_yaml_dump_writes_them_are_read():
    card = b"---\nlicense: &l apache-2.0\ndatasets: &d [c4, pile]\ntrain: {license: *l, datasets: *d}\n---\n"
    assert licence.front_matter(card) == (
        {"license": "apache-2.0", "datasets": ["c4", "pile"], "train": {"license": "apache-2.0", "datasets": ["c4", "pile"]}},
        None)
