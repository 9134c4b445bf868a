"""Messages about hostile upstream content: say what the tracker did, show names as they are.

Before: a 550k-token tokenizer was refused as ``tokenizer.malformed``, "loading the tokenizer
fails", though the ``tokenizers`` library loads it: the element cap is right, the message was
wrong. It is now ``tokenizer.too_large``, "too large to analyse". And a right-to-left override
(U+202E) in a file name or a commit title was shown raw in findings, the CLI, pages and feeds,
so ``model<U+202E>nib.pt`` read as ``modeltp.bin``; it is now shown as ``model\\u202enib.pt``
everywhere text is shown, while the stored path stays the real name.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import tokenizers
from click.testing import CliRunner
from fastapi.testclient import TestClient
from hubstandin import HubStandin

from tests.findings.sources import make_change
from tests.hostile.content_support import Reduce
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import Tracker, make_tracker
from tracker.core.advisory.record import to_osv
from tracker.core.escaping import escape_controls
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer import TokenizerLimits, analyse_tokenizer
from tracker.core.model import Severity
from tracker.surfaces.api import create_app
from tracker.surfaces.cli import main

RULES = SeverityRules.default()
RLO = "\u202e"


def bpe_tokenizer(bases: int) -> bytes:
    """A valid BPE tokenizer.json: ``bases`` CJK characters and every pair of them merged.

    742 bases give 550,564 merges and 551,306 tokens, 2.2 M JSON elements: past the cap.
    """
    chars = [chr(0x4E00 + i) for i in range(bases)]
    merges = [[a, b] for a in chars for b in chars]
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({a + b: len(chars) + i for i, (a, b) in enumerate(merges)})
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
           "pre_tokenizer": None, "post_processor": None, "decoder": None,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "ignore_merges": False, "vocab": vocab, "merges": merges}}
    return json.dumps(doc, ensure_ascii=False).encode()


def test_a_tokenizer_over_the_element_cap_is_too_large_to_analyse_not_malformed():
    small, big = bpe_tokenizer(8), bpe_tokenizer(742)
    loaded = tokenizers.Tokenizer.from_str(big.decode())  # the library loads it
    assert loaded.get_vocab_size() == 551_306
    change, sources = make_change({"tokenizer.json": small}, {"tokenizer.json": big})

    findings = analyse_tokenizer(change, sources, RULES)

    assert [(f.code, f.severity, f.summary) for f in findings] == [
        ("tokenizer.too_large", Severity.MODERATE,
         "tokenizer.json is too large to analyse: more than 2,000,000 JSON elements, over the analysis limit")]
    assert findings[0].evidence == {"error": "more than 2,000,000 JSON elements, over the analysis limit",
                                    "limit": 2_000_000}


def test_a_side_file_over_its_byte_cap_is_too_large_too():
    config = json.dumps({"model_max_length": 512, "pad": "x" * 100}).encode()
    change, sources = make_change({"tokenizer_config.json": b"{}"}, {"tokenizer_config.json": config})

    findings = analyse_tokenizer(change, sources, RULES, TokenizerLimits(config_max_bytes=64))

    assert [(f.code, f.severity, f.summary) for f in findings] == [
        ("tokenizer.too_large", Severity.MODERATE,
         f"tokenizer_config.json is too large to analyse: {len(config)} bytes, over the 64-byte limit; not parsed")]


# ---------------------------------------------------------------------------- control and bidi characters


@pytest.mark.parametrize(("raw", "shown"), [
    ("model\u202enib.pt", "model\\u202enib.pt"),                 # right-to-left override
    ("a\u2066b\u2069c\u200fd\u061ce", "a\\u2066b\\u2069c\\u200fd\\u061ce"),  # isolates, marks
    ("clear\x1b[2J", "clear\\x1b[2J"),                          # a terminal escape
    ("two\nlines\r\tx\x00\x7f\x85", "two\\nlines\\r\\tx\\x00\\x7f\\x85"),
    ("zero\u200bwidth\ufeff\u2028", "zero\\u200bwidth\\ufeff\\u2028"),
    ("naïve 日本語 😀 a\u00a0b", "naïve 日本語 😀 a\u00a0b"),     # printable text, no-break space: as is
])
def test_escape_controls_writes_control_and_bidi_characters_as_escapes(raw, shown):
    assert escape_controls(raw) == shown
    assert escape_controls(shown) == shown  # idempotent


def test_escape_controls_can_keep_newlines_and_tabs_for_multiline_text():
    assert escape_controls("a\n\tb\u202e\r", keep_whitespace=True) == "a\n\tb\\u202e\\r"


@dataclass
class Bidi:
    tracker: Tracker
    repo: str
    base: str
    rev: str
    env: dict[str, str]


BIDI_PATH = f"weights/model{RLO}nib.pt"
BIDI_TITLE = f"Add the fp16 checkpoint {RLO}exe.txt"


@pytest.fixture(scope="module")
def bidi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bidi]:
    """One repo whose second commit adds a hostile pickle under a bidi name, with a bidi commit title; polled once."""
    work = tmp_path_factory.mktemp("bidi")
    hub = HubStandin(work / "hub").start()
    settings = Settings(database={"url": f"sqlite:///{work}/tracker.sqlite3"},
                        hub={"endpoint": hub.url, "timeout": 10.0})
    tracker = make_tracker(settings, hub=HubClient(hub.url, timeout=10.0, sleep=lambda _s: None), auto_upgrade=True)
    repo = "acme/bidi"
    try:
        hub.create_repo(repo)
        base = hub.commit(repo, {"README.md": b"# bidi\n"})
        tracker.store.repos.add(repo, now=tracker.clock())
        tracker.poll([repo])
        rev = hub.commit(repo, {BIDI_PATH: pickle.dumps(Reduce(os.system, "id"), protocol=2)}, message=BIDI_TITLE)
        (result,) = tracker.poll([repo])
        assert (result.status, result.processed, result.error) == ("new", 1, None)
        config = work / "tracker.toml"
        config.write_text("")
        env = {"HF_ENDPOINT": hub.url, "TRACKER_DATABASE_URL": settings.database.url,
               "TRACKER_CONFIG": str(config)}
        yield Bidi(tracker, repo, base, rev, env)
    finally:
        tracker.store.close()
        hub.stop(wait=False)


def test_a_findings_summary_escapes_the_name_and_the_path_stays_the_real_name(bidi):
    row = bidi.tracker.store.revisions.get(bidi.tracker.store.repos.get(bidi.repo).pk, bidi.rev)
    (pickle_finding,) = [f for f in row.findings if f.code == "weights.pickle_dangerous_import"]
    assert pickle_finding.summary == ("pickle-based file added: weights/model\\u202enib.pt would import "
                                         "posix.system when loaded")
    assert pickle_finding.path == BIDI_PATH  # data: what to look for on the Hub
    assert not any(RLO in f.summary for f in row.findings)
    (advisory,) = bidi.tracker.store.advisories.find(repo_pk=bidi.tracker.store.repos.get(bidi.repo).pk)
    assert RLO not in to_osv(advisory.record)["summary"] and RLO not in to_osv(advisory.record)["details"]
    assert "`weights/model\\u202enib.pt`" in to_osv(advisory.record)["details"]


@pytest.mark.parametrize("command", ["revisions", "diff"])
def test_cli_lines_show_the_escape_never_the_character(bidi, command):
    args = [command, bidi.repo] + ([bidi.base, bidi.rev] if command == "diff" else [])
    result = CliRunner().invoke(main, args, env=bidi.env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert RLO not in result.output
    assert "model\\u202enib.pt" in result.output
    if command == "revisions":
        assert "Add the fp16 checkpoint \\u202eexe.txt" in result.output
    else:
        assert f"added    {escape_controls(BIDI_PATH)}" in result.output.splitlines()


def test_pages_and_feeds_show_the_escape_never_the_character(bidi):
    client = TestClient(create_app(bidi.tracker))
    (advisory,) = bidi.tracker.store.advisories.find(repo_pk=bidi.tracker.store.repos.get(bidi.repo).pk)
    for path in (f"/repos/{bidi.repo}", f"/repos/{bidi.repo}/revisions/{bidi.rev}", f"/advisories/{advisory.id}",
                 f"/feeds/{bidi.repo}.atom", f"/feeds/{bidi.repo}.json"):
        response = client.get(path)
        assert response.status_code == 200, (path, response.text[:300])
        text = response.content.decode()
        assert RLO not in text, path
        assert "\\u202e" in text or "\\\\u202e" in text, path  # JSON feeds escape the backslash itself
