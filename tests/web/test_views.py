"""The pure parts of the pages: side-by-side diffs, chart points, sections, the card table."""

from __future__ import annotations

import json
import re

from tests.web.synthetic import E5_CONFIG
from tracker.core.estimate import estimate
from tracker.core.model import Finding, StoredEstimate
from tracker.surfaces.web.charts import (
    MARKERS_SHOWN,
    NARROW,
    ChartPoint,
    axis_note,
    axis_range,
    estimate_chart,
    human_params,
    points,
    severity_strip,
    severity_timeline,
)
from tracker.surfaces.web.diffs import DiffRow, side_by_side
from tracker.surfaces.web.routes import advisory_details
from tracker.surfaces.web.views import (
    advisory_findings,
    estimate_changes,
    estimate_view,
    group_findings,
    revision_sections,
)


def test_side_by_side_pairs_removed_runs_with_the_added_runs_after_them():
    diff = side_by_side("--- old: user\n+++ new: user\n@@ -1,4 +1,3 @@\n same\n-a\n-b\n+A\n keep\n-gone\n"
                        "… 3 more diff lines")
    assert (diff.old_label, diff.new_label) == ("old: user", "new: user")
    assert diff.rows == (
        DiffRow("hunk", "@@ -1,4 +1,3 @@", "@@ -1,4 +1,3 @@"),
        DiffRow("line", "same", "same", "context", "context"),
        DiffRow("line", "a", "A", "removed", "added"),
        DiffRow("line", "b", "", "removed", "empty"),
        DiffRow("line", "keep", "keep", "context", "context"),
        DiffRow("line", "gone", "", "removed", "empty"),
        DiffRow("note", "… 3 more diff lines", "… 3 more diff lines"),
    )
    assert (diff.removed, diff.added) == (3, 1)


def test_a_line_starting_with_dashes_inside_a_hunk_is_a_removal_not_a_label():
    diff = side_by_side("--- a\n+++ b\n@@ -1 +1 @@\n---- x\n++++ y\n")
    assert diff.rows[1:] == (DiffRow("line", "--- x", "+++ y", "removed", "added"),)


def test_chart_points_carry_the_last_estimate_forward_and_reset_on_unsupported():
    e = {"supported": True, "params": 10, "full_finetune_gb": 1.5, "lora_gb": 0.5}
    got = points([("a", e), ("b", None), ("c", {"supported": False}), ("d", None), ("e", {**e, "params": 20})])
    assert got == [ChartPoint("a", 10.0, 1.5, 0.5, True), ChartPoint("b", 10.0, 1.5, 0.5, False),
                   ChartPoint("c", None, None, None, True), ChartPoint("d", None, None, None, False),
                   ChartPoint("e", 20.0, 1.5, 0.5, True)]


def test_no_chart_without_an_estimate_and_a_stepped_line_with_them():
    assert estimate_chart(points([("a", None), ("b", None)])) is None
    e = {"supported": True, "params": 100e6, "full_finetune_gb": 11.2, "lora_gb": 1.69}
    svg = estimate_chart(points([("aaaa", e), ("bbbb", None), ("cccc", {**e, "params": 200e6})]))
    assert svg is not None and svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and "style=" not in svg
    # parameters: 100M (y 116) held to the third revision, then the step up to 200M (y 56; the axis runs 50M-250M)
    assert '<polyline fill="none" stroke="#1f5fbf" stroke-width="2" points="64.0,116.0 344.0,116.0 624.0,116.0 ' \
           '624.0,56.0"/>' in svg
    assert "<title>cccc: parameters 200M</title>" in svg
    assert ">T4 16 GB</text>" in svg  # the smallest card that holds the largest figure


def test_axes_are_scaled_to_the_data_with_a_margin_not_to_zero():
    assert axis_range([559_890_432, 567_800_000]) == (557_500_000, 570_000_000, 2_500_000)
    assert axis_range([100e6, 200e6]) == (50e6, 250e6, 50e6)
    assert axis_range([1.69, 11.2, 16]) == (0.0, 20.0, 5.0)  # non-negative data: never below zero
    assert axis_range([7.0, 7.0]) == (6.0, 8.0, 0.5)  # a flat line gets a tenth of its value each side


def test_a_small_parameter_change_fills_the_panel_and_every_point_has_a_tooltip():
    e = {"supported": True, "params": 559_890_432, "full_finetune_gb": 9.0, "lora_gb": 2.2}
    svg = estimate_chart(points([("old1", e), ("mid2", None), ("new3", {**e, "params": 567_800_000})]))
    assert svg is not None
    ticks = re.findall(r'<text x="58" [^>]*text-anchor="end" fill="#555">([^<]*)</text>', svg)
    assert ticks[:6] == ["557.5M", "560M", "562.5M", "565M", "567.5M", "570M"]
    # the axis says it does not start at zero, and is drawn broken at its foot
    assert ('<text x="624" y="16" font-size="11" text-anchor="end" fill="#555">axis starts at 557.5M, not zero'
            '</text>') in svg
    assert '<path d="M59,143 l10,-4 M59,138 l10,-4" stroke="#555" stroke-width="1.5"/>' in svg
    assert axis_note(points([("old1", e), ("new3", {**e, "params": 567_800_000})])) == (
        "The parameter axis starts at 557.5M, not at zero: the count moves by 1.4% at most (559.9M to 567.8M).")
    # 559.9M sits at y 123.1 and 567.8M at y 47.1 of a plot 26-146 high: the step spans most of the panel
    assert 'points="64.0,123.1 344.0,123.1 624.0,123.1 624.0,47.1"' in svg
    titles = re.findall(r"<circle [^>]*><title>([^<]*)</title></circle>", svg)
    assert titles == ["old1: parameters 559.9M", "new3: parameters 567.8M",
                      "old1: full fine-tune 9 GB", "new3: full fine-tune 9 GB",
                      "old1: LoRA 2.2 GB", "new3: LoRA 2.2 GB"]
    assert svg.count("<circle ") == len(titles)  # no dot without its tooltip


def test_past_the_marker_cap_the_dots_kept_are_where_the_figure_moved():
    e = {"supported": True, "params": 1e6, "full_finetune_gb": 1.0, "lora_gb": 0.5}
    history = [(f"r{i}", {**e, "params": 1e6 + (i // 10) * 1e3}) for i in range(MARKERS_SHOWN * 3)]
    svg = estimate_chart(points(history))
    assert svg is not None
    shown = re.findall(r"<title>(r\d+): parameters [^<]*</title>", svg)
    assert len(shown) == MARKERS_SHOWN
    assert {f"r{i}" for i in range(0, MARKERS_SHOWN * 3, 10)} <= set(shown)  # every change point has its dot


def test_human_params():
    assert [human_params(v) for v in (559_890_432, 8_030_261_248, 1e9, 22_713_216, 512)] == [
        "559.9M", "8.03B", "1B", "22.7M", "512"]


def test_findings_group_in_reading_order_most_severe_first():
    findings = [Finding.from_json({"code": "x", "category": c, "severity": s, "summary": t})
                for c, s, t in (("files", "info", "f"), ("tokenizer", "low", "t1"), ("tokenizer", "high", "t2"),
                                ("config", "moderate", "c"))]
    groups = group_findings(findings)
    assert [(g.label, g.worst, [f.summary for f in g.findings]) for g in groups] == [
        ("Config", "moderate", ["c"]), ("Tokenizer", "high", ["t2", "t1"]), ("Files", "info", ["f"])]


def test_revision_sections_place_each_finding_once():
    findings = [
        {"code": "tokenizer.added_tokens_added", "category": "tokenizer", "severity": "high", "summary": "2 added",
         "evidence": {"examples": [{"content": "<|im_end|>", "id": 32000}, {"content": "<tool>", "id": 32001}]}},
        {"code": "tokenizer.vocab_removed", "category": "tokenizer", "severity": "high", "summary": "1 removed",
         "evidence": {"examples": [{"token": "▁cat", "id": 7}]}},
        {"code": "weights.tensors_added", "category": "weights", "severity": "high", "summary": "1 tensor",
         "evidence": {"count": 1, "tensors": {"lm_head.weight": {"dtype": "BF16", "shape": [32000, 4096]}}}},
        {"code": "generation.eos_token_id_changed", "category": "generation", "severity": "high", "summary": "eos",
         "path": "generation_config.json", "before": 2, "after": [2, 7], "evidence": {"key": "eos_token_id"}},
        {"code": "licence.detected", "category": "licence", "severity": "info", "summary": "mit"},
    ]
    sections = revision_sections([Finding.from_json(f) for f in findings], None)
    assert [(t.direction, t.examples) for t in sections.tokens] == [
        ("added", (("<|im_end|>", "id 32000"), ("<tool>", "id 32001"))), ("removed", (("▁cat", "id 7"),))]
    assert [t.tensors for t in sections.tensors] == [(("lm_head.weight", "BF16", "32000 × 4096"),)]
    assert [(k.path, k.key, k.before, k.after) for k in sections.keys] == [
        ("generation_config.json", "eos_token_id", "2", "[2, 7]")]
    assert [g.label for g in sections.others] == ["Licence"]


def test_the_card_table_is_the_reference_pages():
    est = estimate(json.loads(E5_CONFIG.read_text())).to_json()
    view = estimate_view(StoredEstimate.from_json(est))
    assert (view.params, view.full_gb, view.lora_gb, view.seq_len) == ("559,890,432", "11.2 GB", "1.69 GB", "514")
    rows = {c.card: (c.full, c.lora, c.serve) for c in view.cards}
    assert rows["T4 16 GB"] == ("batch 7, borderline", "batch 29", "batch 253")
    assert rows["H200 141 GB"] == ("batch 259", "batch 281", "batch 2404")


def test_the_narrow_chart_keeps_12_unit_labels_on_a_360_unit_drawing_and_names_cards_inside_the_plot():
    e = {"supported": True, "params": 559_890_432, "full_finetune_gb": 30.0, "lora_gb": 9.0}
    pts = points([("old1", e), ("new3", {**e, "params": 567_800_000, "full_finetune_gb": 44.0})])
    svg = estimate_chart(pts, NARROW)
    assert svg is not None
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 360 436" role="img" '
                          'class="chart chart-narrow" aria-labelledby="chart-title-narrow">')
    assert set(re.findall(r'font-size="(\d+)"', svg)) == {"12", "14"}
    # the note has a line of its own under the title; the legend its own line in the memory panel
    assert '<text x="50" y="34" font-size="12" fill="#555">axis starts at 557.5M, not zero</text>' in svg
    assert '<text x="74" y="260" font-size="12" fill="#333">full fine-tune</text>' in svg
    # cards up to the first that holds 44 GB, named right-aligned inside the plot, never within a line of each other
    names = re.findall(r'<text x="348" y="([\d.]+)" font-size="12" text-anchor="end" fill="#555">([^<]*)</text>', svg)
    assert [n for _, n in names] == ["L40S 48 GB", "A100 40 GB", "L4 / A10G 24 GB", "T4 16 GB"]
    ys = [float(y) for y, _ in names]
    assert all(b - a >= 13 for a, b in zip(ys, ys[1:], strict=False))
    assert estimate_chart(pts) is not None and 'class="chart chart-wide"' in (estimate_chart(pts) or "")


def test_estimate_changes_are_a_card_by_mode_table_with_before_after_and_bars():
    delta = {"A100-40.full_batch": {"before": 55, "after": 13}, "A100-40.serve_batch": {"before": 666, "after": 167},
             "T4.full_batch": {"before": 7, "after": 0}, "T4.lora_batch": {"before": None, "after": 29},
             "params": {"before": 559_890_432, "after": 567_754_752},
             "full_finetune_gb": {"before": 11.2, "after": 12.6}}
    view = estimate_changes(delta)
    assert view is not None and view.modes == ("Full fine-tune", "LoRA", "Serving")
    assert [(f.name, f.before, f.after, f.change) for f in view.figures] == [
        ("Parameters", "559,890,432", "567,754,752", "+1.4%"),
        ("Full fine-tune memory, batch 1", "11.2 GB", "12.6 GB", "+12.5%")]
    # cards in the cards' order (T4 first), a cell per mode; the larger side of a cell is the full 96 px
    assert [(r.card, [(c.changed, c.before, c.after, round(c.before_len, 1), round(c.after_len, 1), c.direction)
                      for c in r.cells]) for r in view.cards] == [
        ("T4 16 GB", [(True, "7", "does not fit", 96.0, 0.0, "down"), (True, "not estimated", "29", 0.0, 96.0, ""),
                      (False, "", "", 0.0, 0.0, "")]),
        ("A100 40 GB", [(True, "55", "13", 96.0, 22.7, "down"), (False, "", "", 0.0, 0.0, ""),
                        (True, "666", "167", 96.0, 24.1, "down")])]
    assert estimate_changes({}) is None and estimate_changes(None) is None


def test_an_advisory_lists_a_per_card_finding_once_when_the_table_shows_every_card():
    findings = [{"code": "estimate.params_changed", "severity": "high", "summary": "parameters 1 → 2"},
                {"code": "estimate.serve_batch_changed", "severity": "moderate", "summary": "serving on A100-40: x"},
                {"code": "estimate.serve_batch_changed", "severity": "high", "summary": "serving on T4: y"},
                {"code": "estimate.fit_lost", "severity": "high", "summary": "T4 no longer holds a full fine-tune"}]
    assert [(f["summary"], f["severity"]) for f in advisory_findings(findings, table=True)] == [
        ("parameters 1 → 2", "high"),
        ("serving on A100-40: x, and 1 more card like it (see the estimate changes)", "high"),
        ("T4 no longer holds a full fine-tune", "high")]
    assert advisory_findings(findings, table=False) == findings


def test_the_advisory_details_leave_out_what_the_page_shows_apart_but_keep_the_diff_excerpts():
    text = ("**Upstream change** in x.\n\n## Findings\n\n### High\n- eos 2 → 7 (`config.x`)\n\n"
            "Rendered prompt diff: `tokenizer_config.json`:\n\n```diff\n-a\n+a</s>\n## not a heading\n```\n\n"
            "## Estimate changes\n- `T4.full_batch`: `7` → `1`\n\n## Related OSV.dev advisories\n- GHSA-1")
    details, excerpts = advisory_details(text)
    assert details == ("<p><strong>Upstream change</strong> in x.</p>\n<h2>Related OSV.dev advisories</h2>\n"
                       "<ul>\n<li>GHSA-1</li>\n</ul>\n")
    assert excerpts == ('<p>Rendered prompt diff: <code>tokenizer_config.json</code>:</p>\n'
                        '<pre><code class="language-diff">-a\n+a&lt;/s&gt;\n## not a heading\n</code></pre>\n')


def test_a_severity_strip_is_a_cell_per_revision_labelled_with_its_counts():
    assert severity_strip([]) is None
    svg = severity_strip(["info", None, "high", "weird"])
    assert svg is not None and svg.startswith(
        '<svg xmlns="http://www.w3.org/2000/svg" class="strip" width="30" height="14" viewBox="0 0 30 14" role="img" '
        'aria-label="Worst severity of the last 4 revisions, oldest first: 1 high, 1 info, 2 none">')
    assert re.findall(r'fill="(#\w+)"><title>([^<]*)</title>', svg) == [
        ("#d0d7de", "info"), ("#eef1f4", "none"), ("#c0392b", "high"), ("#eef1f4", "none")]


def test_the_advisories_timeline_has_40_columns_ending_at_the_newest_day_worst_severity_lowest():
    from datetime import UTC, date, datetime

    assert severity_timeline([]) is None
    day = [(datetime(2026, 1, 1, 9, tzinfo=UTC), "high"), (datetime(2026, 1, 1, 18, tzinfo=UTC), "critical"),
           (datetime(2026, 1, 3, tzinfo=UTC), "info")]
    short = severity_timeline(day)
    assert short is not None and (short.first, short.last, short.bucket_days) == (date(2025, 11, 25), date(2026, 1, 3), 1)
    assert short.svg == (
        '<svg xmlns="http://www.w3.org/2000/svg" class="timeline-strip" viewBox="0 0 398 40" preserveAspectRatio="none" '
        'role="img" aria-label="Advisories published from 2025-11-25 to 2026-01-03 by severity: 1 critical, 1 high, '
        '1 info"><rect x="370" y="20.0" width="8" height="20.0" fill="#6e0b14"><title>2026-01-01: 1 critical</title>'
        '</rect><rect x="370" y="0.0" width="8" height="20.0" fill="#c0392b"><title>2026-01-01: 1 high</title></rect>'
        '<rect x="390" y="20.0" width="8" height="20.0" fill="#d0d7de"><title>2026-01-03: 1 info</title></rect></svg>')
    # a year: 10 days a column, so 40 columns reach the oldest
    long = severity_timeline([(datetime(2025, 1, 1, tzinfo=UTC), "high"), (datetime(2026, 1, 1, tzinfo=UTC), "low")])
    assert long is not None and (long.first, long.bucket_days) == (date(2024, 11, 28), 10)
    assert re.findall(r'<rect x="(\d+)"[^>]*><title>([^<]*)</title>', long.svg) == [
        ("30", "2024-12-28 to 2025-01-06: 1 high"), ("390", "2025-12-23 to 2026-01-01: 1 low")]
