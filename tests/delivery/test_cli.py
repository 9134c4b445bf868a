"""`tracker subscribe`, `subscriptions`, `unsubscribe`: exact output, the secret shown once, clear errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from standardwebhooks import Webhook

from tracker.surfaces.cli import main


def test_subscribe_list_and_unsubscribe(cli):
    made = cli("subscribe", "acme/chat-model", "--webhook", "http://127.0.0.1:8000/hook?token=abc",
               "--min-severity", "high", "--category", "weights", "--category", "code", "--json")
    assert made.exit_code == 0, made.output
    sub = json.loads(made.output)
    assert set(sub) == {"id", "target", "kind", "url", "min_severity", "categories", "created_at", "secret"}
    assert (sub["id"], sub["target"], sub["kind"], sub["min_severity"], sub["categories"]) == (
        1, "acme/chat-model", "webhook", "high", ["code", "weights"])
    assert sub["url"] == "http://127.0.0.1:8000/hook"  # query strings may hold tokens: not shown
    assert sub["secret"].startswith("whsec_")
    Webhook(sub["secret"])  # a secret the standardwebhooks package accepts

    slack = cli("subscribe", "Qwen", "--slack", "http://127.0.0.1:8000/services/T0/B0/XXXX")
    assert slack.exit_code == 0
    assert slack.stdout == "subscription 2: slack alerts for Qwen (info and above)\n"
    everything = cli("subscribe", "*", "--webhook", "http://127.0.0.1:8000/all")
    lines = everything.output.splitlines()
    assert lines[0] == "subscription 3: webhook alerts for * (info and above)"
    assert lines[1].startswith("signing secret (shown once, keep it safe): whsec_")

    listed = json.loads(cli("subscriptions", "--json").output)
    assert [(s["id"], s["target"], s["kind"], s["url"]) for s in listed] == [
        (1, "acme/chat-model", "webhook", "http://127.0.0.1:8000/hook"),
        (2, "Qwen", "slack", "http://127.0.0.1:8000/…"),  # a Slack URL is a credential
        (3, "*", "webhook", "http://127.0.0.1:8000/all")]
    assert all("secret" not in s for s in listed)
    text = cli("subscriptions").output
    assert "whsec_" not in text and "XXXX" not in text and "token" not in text
    assert text.splitlines()[0] == f"  ID  KIND     {'TARGET':40}  SEVERITY [CATEGORIES]  URL"
    assert text.splitlines()[1].split() == ["1", "webhook", "acme/chat-model", "high+", "[code,", "weights]",
                                            "http://127.0.0.1:8000/hook"]

    assert cli("unsubscribe", "2").output == "removed subscription 2\n"
    gone = cli("unsubscribe", "2")
    assert (gone.exit_code, gone.output) == (1, "error: no subscription 2\n")
    assert [s["id"] for s in json.loads(cli("subscriptions", "--json").output)] == [1, 3]


@pytest.mark.parametrize("args, message", [
    (["*"], "give exactly one of slack or webhook: the URL alerts go to (--slack URL or --webhook URL)"),
    (["*", "--slack", "https://a.example", "--webhook", "https://b.example"],
     "give exactly one of slack or webhook: the URL alerts go to (--slack URL or --webhook URL)"),
    (["acme/model/extra", "--webhook", "http://127.0.0.1/x"],
     "invalid target 'acme/model/extra': expected a repo id (owner/name), an owner, or '*'"),
    (["bad-", "--webhook", "http://127.0.0.1/x"],
     "invalid target 'bad-': expected a repo id (owner/name), an owner, or '*'"),
    (["*", "--webhook", "http://127.0.0.1/x", "--category", "tokeniser"], "unknown category 'tokeniser'"),
    (["*", "--webhook", "http://127.0.0.1/x", "--min-severity", "severe"], "'severe' is not one of"),
])
def test_bad_subscriptions_are_refused_with_one_clear_line(cli, args, message):
    result = cli("subscribe", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert json.loads(cli("subscriptions", "--json").output) == []


def test_an_unreachable_scheme_or_host_is_one_line_and_exit_1(cli):
    result = cli("subscribe", "*", "--webhook", "ftp://example.org/x")
    assert (result.exit_code, result.output) == (1, "error: the URL must be http(s)://host/...\n")
    result = cli("subscribe", "*", "--webhook", "http://example.org/x")
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and result.output.count("\n") == 1


def test_delivery_settings_from_the_file_and_the_environment(tmp_path):
    from tracker.adapters.settings import DeliverySettings, load_settings
    from tracker.core.errors import ConfigError

    config = tmp_path / "t.toml"
    config.write_text('[delivery]\nmax_attempts = 3\nbackoff_base = "2s"\nbackoff_max = "1m"\ntimeout = "4s"\n'
                      'allow_hosts = ["Hooks.Internal", "10.0.0.0/8"]\n')
    assert load_settings(config, env={}).delivery == DeliverySettings(
        max_attempts=3, backoff_base=2.0, backoff_max=60.0, timeout=4.0, allow_hosts=("hooks.internal", "10.0.0.0/8"))
    env = {"TRACKER_DELIVERY_ALLOW_HOSTS": "localhost, 127.0.0.1,,"}
    assert load_settings(config, env=env).delivery.allow_hosts == ("localhost", "127.0.0.1")
    assert load_settings(None, env={}).delivery == DeliverySettings()
    config.write_text("[delivery]\nmax_attempts = 0\n")
    with pytest.raises(ConfigError, match=r": \[delivery\] max_attempts: must be a whole number, at least 1, not 0$"):
        load_settings(config, env={})
    config.write_text('[delivery]\nallow_hosts = "localhost"\n')
    with pytest.raises(ConfigError, match=r": \[delivery\] allow_hosts: must be a list of host names or addresses, not 'localhost'$"):
        load_settings(config, env={})


def test_a_slack_subscription_needs_no_dns_and_a_webhook_still_does(cli):
    # .invalid never resolves (RFC 2606): a Slack URL is checked without DNS, and at every send
    made = cli("subscribe", "acme", "--slack", "https://hooks.slack.invalid/services/T0/B0/XX")
    assert (made.exit_code, made.stdout, made.stderr) == (
        0, "subscription 1: slack alerts for acme (info and above)\n",
        "warning: no repo of acme is watched, so no alert comes until you `tracker watch add acme/NAME`\n")
    refused = cli("subscribe", "acme", "--webhook", "https://alerts.slack.invalid/in")
    assert refused.exit_code == 1 and refused.stderr.startswith("error: cannot resolve alerts.slack.invalid: ")
    plain = cli("subscribe", "acme", "--slack", "http://hooks.slack.invalid/services/T0/B0/XX")
    assert (plain.exit_code, plain.stderr) == (
        1, "error: refused: hooks.slack.invalid must be reached over https (plain http only for allow_hosts)\n")


def test_subscribe_warns_when_only_this_shell_allows_the_target(tmp_path, hub_standin, db_url):
    config = tmp_path / "plain.toml"
    config.write_text("")
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": db_url, "TRACKER_CONFIG": str(config),
           "TRACKER_DELIVERY_ALLOW_HOSTS": "localhost"}
    if db_url.startswith("postgresql"):
        assert CliRunner().invoke(main, ["init"], env=env).exit_code == 0
    made = CliRunner().invoke(main, ["subscribe", "*", "--webhook", "http://localhost:9/in"], env=env)
    assert made.exit_code == 0
    assert made.stdout.splitlines()[0] == "subscription 1: webhook alerts for * (info and above)"
    assert made.stderr == (
        "warning: TRACKER_DELIVERY_ALLOW_HOSTS of this shell allows this target, the config file does not (refused: "
        "localhost resolves to 127.0.0.1, a loopback address (allow it with [delivery] allow_hosts or "
        "TRACKER_DELIVERY_ALLOW_HOSTS)); a `tracker run` without TRACKER_DELIVERY_ALLOW_HOSTS will not send to it: "
        f"set [delivery] allow_hosts once in {config}\n")
    config.write_text('[delivery]\nallow_hosts = ["localhost"]\n')  # set once, where the daemon reads it too
    again = CliRunner().invoke(main, ["subscribe", "*", "--webhook", "http://localhost:9/in"], env=env)
    assert (again.exit_code, again.stderr) == (0, "")
