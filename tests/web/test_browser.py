"""A real headless Chromium through the pages, over the demo's e5 history polled by a real tracker.

Debian's ``chromium`` driven by Playwright's Python client (never ``playwright install``). Skipped only
when Chromium is missing and ``TRACKER_TEST_BROWSER_REQUIRED`` is unset; CI sets it, so there a missing
browser fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.web.conftest import History
from tracker.surfaces.web.demo import REPO

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _browser_missing() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"chromium not installed ({CHROMIUM})"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = _browser_missing()
    if missing:
        if os.environ.get("TRACKER_TEST_BROWSER_REQUIRED"):
            pytest.fail(f"TRACKER_TEST_BROWSER_REQUIRED is set but {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, history: History) -> Iterator[Any]:
    # JavaScript off: the pages must read the same without it.
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    try:
        yield tab
    finally:
        context.close()


def cells(row: Any) -> list[str]:
    return [c.strip() for c in row.locator("td").all_inner_texts()]


def test_index_lists_the_repo_with_its_last_change_worst_open_severity_and_last_poll(page, history):
    response = page.goto(history.url + "/")
    assert response.status == 200
    assert page.title() == "Watched repos · upstream-tracker"
    rows = page.locator("table.repos tbody tr")
    assert rows.count() == 1
    repo, change, recent, open_, poll = cells(rows.first)
    assert recent == ""  # a picture: its cells' colours, and its label for a screen reader
    assert rows.first.get_by_role("img").get_attribute("aria-label") == (
        "Worst severity of the last 4 revisions, oldest first: 1 critical, 1 high, 2 info")
    assert repo == f"{REPO}\n4 revisions read"
    assert change.splitlines()[0] == (f"{history.context[:12]} CRITICAL Longer context: 8194 positions, "
                                      "weights re-uploaded, PyTorch checkpoint added")
    assert change.splitlines()[-1] == ("model.safetensors re-uploaded with new content: 2,239,607,208 bytes → "
                                       "2,271,064,488 bytes, sha256 001a0638c6ea → e2a0d0acc0e7 (+17 more)")
    assert open_ == "MODERATE 1 open"  # the pickle: a risk nothing has fixed
    assert poll.splitlines()[-1] == "ok"
    page.get_by_role("link", name=REPO).click()
    page.wait_for_url(f"{history.url}/repos/{REPO}")  # the click starts the navigation; wait for it to land


def test_repo_page_shows_the_timeline_the_chart_and_the_feeds(page, history, artifacts):
    page.goto(f"{history.url}/repos/{REPO}")
    assert page.locator("h1").inner_text() == REPO
    revisions = page.locator("ol.timeline > li")
    assert [revisions.nth(i).locator("h3").inner_text() for i in range(revisions.count())] == [
        f"{history.context[:12]} CRITICAL Longer context: 8194 positions, weights re-uploaded, PyTorch checkpoint added",
        f"{history.template[:12]} HIGH Append the end-of-sequence token in the chat template; eos_token_id 250001",
        f"{history.readme[:12]} INFO Update README.md",
        f"{history.baseline[:12]} INFO initial commit",
    ]
    template = revisions.nth(1)
    assert template.locator("dt").all_inner_texts() == ["Config", "Generation config", "Chat template", "Files"]
    assert template.locator("dd").nth(2).inner_text() == (
        "HIGH rendered prompt changed for 8 of 8 conversations; one user turn, no generation prompt: "
        "adds '</s>' after 'query: Hello, who are you?' chat_template.rendered_prompt_changed")
    code = template.locator("dd").nth(2).get_by_role("link", name="chat_template.rendered_prompt_changed")
    assert code.get_attribute("href") == "/findings/chat_template.rendered_prompt_changed"
    context = revisions.nth(0)
    assert context.locator("dt").all_inner_texts() == ["Config", "Weights", "Estimator", "Files"]
    assert "HIGH model.safetensors: 1 tensors reshaped, e.g. embeddings.position_embeddings.weight " \
           "[514, 1024] → [8194, 1024] weights.tensors_reshaped" in context.locator("dd").nth(1).inner_text().splitlines()
    advisories = context.locator("ul.advisories li")
    assert [a.split(" ", 3)[:3] for a in advisories.all_inner_texts()] == [
        ["CRITICAL", history.advisory(history.context, "update"), "update"],
        ["MODERATE", history.advisory(history.context, "risk"), "risk"]]
    # The chart: server-side SVG, four revisions, the parameter count moving at the last one.
    chart = page.locator("figure.chart svg.chart-wide")
    assert chart.get_attribute("aria-labelledby") == "chart-title"
    assert page.locator("figure.chart svg.chart-narrow").is_hidden()  # the phone's drawing, not shown at 1200 px
    dots = chart.locator("circle title").all_text_contents()
    assert dots[:3] == [f"{history.baseline[:12]}: parameters 559.9M", f"{history.template[:12]}: parameters 559.9M",
                        f"{history.context[:12]}: parameters 567.8M"]
    assert f"{history.context[:12]}: full fine-tune 12.6 GB" in dots
    feeds = page.locator("p.feeds a")
    assert [(a.inner_text(), a.get_attribute("href")) for a in feeds.all()] == [
        ("Atom", f"/feeds/{REPO}.atom"), ("JSON Feed", f"/feeds/{REPO}.json")]
    shot = artifacts / "repo-page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_revision_page_shows_the_rendered_prompt_diff_side_by_side(page, history):
    page.goto(f"{history.url}/repos/{REPO}")
    page.get_by_role("link", name=history.template[:12]).click()
    page.wait_for_url(f"{history.url}/repos/{REPO}/revisions/{history.template}")  # the click starts the navigation; wait for it to land
    first = page.locator("table.sbs").first
    assert first.locator("thead th").all_inner_texts() == ["old: one_turn", "new: one_turn"]
    assert first.locator("td.removed").all_inner_texts() == ["−query: Hello, who are you?\\n"]
    assert first.locator("td.added").all_inner_texts() == ["+query: Hello, who are you?</s>\\n"]
    headings = page.locator("h3").all_inner_texts()
    assert headings[:2] == ["Rendered prompt: one user turn, no generation prompt",
                            "Rendered prompt: system + user, no generation prompt"]
    system_user = page.locator("table.sbs").nth(1)
    assert system_user.locator("td.removed").all_inner_texts() == [
        "−passage: You are a helpful assistant.\\n", "−query: What is the capital of France?\\n"]
    assert system_user.locator("td.added").all_inner_texts() == [
        "+passage: You are a helpful assistant.</s>\\n", "+query: What is the capital of France?</s>\\n"]
    text = page.locator("table.sbs").last
    assert text.locator("thead th").all_inner_texts() == ["old/tokenizer_config.json", "new/tokenizer_config.json"]
    assert text.locator("td.added").all_inner_texts() == ["+{{ eos_token }}", "+{{ eos_token }}"]
    keys = page.locator("section", has=page.locator("h2", has_text="Config keys")).locator("tbody tr")
    # two findings about the one change (config and generation rules) are one row, at the worse severity
    assert [cells(r) for r in keys.all()] == [
        ["config.json", "eos_token_id", "2", "250001", "HIGH config.token_id_changed"]]
    cards = page.locator("table.cards tbody tr")
    assert cells(cards.first) == ["T4 16 GB", "batch 7, borderline", "batch 29", "batch 253", "$2.18 full"]
    advisory = history.advisory(history.template, "update")
    assert page.get_by_role("link", name="OSV JSON").get_attribute("href") == f"/v1/vulns/{advisory}"


def test_advisory_page_is_readable_and_downloadable(page, history):
    advisory = history.advisory(history.context, "risk")
    page.goto(f"{history.url}/repos/{REPO}/revisions/{history.context}")
    page.get_by_role("link", name=advisory).click()
    page.wait_for_url(f"{history.url}/advisories/{advisory}")  # the click starts the navigation; wait for it to land
    assert page.locator("h1").inner_text() == advisory
    assert page.locator("p.meta .sev").inner_text() == "MODERATE"
    assert page.locator("p.summary").inner_text() == (
        f"Risk introduced in {REPO}@{history.context[:12]}: pickle-based file added: pytorch_model.bin (652 bytes);…")
    # the summary is clipped at 120 characters; the findings say it all, once
    findings = page.locator("section", has=page.locator("h2", has_text="Findings")).locator("li")
    assert findings.all_inner_texts() == [
        "MODERATE pickle-based file added: pytorch_model.bin (652 bytes); imports only tensor-rebuild globals "
        "weights.pickle_added"]
    assert "Findings" not in page.locator("section.details").inner_text()
    # the estimate changes: a row per card, a cell per mode, before → after
    rows = page.locator("table.batches tbody tr")
    assert [r.locator("th").inner_text() for r in rows.all()][:2] == ["T4 16 GB", "L4 24 GB"]
    assert cells(rows.first) == ["7 → 1", "29 → 7", "253 → 63"]
    assert rows.first.locator("svg.bar").count() == 3
    events = page.locator("article.affected tbody tr")
    assert [cells(r) for r in events.all()] == [["introduced", history.context]]
    # details are Markdown rendered to HTML (bold, links), never raw HTML from the record
    assert page.locator("section.details strong").first.inner_text() == "Risk introduced"
    download = page.get_by_role("link", name=f"Download {advisory}.json")
    assert download.get_attribute("href") == f"/advisories/{advisory}/download"
    assert page.get_by_role("link", name="OSV JSON").get_attribute("href") == f"/v1/vulns/{advisory}"


def test_phone_width_reads_without_horizontal_scroll(browser, history):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 844},
                                  device_scale_factor=2, is_mobile=True)
    try:
        tab = context.new_page()
        tab.goto(history.url + "/")
        assert tab.locator('meta[name="viewport"]').get_attribute("content") == "width=device-width, initial-scale=1"
        # javascript is off, so measure through layout: the repo row is laid out as a card within 390 px
        box = tab.locator("table.repos tbody tr").first.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    finally:
        context.close()


# -- every page, at desktop and phone widths: no sideways scroll, and axe-core finds nothing -------------

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


def every_page(history: History) -> list[str]:
    store = history.tracker.store
    advisories = [a.id for a in store.advisories.find(repo_pk=store.repos.get(REPO).pk)]
    return ["/", "/repos/intfloat", f"/repos/{REPO}", *(f"/repos/{REPO}/revisions/{sha}" for sha in history.shas),
            *(f"/advisories/{a}" for a in advisories), "/advisories", "/advisories?severity=high&category=weights",
            "/findings", "/findings/weights.pickle_added", "/findings/chat_template.rendered_prompt_changed",
            "/search", "/search?q=e5", "/docs", "/nowhere", "/repos/acme/missing"]


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE.exists():
        message = f"axe-core is not installed ({AXE}): run `npm ci` in tests/web"
        if os.environ.get("TRACKER_TEST_BROWSER_REQUIRED"):
            pytest.fail(message)
        pytest.skip(message)
    return AXE.read_text(encoding="utf-8")


@pytest.fixture(scope="module", params=sorted(WIDTHS))
def audit_tab(request, browser: Any) -> Iterator[tuple[str, Any]]:
    # The pages have no script: JavaScript is on here only for the measurements and axe-core, which is
    # injected past the pages' Content-Security-Policy (bypass_csp), never served by the tracker.
    width = request.param
    context = browser.new_context(viewport=WIDTHS[width], bypass_csp=True, is_mobile=width == "phone",
                                  device_scale_factor=2 if width == "phone" else 1)
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    try:
        yield width, tab
    finally:
        context.close()


def test_every_page_fits_its_width_and_has_no_accessibility_violation(audit_tab, history, axe_source, artifacts):
    width, tab = audit_tab
    outside: list[str] = []
    tab.on("request", lambda r: None if r.url.startswith(history.url) else outside.append(r.url))
    problems = {}
    for path in every_page(history):
        response = tab.goto(history.url + path)
        assert response is not None and response.status in (200, 404), path
        sideways = tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        tab.evaluate(axe_source)
        result = tab.evaluate("axe.run(document, {resultTypes: ['violations']})")
        found = [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in result["violations"]]
        if sideways > 0 or found:
            problems[path] = {"scrolls sideways by": sideways, "axe": found}
            tab.screenshot(path=str(artifacts / f"{width}-{path.strip('/').replace('/', '_') or 'index'}.png"),
                           full_page=True)
    assert problems == {}
    assert outside == []  # nothing was loaded from another host
    # the measurement sees a page that is too wide (so a pass above means something)
    tab.evaluate("document.querySelector('main').insertAdjacentHTML('beforeend', '<pre>' + 'x'.repeat(400) + '</pre>')")
    assert tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") > 0


# -- the repo, advisory and /docs pages at 390 px and 1280 px: screenshots, and what a phone needs ---------

# Each visible chart label's size in CSS px: its font size in SVG units times the drawing's scale on screen.
CHART_FONTS = """() => [...document.querySelectorAll('figure.chart svg text')]
    .filter(t => t.getClientRects().length > 0)
    .map(t => [t.textContent, parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a])"""
# A method name broken over lines has text fragments on more than one line.
METHOD_LINES = """() => [...document.querySelectorAll('code.method')].map(m => {
    const r = document.createRange(); r.selectNodeContents(m);
    return [m.textContent, new Set([...r.getClientRects()].map(x => Math.round(x.top))).size]; })"""


def figure_pages(history: History) -> dict[str, str]:
    return {"repo": f"/repos/{REPO}", "advisory": f"/advisories/{history.advisory(history.context, 'update')}",
            "docs": "/docs"}


def test_the_repo_advisory_and_docs_pages_read_at_phone_and_desktop_width(audit_tab, history, axe_source, artifacts):
    width, tab = audit_tab
    for name, path in figure_pages(history).items():
        assert tab.goto(history.url + path).status == 200, path
        tab.screenshot(path=str(artifacts / f"{name}-{WIDTHS[width]['width']}px.png"), full_page=True)
        assert tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0, path
        tab.evaluate(axe_source)
        result = tab.evaluate("axe.run(document, {resultTypes: ['violations']})")
        assert [v["id"] for v in result["violations"]] == [], path
    # /docs: no method name is broken, at either width
    tab.goto(history.url + "/docs")
    methods = tab.evaluate(METHOD_LINES)
    assert {m for m, _ in methods} == {"GET", "POST", "DELETE"} and all(lines == 1 for _, lines in methods)
    # the measurement sees a broken name (so a pass above means something)
    tab.evaluate("document.querySelector('code.method').setAttribute('class', 'x')")
    tab.evaluate("""document.querySelector('code.x').parentElement.insertAdjacentHTML('beforeend',
        '<p style="width:2ch;overflow-wrap:anywhere"><code class="method" style="white-space:normal;'
        + 'overflow-wrap:anywhere;word-break:break-all">DELETE</code></p>')""")
    assert max(lines for _, lines in tab.evaluate(METHOD_LINES)) > 1
    # the repo chart: one drawing shown, every label at least 11 CSS px
    tab.goto(f"{history.url}/repos/{REPO}")
    shown = "narrow" if width == "phone" else "wide"
    assert tab.locator(f"figure.chart svg.chart-{shown}").is_visible()
    fonts = tab.evaluate(CHART_FONTS)
    assert len(fonts) > 10 and min(size for _, size in fonts) >= 11, sorted(fonts, key=lambda f: f[1])[:3]
    assert "axis starts at 557.5M, not zero" in [text for text, _ in fonts]
    if width == "phone":  # the wide drawing squeezed to a phone would be unreadable: what the narrow one avoids
        tab.evaluate("""document.querySelector('svg.chart-narrow').remove();
                        document.querySelector('svg.chart-wide').setAttribute('class', 'chart')""")
        assert max(size for _, size in tab.evaluate(CHART_FONTS)) < 8
