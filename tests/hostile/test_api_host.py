"""A forged Host header never reaches a link: links use [api] public_url, or a Host the tracker knows.

Behind a shared cache, one request with ``Host: evil.example`` would otherwise hand every later
reader a feed whose links point at evil.example. The app is served as ``tracker serve`` and
``tracker run`` serve it (``bind_host``, the address they listen on), through Starlette's own
client; the probes answer any Host.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.core.conftest import config_json
from tests.core.test_advisories import README
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings, load_settings
from tracker.app import make_tracker
from tracker.core.model import RepoId
from tracker.surfaces.api import create_app

REPO = RepoId("acme/host-model")


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    """A tracker with one watched repo and its baseline (a feed with a home and self link), read once."""
    from hubstandin import HubStandin

    work = tmp_path_factory.mktemp("host")
    hub = HubStandin(work / "hub").start()
    try:
        hub.create_repo(REPO)
        hub.commit(REPO, {"config.json": config_json(), "README.md": README})
        settings = Settings(database={"url": f"sqlite:///{work}/t.sqlite3"}, hub={"endpoint": hub.url})
        built = make_tracker(settings, hub=HubClient.from_settings(settings, token=False, sleep=lambda _s: None))
        built.store.repos.add(REPO, now=built.clock())
        built.poll()
        built.base_settings = settings  # each test serves it with its own settings, made from these
        yield built
    finally:
        hub.stop(wait=False)


def client(tracker, bind_host: str | None = "127.0.0.1", **settings) -> TestClient:
    tracker.settings = tracker.base_settings.changed(**settings)
    return TestClient(create_app(tracker, bind_host=bind_host), base_url="http://127.0.0.1:8080")


def feed_links(answer) -> tuple[str, str]:
    assert answer.status_code == 200, answer.text
    feed = answer.json()
    return feed["home_page_url"], feed["feed_url"]


@pytest.mark.parametrize("path", ["/feeds/all.json", "/feeds/acme/host-model.atom", f"/repos/{REPO}", "/v1/repos",
                                  "/v1/vulns/HF-none"])
def test_an_unknown_host_is_answered_400_when_links_would_use_it(tracker, path):
    answer = client(tracker).get(path, headers={"Host": "evil.example"})
    assert (answer.status_code, answer.text) == (400, "Invalid host header")


@pytest.mark.parametrize("host, base", [
    ("127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("localhost:8080", "http://localhost:8080"),
    ("LOCALHOST", "http://LOCALHOST"),  # names are case-insensitive
    ("[::1]:8080", "http://[::1]:8080"),
])
def test_the_bind_address_and_localhost_are_answered_with_links_to_themselves(tracker, host, base):
    answer = client(tracker).get("/feeds/all.json", headers={"Host": host})
    assert feed_links(answer) == (base, f"{base}/feeds/all.json")


def test_a_wildcard_bind_address_still_answers_only_localhost_by_default(tracker):
    wildcard = client(tracker, bind_host="0.0.0.0")
    assert wildcard.get("/feeds/all.json", headers={"Host": "10.1.2.3:8080"}).status_code == 400
    assert wildcard.get("/feeds/all.json", headers={"Host": "localhost:8080"}).status_code == 200


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_the_probes_answer_any_host(tracker, path):
    assert client(tracker).get(path, headers={"Host": "10.244.1.7:8080"}).status_code == 200


def test_with_a_public_url_every_link_uses_it_whatever_the_host(tracker):
    public = client(tracker, api={"public_url": "https://tracker.example.org"})
    answer = public.get("/feeds/all.json", headers={"Host": "evil.example"})
    assert feed_links(answer) == ("https://tracker.example.org", "https://tracker.example.org/feeds/all.json")
    atom = public.get("/feeds/all.atom", headers={"Host": "evil.example"}).text
    assert "evil.example" not in atom and 'href="https://tracker.example.org/feeds/all.atom"' in atom


def test_the_older_tracker_url_still_sets_the_links(tracker):
    older = client(tracker, advisories={"tracker_url": "https://old.example.org"})
    assert feed_links(older.get("/feeds/all.json", headers={"Host": "evil.example"}))[0] == "https://old.example.org"


def test_allowed_hosts_are_enforced_even_with_a_public_url(tracker):
    strict = client(tracker,
                    api={"public_url": "https://tracker.example.org",
                         "allowed_hosts": ("tracker.example.org", "*.internal.example")})
    assert strict.get("/feeds/all.json", headers={"Host": "evil.example"}).status_code == 400
    assert strict.get("/feeds/all.json", headers={"Host": "127.0.0.1:8080"}).status_code == 400
    assert strict.get("/feeds/all.json", headers={"Host": "tracker.example.org"}).status_code == 200
    assert strict.get("/feeds/all.json", headers={"Host": "api.internal.example:8080"}).status_code == 200


def test_an_app_built_in_process_checks_only_the_hosts_it_is_told(tracker):
    # create_app without bind_host (in-process use) knows no address of its own.
    assert client(tracker, bind_host=None).get("/feeds/all.json", headers={"Host": "testserver"}).status_code == 200
    named = client(tracker, bind_host=None, api={"allowed_hosts": ("localhost",)})
    assert named.get("/feeds/all.json", headers={"Host": "testserver"}).status_code == 400


def test_the_settings_read_public_url_and_the_older_name(tmp_path):
    config = tmp_path / "t.toml"
    config.write_text('[advisories]\ntracker_url = "https://old.example.org/"\n')
    assert load_settings(config, env={}).public_url == "https://old.example.org"
    config.write_text('[advisories]\ntracker_url = "https://old.example.org"\n\n'
                      '[api]\npublic_url = "https://new.example.org"\nallowed_hosts = ["New.Example.org"]\n')
    settings = load_settings(config, env={})
    assert settings.public_url == "https://new.example.org"
    assert settings.api.allowed_hosts == ("new.example.org",)
    assert load_settings(config, env={"TRACKER_API_PUBLIC_URL": "http://10.0.0.5:8080"}).public_url == \
        "http://10.0.0.5:8080"


def test_a_public_url_that_is_not_http_is_refused(tmp_path):
    from tracker.core.errors import ConfigError

    config = tmp_path / "t.toml"
    config.write_text('[api]\npublic_url = "javascript:alert(1)"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(config, env={})
    assert str(caught.value) == (f"{config}: [api] public_url: must be an http(s) URL such as "
                                 "https://tracker.example.org, not 'javascript:alert(1)'")
