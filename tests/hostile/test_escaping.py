"""No stranger's text reaches a terminal, a log, a SARIF viewer or a BOM with its control characters live.

The same hostile strings go through every command's text output and every sink: an OSC 8 hyperlink
closed by BEL, a CSI that clears the screen (7-bit and C1), a right-to-left override, a newline that
forges a report line, and a Markdown link. They arrive as upstream would send them: a ref and a repo
folder in a Hugging Face cache (``tracker audit``), a revision literal and a file name in a codebase
(``tracker scan``), a ``model_type`` in a config (``tracker estimate``), a webhook receiver's error
body (``tracker deliveries`` and the daemon's log).
"""

from __future__ import annotations

import io
import json
import logging
import threading
import time
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hubstandin import HubStandin
from markdown_it import MarkdownIt
from sqlalchemy import insert

from tests.core.conftest import config_json
from tracker.adapters.delivery.webhook import new_secret
from tracker.adapters.delivery.worker import DeliveryWorker
from tracker.adapters.settings import DeliverySettings
from tracker.adapters.store import open_store
from tracker.adapters.store.tables import deliveries
from tracker.core.escaping import escape_controls, escape_lines, escape_markdown, escape_strings
from tracker.core.model import RepoId
from tracker.pipeline.scan.source import INVALID_REVISION
from tracker.surfaces.cli import main
from tracker.surfaces.logs import setup_logging

REPO = "acme/model"
OSC = "\x1b]8;;https://evil.example/\x07click here\x1b]8;;\x07"  # a terminal hyperlink, BEL-terminated
CSI = "\x1b[2J\x1b[31m"  # clear the screen, then red
C1_CSI = "\x9b2J"  # the same in one C1 character
RLO = "\u202e"  # right-to-left override: "evil\u202eyp.doc" shows as "evilcod.py"
FORGED = f"v1\n{REPO}@000000000000 (main)  1.0 kB, last used 2026-12-01, at the head"
LINK = "[Pin the fixed revision](https://evil.example/fix)"
HOSTILE = f"{OSC}{CSI}{C1_CSI}{RLO}{LINK}"
LIVE = {"Cc", "Cf", "Zl", "Zp"}  # what must never reach a reader raw (a newline between lines aside)


def live_controls(text: str) -> list[str]:
    """The control, format and separator characters of ``text``, line breaks between lines aside."""
    return [c for c in text if unicodedata.category(c) in LIVE and c != "\n"]


def assert_no_live_text(output: str) -> None:
    assert live_controls(output) == [], repr(output)
    assert escape_controls(OSC) in output or escape_controls(CSI) in output or "\\u202e" in output


def assert_not_forged(output: str) -> None:
    """The newline inside the ref is shown as ``\\n``: the forged report line is not a line of its own."""
    assert FORGED.split("\n", 1)[1] not in output.splitlines()
    assert "v1\\n" + FORGED.split("\n", 1)[1][:20] in output


def cli(env: dict[str, str], *args: Any) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A Hub stand-in holding REPO; a cache holding its head under hostile refs and folder names; a codebase
    loading it with a hostile revision from a hostile file name; a config with a hostile model_type."""
    work = tmp_path_factory.mktemp("escaping")
    hub = HubStandin(work / "hub").start()
    try:
        hub.create_repo(REPO)
        sha = hub.commit(REPO, {"config.json": config_json()}, message="initial")
        cache = work / "cache"
        snapshot = cache / "models--acme--model" / "snapshots" / sha
        snapshot.mkdir(parents=True)
        (cache / "models--acme--model" / "blobs").mkdir()
        (cache / "models--acme--model" / "blobs" / "b0").write_bytes(config_json())
        (snapshot / "config.json").symlink_to(Path("..") / ".." / "blobs" / "b0")
        refs = cache / "models--acme--model" / "refs"
        refs.mkdir()
        (refs / "main").write_text(sha)
        (refs / FORGED).parent.mkdir()  # a ref name may hold a newline (and a folder): the file system allows it
        (refs / FORGED).write_text(sha)
        (refs / HOSTILE.replace("/", "_")).write_text(sha)
        (cache / f"models--acme--{HOSTILE.replace('/', '_')}").mkdir()  # not a valid repo id: skipped by name

        code = work / "code"
        code.mkdir()
        source = f'from transformers import AutoModel\nAutoModel.from_pretrained("{REPO}", revision={HOSTILE!r})\n'
        (code / f"load{RLO}yp.py").write_text(source)  # shows as "loadpy.py" reversed on a terminal

        config = work / "config.json"
        config.write_text(json.dumps({"model_type": HOSTILE + "\n" + FORGED, "hidden_size": 8}))

        (work / "empty.toml").write_text("")
        env = {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(cache), "TRACKER_CONFIG": str(work / "empty.toml"),
               "TRACKER_DATABASE_URL": f"sqlite:///{work}/user.sqlite3"}
        yield {"env": env, "cache": cache, "code": code, "config": config, "sha": sha, "work": work}
    finally:
        hub.stop(wait=False)


# -- terminal text ---------------------------------------------------------------------------------------


def test_audit_text_escapes_ref_and_folder_names(world):
    out = cli(world["env"], "audit")
    assert out.exit_code == 0, out.output
    assert_no_live_text(out.output)
    assert_not_forged(out.output)
    skipped = [line for line in out.output.splitlines() if "skipped:" in line]
    assert skipped == [f"acme/{escape_controls(HOSTILE.replace('/', '_'))}  skipped: not a valid owner/name repo id"]
    head = out.output.splitlines()[0]
    assert head.startswith(f"{REPO}@{world['sha'][:12]} ({escape_controls(HOSTILE.replace('/', '_'))}, main, "
                           f"{escape_controls(FORGED)})  ")


def test_scan_text_escapes_the_revision_literal_and_the_file_name(world):
    out = cli(world["env"], "scan", world["code"])
    assert out.exit_code == 0, out.output
    assert_no_live_text(out.output)
    first = out.output.splitlines()[0]
    assert first == f"load\\u202eyp.py:2:27  {REPO}  floating ({escape_controls(HOSTILE)})"
    # and the literal is not sent to the Hub: no Hub has such a revision
    assert out.output.splitlines()[1] == f"    note: {INVALID_REVISION}"


def test_estimate_escapes_the_model_type(world):
    out = cli(world["env"], "estimate", world["config"])
    assert out.exit_code == 0, out.output
    assert_no_live_text(out.output)
    assert out.output.splitlines()[0].startswith(f"unsupported: {escape_controls(HOSTILE + chr(10) + FORGED)}")
    assert FORGED.split("\n", 1)[1] not in out.output.splitlines()


def test_an_error_line_escapes_what_it_quotes(world):
    out = cli(world["env"], "audit", "--cache-dir", world["work"] / f"no{CSI}{RLO}where\a")
    assert (out.exit_code, out.output) == (2, f"error: no Hugging Face cache at {world['work']}/no\\x1b[2J\\x1b[31m"
                                              "\\u202ewhere\\x07: the folder does not exist (give --cache-dir, or set "
                                              "HF_HUB_CACHE or HF_HOME)\n")


# -- SARIF and CycloneDX ----------------------------------------------------------------------------------


def _texts(sarif: dict[str, Any]) -> list[str]:
    return [result["message"]["text"] for run in sarif["runs"] for result in run["results"]]


def test_sarif_message_text_is_plain_text_to_a_markdown_reader(world):
    out = cli(world["env"], "scan", world["code"], "--format", "sarif")
    assert out.exit_code == 0, out.output
    (floating,) = [t for t in _texts(json.loads(out.stdout)) if "is loaded with" in t]
    assert floating.startswith(f"{REPO} is loaded with revision {escape_markdown(repr(HOSTILE))}, not a commit")
    assert "\\[Pin the fixed revision\\](https\\://evil.example/fix)" in floating
    rendered = MarkdownIt("commonmark").render(floating)
    assert "<a " not in rendered and "<img" not in rendered
    assert live_controls(floating) == []


def _strings(value: Any) -> Iterator[str]:
    """Every string of a JSON document, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_audit_sarif_and_both_boms_carry_no_live_controls(world):
    for args in (["audit", "--format", "sarif"], ["audit", "--format", "cyclonedx"],
                 ["scan", world["code"], "--format", "cyclonedx"]):
        out = cli(world["env"], *args)
        assert out.exit_code == 0, out.output
        strings = list(_strings(json.loads(out.stdout)))
        assert [s for s in strings if live_controls(s)] == [], args
    bom = json.loads(cli(world["env"], "audit", "--format", "cyclonedx").stdout)
    refs = sorted(p["value"] for c in bom["components"] for p in c.get("properties", [])
                  if p["name"] == "upstream-tracker:ref")
    assert refs == sorted([escape_controls(HOSTILE.replace("/", "_")), "main", escape_controls(FORGED)])


# -- a receiver's error body: tracker deliveries and the daemon's log --------------------------------------


class _Spiteful(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = f"{HOSTILE} {FORGED}".encode()
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


def test_a_receivers_error_body_is_escaped_in_deliveries_and_in_the_log(world, tmp_path):
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Spiteful)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    url = f"sqlite:///{tmp_path}/outbox.sqlite3"
    store = open_store(url, auto_upgrade=True)
    log = io.StringIO()
    try:
        now = datetime.now(UTC)
        sub = store.outbox.add_subscription(target="*", kind="webhook", min_severity="info", categories=(),
                                            url=f"http://127.0.0.1:{receiver.server_address[1]}/hook",
                                            secret=new_secret(), now=now)
        with store.db.engine.begin() as conn:
            conn.execute(insert(deliveries), [{
                "subscription_id": sub.id, "webhook_id": "msg_1", "event_type": "advisory.created",
                "advisory_id": "HF-1", "repo_id": REPO, "severity": "low", "record": {"n": 1}, "state": "pending",
                "attempts": 0, "next_attempt_at": now - timedelta(seconds=1), "created_at": now}])
        setup_logging(log_format="text", talkative=True, stream=log)
        worker = DeliveryWorker(store.outbox, DeliverySettings(max_attempts=1, timeout=30,
                                                               allow_hosts=("127.0.0.1",)))
        worker.start()
        try:
            for _ in range(600):
                if all(d.state != "pending" for d in store.outbox.list_deliveries()):
                    break
                time.sleep(0.1)
        finally:
            worker.stop()
    finally:
        logging.getLogger().handlers.clear()
        store.close()
        receiver.shutdown()
    (row,) = store.outbox.list_deliveries()
    assert (row.state, row.last_status) == ("dead", 500)

    failed = [line for line in log.getvalue().splitlines() if "failed (attempt 1)" in line]
    assert len(failed) == 1 and live_controls(failed[0]) == []
    assert escape_controls(OSC) in failed[0] and "\\u202e" in failed[0]

    out = cli({**world["env"], "TRACKER_DATABASE_URL": url}, "deliveries")
    assert out.exit_code == 0, out.output
    assert_no_live_text(out.output)
    header, line = out.output.splitlines()
    assert header.split()[:2] == ["ID", "STATE"]
    assert line.startswith(f"     1  dead       sub {sub.id:<4} advisory.created    HF-1  attempts 1  HTTP 500")


# -- the sink functions, by value ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw, shown", [
    (LINK, "\\[Pin the fixed revision\\](https\\://evil.example/fix)"),
    ("![x](https://evil.example/p.png) <b>bold</b> `code` *em*",
     "!\\[x\\](https\\://evil.example/p.png) \\<b\\>bold\\</b\\> \\`code\\` \\*em\\*"),
    ("see www.evil.example or HTTP://x", "see www\\.evil.example or HTTP\\://x"),
    ("a\\b", "a\\\\b"),
    ("\x1b]8;;x\x07", "\\\\x1b\\]8;;x\\\\x07"),  # the control escapes' backslashes are escaped too
    ("acme/model@0123 (cached) is 2 commit(s) behind: 12:30 pytorch_model.bin", "acme/model@0123 (cached) is 2 "
     "commit(s) behind: 12:30 pytorch_model.bin"),  # our own words come out as they went in
])
def test_escape_markdown(raw, shown):
    assert escape_markdown(raw) == shown
    assert "<a " not in MarkdownIt("commonmark").render(shown)


def test_escape_lines_escapes_each_line_before_joining_them():
    assert escape_lines(["a", FORGED, f"b{CSI}"]) == (
        "a\nv1\\nacme/model@000000000000 (main)  1.0 kB, last used 2026-12-01, at the head\nb\\x1b[2J\\x1b[31m")


def test_escape_strings_escapes_every_string_of_a_document_and_keeps_the_rest():
    document = {"name": f"x{RLO}", "n": 1, "ok": True, "none": None, "list": [f"{C1_CSI}", {f"k{RLO}": 2.5}],
                "purl": "pkg:huggingface/acme/model@" + "0" * 40}
    assert escape_strings(document) == {"name": "x\\u202e", "n": 1, "ok": True, "none": None,
                                        "list": ["\\x9b2J", {"k\\u202e": 2.5}],
                                        "purl": "pkg:huggingface/acme/model@" + "0" * 40}


def test_status_escapes_the_last_error_it_quotes(world, tmp_path):
    """A poll's error may quote the Hub's answer: `tracker status` shows it escaped, on its own line."""
    url = f"sqlite:///{tmp_path}/status.sqlite3"
    store = open_store(url, auto_upgrade=True)
    try:
        row, _ = store.repos.add(RepoId(REPO), now=datetime.now(UTC))
        store.repos.update(row.pk, last_outcome="error", last_error=f"HTTP 500: {HOSTILE} {FORGED}",
                           last_polled_at=datetime.now(UTC))
    finally:
        store.close()
    out = cli({**world["env"], "TRACKER_DATABASE_URL": url}, "status")
    assert out.exit_code == 1, out.output
    assert_no_live_text(out.output)
    assert f"  {REPO}: last poll failed: HTTP 500: {escape_controls(HOSTILE)} {escape_controls(FORGED)}" in (
        out.output.splitlines())


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_log_record_is_one_line_with_its_controls_escaped(log_format):
    stream = io.StringIO()
    setup_logging(log_format=log_format, talkative=True, stream=stream)
    try:
        logging.getLogger("tracker.delivery").warning("receiver said: %s", f"{HOSTILE} {FORGED}")
    finally:
        logging.getLogger().handlers.clear()
    (line,) = stream.getvalue().splitlines()
    message = json.loads(line)["message"] if log_format == "json" else line.split(": ", 1)[1]
    assert message == f"receiver said: {escape_controls(HOSTILE)} v1 | {escape_controls(FORGED.split(chr(10))[1])}"
    assert live_controls(line) == []
