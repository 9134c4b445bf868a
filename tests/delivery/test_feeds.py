"""Feeds: Atom and JSON Feed 1.1 per repo, owner and everything, read back with feedparser."""

from __future__ import annotations

import json
from datetime import datetime

import feedparser
import jsonschema
import pytest
from fastapi.testclient import TestClient
from feedparser.datetimes import _parse_date
from hubstandin import HubStandin

from tests.delivery.conftest import OTHER, REPO, build_tracker, push_history, settings_for, start_repo
from tests.postgres import fresh_database
from tracker.adapters.feeds import entry_id
from tracker.core.advisory import advisory_id
from tracker.core.advisory.record import to_osv
from tracker.surfaces.api import create_app


def history(hub_standin, settings):
    """Two watched repos; acme/chat-model gets a fix, a risk later undone, and a removal."""
    start_repo(hub_standin)
    start_repo(hub_standin, OTHER)
    tracker = build_tracker(settings)
    for repo in (REPO, OTHER):
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    r1, _r2, r3, _r4, r5 = push_history(hub_standin)
    other = hub_standin.commit(OTHER, {"generation_config.json": b'{"eos_token_id": 7}'}, message="eos")
    tracker.poll()
    ids = {"fix": advisory_id(REPO, r1, "update"), "risk": advisory_id(REPO, r3, "risk"),
           "removal": advisory_id(REPO, r5, "update"), "other": advisory_id(OTHER, other, "update")}
    assert {a.id for a in tracker.store.advisories.find()} == set(ids.values())
    return tracker, TestClient(create_app(tracker)), ids


@pytest.fixture
def feeds(hub_standin, tracker_settings):
    """The history, for a test that changes it."""
    return history(hub_standin, tracker_settings)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def read_only_feeds(request, tmp_path_factory):
    """The history, built once per database for the tests that only read it."""
    root = tmp_path_factory.mktemp("feeds")
    db_url = (f"sqlite:///{root}/tracker.sqlite3" if request.param == "sqlite"
              else fresh_database(request.getfixturevalue("postgres_server_url")))
    with HubStandin(root / "hub") as hub:
        tracker, client, ids = history(hub, settings_for(hub.url, db_url))
        try:
            yield tracker, client, ids
        finally:
            tracker.store.close()


# JSON Feed 1.1 (https://www.jsonfeed.org/version/1.1/) as a schema: feedparser's released versions (6.0.x)
# read Atom and RSS only, so JSON feeds are checked against the spec's required fields and types here and
# then read into the same shape feedparser gives an Atom feed.
JSON_FEED_SCHEMA = {
    "type": "object",
    "required": ["version", "title", "items"],
    "properties": {
        "version": {"const": "https://jsonfeed.org/version/1.1"},
        "title": {"type": "string"}, "home_page_url": {"type": "string"}, "feed_url": {"type": "string"},
        "authors": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "items": {"type": "array", "items": {
            "type": "object",
            "required": ["id"],
            "anyOf": [{"required": ["content_html"]}, {"required": ["content_text"]}],
            "properties": {
                "id": {"type": "string"}, "url": {"type": "string"}, "title": {"type": "string"},
                "content_html": {"type": "string"}, "date_published": {"type": "string", "format": "date-time"},
                "date_modified": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "patternProperties": {"^_": {"type": "object"}},
        }},
    },
}


def parse(answer) -> feedparser.FeedParserDict:
    """What a feed reader makes of an answer: feedparser for Atom, the JSON Feed 1.1 rules for JSON."""
    if "json" not in answer.headers["content-type"]:
        return feedparser.parse(answer.content)
    doc = json.loads(answer.content)
    jsonschema.validate(doc, JSON_FEED_SCHEMA, format_checker=jsonschema.FormatChecker())
    entries = [feedparser.FeedParserDict(
        id=item["id"], title=item["title"], link=item["url"], updated=item["date_modified"],
        updated_parsed=_parse_date(item["date_modified"]),
        content=[feedparser.FeedParserDict(value=item["content_html"])],
        tags=[{"term": t} for t in item.get("tags", [])]) for item in doc["items"]]
    return feedparser.FeedParserDict(bozo=False, version="json11", entries=entries,
                                     feed=feedparser.FeedParserDict(doc, link=doc.get("home_page_url")))


def read(client: TestClient, path: str) -> feedparser.FeedParserDict:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    expected_type = "application/atom+xml" if ".atom" in path else "application/feed+json"
    assert answer.headers["content-type"].startswith(expected_type)
    parsed = parse(answer)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == ("atom10" if ".atom" in path else "json11")
    return parsed


def entry_ids(parsed) -> set[str]:
    return {e.id for e in parsed.entries}


def ids_of(ids: dict[str, str], *names: str) -> set[str]:
    return {entry_id(ids[n]) for n in names}


@pytest.mark.parametrize("fmt", ["atom", "json"])
@pytest.mark.parametrize("path, query, expected", [
    ("/feeds/acme/chat-model", "", ["fix", "risk", "removal"]),
    ("/feeds/other/tool-model", "", ["other"]),
    ("/feeds/acme", "", ["fix", "risk", "removal"]),
    ("/feeds/all", "", ["fix", "risk", "removal", "other"]),
    ("/feeds/all", "?min_severity=high", ["fix", "other"]),
    ("/feeds/all", "?category=weights", ["risk", "removal"]),
    ("/feeds/all", "?category=files&category=generation", ["fix", "removal", "other"]),
    ("/feeds/acme", "?category=generation,weights&min_severity=moderate", ["fix", "risk", "removal"]),
    ("/feeds/acme/chat-model", "?min_severity=critical", []),
])
def test_every_feed_parses_and_holds_exactly_the_expected_entries(read_only_feeds, fmt, path, query, expected):
    tracker, client, ids = read_only_feeds
    parsed = read(client, f"{path}.{fmt}{query}")
    assert entry_ids(parsed) == ids_of(ids, *expected)
    assert len(parsed.entries) == len(expected)


@pytest.mark.parametrize("fmt", ["atom", "json"])
def test_an_entry_carries_summary_findings_estimate_link_and_modified(read_only_feeds, fmt):
    tracker, client, ids = read_only_feeds
    parsed = read(client, f"/feeds/acme/chat-model.{fmt}")
    by_id = {e.id: e for e in parsed.entries}
    record = to_osv(tracker.store.advisories.get(ids["fix"]).record)
    entry = by_id[entry_id(ids["fix"])]
    assert entry.title == f"[HIGH] {record['summary']}"  # the severity first, as a reader's list shows it
    assert entry.link == f"http://testserver/advisories/{ids['fix']}"
    assert parsed.feed.link == "http://testserver/repos/acme/chat-model"  # the repo's page, not the site root
    assert entry.updated_parsed[:6] == _parse_date(record["modified"])[:6]
    html = entry.content[0].value
    assert "eos_token_id: 128001 → [128001, 128009]" in html
    assert "<code>generation.eos_token_id_changed</code>" in html
    assert f"/commit/{record['database_specific']['revision']}" in html
    # Newest change first: the advisories were stored in one poll, so only the order of modified matters.
    updated = [e.updated_parsed for e in parsed.entries]
    assert updated == sorted(updated, reverse=True)


def test_the_estimator_delta_is_in_the_entry(hub_standin, tracker_settings, make):
    from tests.core.conftest import config_json

    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    hub_standin.commit(REPO, {"config.json": config_json(num_hidden_layers=48, hidden_size=4096,
                                                         intermediate_size=16384, num_attention_heads=32)})
    tracker.poll()
    (adv,) = tracker.store.advisories.find()
    delta = adv.record.specific.estimate_delta
    assert delta is not None
    assert delta["params"]["before"] < delta["params"]["after"]
    parsed = read(TestClient(create_app(tracker)), "/feeds/acme/chat-model.atom")
    html = parsed.entries[0].content[0].value
    assert f"parameters: {delta['params']['before']:,} → {delta['params']['after']:,}" in html
    assert "<h3>Estimator</h3>" in html


def test_a_withdrawn_advisory_updates_its_entry(feeds, tracker_settings, make):
    tracker, client, ids = feeds
    before = {e.id: e for e in read(client, "/feeds/all.atom").entries}[entry_id(ids["fix"])]
    newer = make(tracker_settings, severity={"generation.eos_token_id_changed": "info"})
    assert newer.reanalyse(REPO) >= 1
    after_feed = read(TestClient(create_app(newer)), "/feeds/all.atom")
    assert entry_ids(after_feed) == ids_of(ids, "fix", "risk", "removal", "other")  # same id, no new entry
    after = {e.id: e for e in after_feed.entries}[entry_id(ids["fix"])]
    assert after.title.startswith("[HIGH] Withdrawn")
    # Microseconds count (struct_time would drop them): the withdrawal may come within the same second.
    assert datetime.fromisoformat(after.updated) > datetime.fromisoformat(before.updated)
    assert datetime.fromisoformat(after.updated) == datetime.fromisoformat(
        newer.store.advisories.get(ids["fix"]).record.modified.replace("Z", "+00:00"))
    assert "<strong>Withdrawn</strong>" in after.content[0].value
    assert after_feed.entries[0].id == entry_id(ids["fix"])  # the most recent change comes first


@pytest.mark.parametrize("fmt", ["atom", "json"])
def test_conditional_get_answers_304_until_something_changes(feeds, fmt, hub_standin):
    tracker, client, ids = feeds
    first = client.get(f"/feeds/all.{fmt}")
    etag, last_modified = first.headers["etag"], first.headers["last-modified"]
    assert client.get(f"/feeds/all.{fmt}", headers={"If-None-Match": etag}).status_code == 304
    assert client.get(f"/feeds/all.{fmt}", headers={"If-Modified-Since": last_modified}).status_code == 304
    not_modified = client.get(f"/feeds/all.{fmt}", headers={"If-None-Match": etag})
    assert not_modified.content == b"" and not_modified.headers["etag"] == etag
    # Another filter is another document.
    assert client.get(f"/feeds/all.{fmt}?min_severity=high", headers={"If-None-Match": etag}).status_code == 200
    assert client.get(f"/feeds/all.{fmt}", headers={"If-None-Match": '"stale"'}).status_code == 200

    new = hub_standin.commit(OTHER, {"generation_config.json": b'{"eos_token_id": 8}'}, message="eos again")
    tracker.poll()
    changed = client.get(f"/feeds/all.{fmt}", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert entry_id(advisory_id(OTHER, new, "update")) in entry_ids(parse(changed))


@pytest.mark.parametrize("path, status, message", [
    ("/feeds/acme/unknown.atom", 404, "not watched: acme/unknown"),
    ("/feeds/nobody.json", 404, "no watched repo belongs to nobody"),
    ("/feeds/acme/chat-model.rss", 404, "feeds end in .atom or .json"),
    ("/feeds/all.json?min_severity=severe", 400,
     "invalid min_severity 'severe': expected one of critical, high, moderate, low, info"),
    ("/feeds/all.atom?category=tokeniser", 400, "unknown category 'tokeniser': expected one of "
     "adapter, analysis, chat_template, code, config, consistency, dependencies, diffusers, embeddings, estimate, "
     "exports, files, generation, gguf, licence, manifest, preprocessing, processor, repo, sentence_transformers, "
     "tokenizer, upstream, verify, weights"),
    ("/feeds/ac--me.atom", 400, "invalid owner 'ac--me'"),
])
def test_bad_feed_requests_get_a_clear_error(read_only_feeds, path, status, message):
    _tracker, client, _ids = read_only_feeds
    answer = client.get(path)
    assert (answer.status_code, answer.json()["message"]) == (status, message)
