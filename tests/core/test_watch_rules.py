"""Watch rules: a rule watches exactly the models it matches, follows new ones, drops old ones after the grace."""

from __future__ import annotations

import datetime as dt

import pytest
from fastapi.testclient import TestClient

from tests.clocks import ManualClock
from tests.core.conftest import config_json
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.errors import ConfigError
from tracker.core.watchrules import WatchRule, parse_rule
from tracker.surfaces.api import create_app

RULE = "library=sentence-transformers downloads>=10000"


@pytest.fixture
def catalogue(hub_standin):
    """100 models: 30 sentence-transformers ones with 10k+ downloads (the rule's), 70 that miss it one way or another."""
    hub_standin.models_page_size = 25
    matching = []
    for i in range(100):
        repo = f"org{i % 7}/model-{i:03d}"
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json()})
        if i < 40:
            downloads = 10_000 + 100 * i if i < 30 else 9_999  # 30 above, 10 just below
            hub_standin.set_listing(repo, library_name="sentence-transformers", downloads=downloads)
            if i < 30:
                matching.append(repo)
        else:
            hub_standin.set_listing(repo, library_name="transformers", downloads=50_000)
    return matching


def tracker_for(hub_standin, tmp_path, clock):
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url, "timeout": 30.0, "budget_api_per_5min": 100_000,
                             "budget_resolvers_per_5min": 100_000})
    hub = HubClient(settings.hub.endpoint, timeout=5.0, sleep=lambda _s: None)
    return make_tracker(settings, hub=hub, clock=clock, auto_upgrade=True)


def watched_by(tracker, rule_id):
    return sorted(r.repo_id for r in tracker.store.repos.all() if r.rule_id == rule_id)


def test_a_rule_watches_its_matches_follows_new_ones_and_drops_old_ones_after_the_grace(
        hub_standin, tmp_path, catalogue):
    clock = ManualClock()
    tracker = tracker_for(hub_standin, tmp_path, clock)
    rule, created = tracker.store.rules.add(parse_rule(RULE), max_repos=1000, now=clock())
    assert created and rule.text == RULE

    results = tracker.poll()
    assert watched_by(tracker, rule.id) == sorted(catalogue)
    assert sorted(r.repo for r in results) == sorted(catalogue)
    assert {r.status for r in results} == {"baseline"}

    hub_standin.create_repo("newcomer/encoder")
    hub_standin.commit("newcomer/encoder", {"config.json": config_json()})
    hub_standin.set_listing("newcomer/encoder", library_name="sentence-transformers", downloads=12_345)
    clock.now += dt.timedelta(hours=1)
    tracker.poll()
    assert watched_by(tracker, rule.id) == sorted([*catalogue, "newcomer/encoder"])
    assert tracker.repo("newcomer/encoder").last_seen_sha == hub_standin.head("newcomer/encoder")

    leaving = catalogue[0]
    hub_standin.set_listing(leaving, downloads=5)
    clock.now += dt.timedelta(hours=1)
    tracker.poll()
    assert leaving in watched_by(tracker, rule.id)  # within the grace
    clock.now += dt.timedelta(days=1)
    tracker.poll()
    assert watched_by(tracker, rule.id) == sorted([*catalogue[1:], "newcomer/encoder"])
    assert tracker.store.repos.get(leaving) is None


def test_a_rule_never_holds_more_than_its_cap_and_says_so(hub_standin, tmp_path, catalogue, caplog):
    clock = ManualClock()
    tracker = tracker_for(hub_standin, tmp_path, clock)
    rule, _ = tracker.store.rules.add(parse_rule(RULE), max_repos=20, now=clock())
    tracker.poll()
    by_downloads = sorted(catalogue, key=lambda r: -int(r.rsplit("-", 1)[1]))  # downloads grow with the number
    assert watched_by(tracker, rule.id) == sorted(by_downloads[:20])
    assert [r.message for r in caplog.records if r.name.startswith("tracker") and "cap" in r.message] == [
        f"watch rule {rule.id} ({RULE}) matches more than its cap of 20 repos: watching the first 20 "
        f"(raise it with `tracker watch add --rule '{RULE}' --max N`)"]
    assert tracker.store.rules.get(rule.id).capped is True

    hub_standin.create_repo("newcomer/encoder")
    hub_standin.commit("newcomer/encoder", {"config.json": config_json()})
    hub_standin.set_listing("newcomer/encoder", library_name="sentence-transformers", downloads=1_000_000)
    hub_standin.set_listing(by_downloads[0], downloads=1)  # leaves the rule: in its grace, still counted
    for _ in range(3):
        clock.now += dt.timedelta(hours=2)
        tracker.poll()
        assert len(watched_by(tracker, rule.id)) == 20
    clock.now += dt.timedelta(days=1)
    tracker.poll()  # the grace is over: dropped; that frees a place for the newcomer at the next evaluation
    tracker.poll()
    assert len(watched_by(tracker, rule.id)) == 20
    assert "newcomer/encoder" in watched_by(tracker, rule.id)
    assert by_downloads[0] not in watched_by(tracker, rule.id)


def test_a_rule_is_listed_with_the_hubs_own_filters(hub_standin, tmp_path, catalogue):
    clock = ManualClock()
    tracker = tracker_for(hub_standin, tmp_path, clock)
    tracker.store.rules.add(parse_rule(RULE), max_repos=1000, now=clock())
    hub_standin.clear_log()
    tracker.poll()
    listings = [r for r in hub_standin.requests if r.path == "/api/models" and "filter=" in r.query]
    assert listings[0].query == ("filter=sentence-transformers&sort=downloads&direction=-1&expand=downloads")
    assert len(listings) == 2  # 25 a page: the second page reaches the first model under 10,000 downloads


@pytest.mark.parametrize(("text", "rule"), [
    ("author=intfloat", WatchRule(author="intfloat")),
    ("library=sentence-transformers downloads>=10000", WatchRule(library="sentence-transformers",
                                                                 downloads_min=10_000)),
    ("pipeline_tag=text-generation author=meta-llama", WatchRule(author="meta-llama", pipeline_tag="text-generation")),
])
def test_the_rule_forms(text, rule):
    assert parse_rule(text) == rule


@pytest.mark.parametrize(("text", "message"), [
    ("", "an empty rule: give author=, library= or pipeline_tag= (and downloads>=N)"),
    ("downloads>=5", "a rule needs author=, library= or pipeline_tag= (downloads>=N alone would list the whole Hub)"),
    ("owner=x", "rule term 'owner=x': unknown key 'owner' (keys: author, library, pipeline_tag, downloads)"),
    ("author=a author=b", "rule term 'author=b': author is given twice"),
    ("author>=a", "rule term 'author>=a': write author=VALUE"),
    ("author=x downloads=5", "rule term 'downloads=5': write downloads>=N"),
    ("author=x downloads>=many", "rule: downloads>='many' must be a whole number"),
    ("library=a/b", "rule: library='a/b' is not a Hub tag (letters, digits, - _ .)"),
    ("author=-bad", "rule: author='-bad' is not a Hub user or org name"),
])
def test_a_malformed_rule_is_refused_with_a_clear_error(text, message):
    with pytest.raises(ConfigError) as err:
        parse_rule(text)
    assert str(err.value) == message


def test_rules_from_the_command_line_to_the_api(hub_standin, cli, tmp_path):
    for name in ("e5-small", "e5-large"):
        hub_standin.create_repo(f"intfloat/{name}")
        hub_standin.commit(f"intfloat/{name}", {"config.json": config_json()})
    hub_standin.create_repo("someone/else")
    added = cli("watch", "add", "--rule", "author=intfloat", "--max", "5")
    assert added.output == "rule 1: author=intfloat (at most 5 repos); the next poll cycle watches what it matches\n"
    assert cli("watch", "add", "--rule", "owner=intfloat").exit_code == 2
    assert cli("watch", "add", "acme/x", "--max", "5").exit_code == 2
    polled = cli("poll")
    assert polled.output.splitlines() == [
        "intfloat/e5-large: baseline, 1 new revision(s), 1 analysed",
        "intfloat/e5-small: baseline, 1 new revision(s), 1 analysed",
        "polled 2 repos: 2 with new revisions, 0 failed"]
    listed = cli("watch", "list").output.splitlines()
    assert [line.split()[0] for line in listed[1:3]] == ["intfloat/e5-large", "intfloat/e5-small"]
    assert all(line.endswith("(rule 1)") for line in listed[1:3])
    assert listed[3:5] == ["", f"{'RULE':5} {'REPOS':>11} {'EVALUATED':21} TERMS"]
    assert listed[5].split()[:2] == ["1", "2/5"] and listed[5].endswith(" author=intfloat")
    assert listed[6:] == ["      intfloat/e5-large", "      intfloat/e5-small"]

    tracker = make_tracker(Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                                    hub={"endpoint": hub_standin.url}))
    body = TestClient(create_app(tracker)).get("/v1/rules").json()
    assert [(r["id"], r["rule"], r["max"], r["capped"], r["matched"], [x["repo"] for x in r["repos"]])
            for r in body["rules"]] == [(1, "author=intfloat", 5, False, 2, ["intfloat/e5-large", "intfloat/e5-small"])]
    tracker.store.close()

    removed = cli("watch", "remove", "--rule", "1")
    assert removed.output == "removed rule 1 and the 2 repo(s) it watched\n"
    assert cli("watch", "remove", "--rule", "1").exit_code == 1
    assert cli("watch", "list").output == "no repos watched; add some with `tracker watch add OWNER/NAME`\n"


def test_a_listing_whose_cursor_repeats_a_page_ends_early_and_the_rule_drops_nothing(hub_standin, tmp_path,
                                                                                        catalogue, caplog):
    clock = ManualClock()
    tracker = tracker_for(hub_standin, tmp_path, clock)
    rule, _ = tracker.store.rules.add(parse_rule(RULE), max_repos=1000, now=clock())
    tracker.poll()
    assert watched_by(tracker, rule.id) == sorted(catalogue)
    for page in range(200):  # every page's cursor answers the first page again
        hub_standin.listing_faults.add("repeat", page, times=None)
    for _ in range(2):  # twice past the grace: a repo missing from a complete listing would be gone
        clock.now += dt.timedelta(days=2)
        hub_standin.clear_log()
        tracker.poll()  # evaluates the rule first
        listing = [r for r in hub_standin.requests if r.path == "/api/models" and "sort=downloads" in r.query]
        assert len(listing) == 2  # the page, then the same page again: the listing ends there, incomplete
    hub_standin.listing_faults.clear()
    assert watched_by(tracker, rule.id) == sorted(catalogue)
    assert "the Hub's listing ended early (a page served twice)" in caplog.text
