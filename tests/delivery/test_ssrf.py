"""No SSRF: private, loopback, link-local and metadata targets are refused when subscribing and when sending."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from tests.delivery.conftest import REPO, push_history, start_repo
from tracker.adapters.delivery.guard import TargetGuard, TargetRefused
from tracker.adapters.delivery.worker import DeliveryWorker
from tracker.adapters.settings import DeliverySettings
from tracker.surfaces.cli import main

ALLOW = " (allow it with [delivery] allow_hosts or TRACKER_DELIVERY_ALLOW_HOSTS)"


@pytest.mark.parametrize("url, why", [
    ("https://127.0.0.1/hook", "127.0.0.1 is a loopback address"),
    ("https://127.8.9.10/hook", "127.8.9.10 is a loopback address"),
    ("https://[::1]/hook", "::1 is a loopback address"),
    ("https://10.1.2.3/hook", "10.1.2.3 is a private address"),
    ("https://172.16.5.4/hook", "172.16.5.4 is a private address"),
    ("https://192.168.0.1/hook", "192.168.0.1 is a private address"),
    ("https://[fc00::1]/hook", "fc00::1 is a private address"),
    ("https://[fd12:3456::1]/hook", "fd12:3456::1 is a private address"),
    ("https://169.254.1.1/hook", "169.254.1.1 is a link-local address"),
    ("https://[fe80::1]/hook", "fe80::1 is a link-local address"),
    ("https://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"),
    ("https://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is a cloud metadata address"),
    ("https://0.0.0.0/hook", "0.0.0.0 is an unspecified address"),
    ("https://[::]/hook", ":: is an unspecified address"),
    ("https://224.0.0.1/hook", "224.0.0.1 is a multicast address"),
    ("https://[ff02::1]/hook", "ff02::1 is a multicast address"),
    ("https://100.64.0.1/hook", "100.64.0.1 is a shared (carrier-grade NAT) address (RFC 6598)"),
    ("https://[::ffff:127.0.0.1]/hook", "::ffff:127.0.0.1 is a loopback address (it carries IPv4 127.0.0.1)"),
    # Spellings a resolver turns into loopback: the check is on what the name resolves to.
    ("https://2130706433/hook", "2130706433 resolves to 127.0.0.1, a loopback address"),
    ("https://0x7f.1/hook", "0x7f.1 resolves to 127.0.0.1, a loopback address"),
])
def test_literal_addresses_are_refused(url, why):
    with pytest.raises(TargetRefused) as caught:
        TargetGuard().check(url)
    assert str(caught.value) == f"refused: {why}{ALLOW}"


def test_a_hostname_resolving_to_loopback_is_refused():
    with pytest.raises(TargetRefused) as caught:
        TargetGuard().check("https://localhost/hook")
    assert str(caught.value) in {f"refused: localhost resolves to {a}, a loopback address{ALLOW}"
                                 for a in ("127.0.0.1", "::1")}


def test_every_address_a_name_resolves_to_is_checked():
    names = {"hooks.example.test": ["93.184.215.14", "10.0.0.5"]}
    guard = TargetGuard(resolver=lambda host, port: names[host])
    with pytest.raises(TargetRefused) as caught:
        guard.check("https://hooks.example.test/hook")
    assert str(caught.value) == f"refused: hooks.example.test resolves to 10.0.0.5, a private address{ALLOW}"


def test_public_https_passes_and_plain_http_needs_the_allow_list():
    guard = TargetGuard(resolver=lambda host, port: ["93.184.215.14"])
    target = guard.check("https://hooks.example.test:8443/a/b?c=d")
    assert (target.addresses, target.host, target.display) == (("93.184.215.14",), "hooks.example.test",
                                                               "https://hooks.example.test:8443")
    with pytest.raises(TargetRefused) as caught:
        guard.check("http://hooks.example.test/hook")
    assert str(caught.value) == ("refused: hooks.example.test must be reached over https "
                                 "(plain http only for allow_hosts)")


@pytest.mark.parametrize("url, message", [
    ("ftp://example.org/x", "the URL must be http(s)://host/..."),
    ("https:///nohost", "the URL must be http(s)://host/..."),
    ("https://no-such-host.invalid/hook", "cannot resolve no-such-host.invalid: "),
])
def test_unusable_urls_are_refused(url, message):
    with pytest.raises(TargetRefused) as caught:
        TargetGuard().check(url)
    assert str(caught.value).startswith(message)


def test_the_allow_list_takes_names_addresses_and_networks():
    resolve = {"hooks.internal": ["10.1.2.3"], "localhost": ["127.0.0.1"]}
    guard = TargetGuard(["Localhost", "10.0.0.0/8", "[::1]"], resolver=lambda host, port: resolve.get(host, [host]))
    assert guard.check("http://localhost:9000/x").addresses == ("127.0.0.1",)
    assert guard.check("http://hooks.internal/x").addresses == ("10.1.2.3",)
    assert guard.check("http://10.9.9.9/x").addresses == ("10.9.9.9",)
    assert guard.check("http://[::1]:8080/x").addresses == ("::1",)
    with pytest.raises(TargetRefused):
        guard.check("http://192.168.1.1/x")
    with pytest.raises(TargetRefused):
        guard.check("https://169.254.169.254/x")


# -- at subscription time --------------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path, hub_standin):
    config = tmp_path / "tracker.toml"
    config.write_text("")
    base = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/cli.sqlite3",
            "TRACKER_CONFIG": str(config)}

    def run(*args: str, **env: str):
        return CliRunner().invoke(main, list(args), env={**base, **env}, catch_exceptions=False)

    return run


@pytest.mark.parametrize("url, error", [
    ("https://localhost/hook", "error: refused: localhost resolves to"),
    ("https://169.254.169.254/latest/meta-data/", "error: refused: 169.254.169.254 is a cloud metadata address"),
    ("https://[fd00:ec2::254]/", "error: refused: fd00:ec2::254 is a cloud metadata address"),
    ("https://192.168.1.20/hook", "error: refused: 192.168.1.20 is a private address"),
])
def test_subscribe_refuses_private_targets(cli, url, error):
    for flag in ("--webhook", "--slack"):
        result = cli("subscribe", "*", flag, url)
        assert result.exit_code == 1
        assert result.output.startswith(error) and result.output.count("\n") == 1
    assert json.loads(cli("subscriptions", "--json").output) == []


def test_subscribe_accepts_a_private_target_on_the_allow_list(cli):
    result = cli("subscribe", "*", "--webhook", "http://localhost:9/hook", "--json",
                 TRACKER_DELIVERY_ALLOW_HOSTS="example.org, localhost")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["url"] == "http://localhost:9/hook"
    assert result.stderr.startswith("warning: TRACKER_DELIVERY_ALLOW_HOSTS of this shell allows this target, the "
                                    "config file does not (refused: localhost resolves to 127.0.0.1, a loopback ")


# -- at send time ------------------------------------------------------------------------------------


def _one_delivery(hub_standin, tracker_settings, make, url: str, *, kind: str = "webhook"):
    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    sub = tracker.store.outbox.add_subscription(target=REPO, kind=kind, url=url, min_severity="high", categories=(),
                                         secret="whsec_" + "A" * 43, now=tracker.clock())
    push_history(hub_standin)
    tracker.poll()
    (delivery,) = tracker.store.outbox.list_deliveries()  # the eos fix is the only high advisory
    return tracker, sub, delivery


def test_a_target_allowed_when_subscribing_is_checked_again_when_sending(hub_standin, tracker_settings, make,
                                                                        receiver):
    got = receiver()
    url = got.url.replace("127.0.0.1", "localhost")
    tracker, _sub, delivery = _one_delivery(hub_standin, tracker_settings, make, url)
    # The allow list changed since (or DNS did): the worker refuses, once, and never connects.
    worker = DeliveryWorker(tracker.store.outbox, DeliverySettings(max_attempts=5, allow_hosts=()))
    assert worker.run_once() == 1
    row = tracker.store.outbox.get_delivery(delivery.id)
    assert (row.state, row.attempts, row.last_status) == ("dead", 1, None)
    assert row.last_error.startswith("refused: localhost resolves to ") and row.last_error.endswith(ALLOW)
    assert got.got == []
    worker.stop()


@pytest.mark.parametrize("location", ["http://169.254.169.254/latest/meta-data/", "LOCAL"])
def test_redirects_are_not_followed(hub_standin, tracker_settings, make, receiver, location):
    elsewhere = receiver()  # a second server the redirect points at, on a host not on the allow list
    if location == "LOCAL":
        location = elsewhere.url.replace("127.0.0.1", "localhost")
    redirecting = receiver(script=[(302, {"Location": location})])
    tracker, _sub, delivery = _one_delivery(hub_standin, tracker_settings, make, redirecting.url)
    worker = DeliveryWorker(tracker.store.outbox, tracker_settings.delivery)
    assert worker.run_once() == 1
    row = tracker.store.outbox.get_delivery(delivery.id)
    origin = location.split("/latest")[0].rsplit("/hook", 1)[0]
    assert (row.state, row.attempts, row.last_status) == ("pending", 1, 302)
    assert row.last_error == f"HTTP 302: redirect to {origin} not followed"
    assert len(redirecting.got) == 1 and elsewhere.got == []
    worker.stop()


def test_the_request_goes_to_the_checked_address_with_the_original_host(hub_standin, tracker_settings, make,
                                                                       receiver):
    got = receiver()
    port = got.url.split(":")[2].split("/")[0]
    lookups: list[str] = []

    def resolver(host: str, _port: int) -> list[str]:
        lookups.append(host)
        return {"hooks.example.test": ["127.0.0.1"]}[host]

    tracker, _sub, delivery = _one_delivery(hub_standin, tracker_settings, make,
                                            f"http://hooks.example.test:{port}/hook", kind="slack")
    worker = DeliveryWorker(tracker.store.outbox, DeliverySettings(allow_hosts=("hooks.example.test",)), resolver=resolver)
    assert worker.run_once() == 1
    assert tracker.store.outbox.get_delivery(delivery.id).state == "delivered"
    assert lookups == ["hooks.example.test"]  # resolved once, connected to what was checked
    (request,) = got.got
    assert request.headers["host"] == f"hooks.example.test:{port}"
    assert request.json["text"].startswith("New advisory: [HIGH] Upstream change in acme/chat-model@")
    worker.stop()


def test_proxies_from_the_environment_are_not_used(monkeypatch):
    from tracker.adapters.delivery.guard import make_client

    monkeypatch.setitem(os.environ, "HTTPS_PROXY", "http://10.0.0.1:3128")
    client = make_client(5.0)
    # httpx keeps the proxies it mounted private: none mounted means none is used.
    assert client._mounts == {} and client.follow_redirects is False  # noqa: SLF001
    client.close()
