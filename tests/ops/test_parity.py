"""The CLI and the HTTP API are two faces of the same services: the same bad input, the same refusal.

Each write both offer (watch add and remove, subscribe, unsubscribe) is given the same bad input through
`tracker ...` and through the API; the message is the same and the code agrees (exit 2 with 400 for a
bad argument, exit 1 with 404 for what does not exist, exit 1 with 400 for a delivery target refused).

The CLI's other writes (rule add and remove, token create and revoke, reanalyse, deliveries retry) have
no API endpoint: each is checked against the service it calls, the one an endpoint would call. The CLI
says the service's error as it is, with the exit code of its kind, and the API's error table answers
that kind with the status and code that go with that exit code; a test fails if the API gains one of
these writes, so that it joins the first list. Also the API's own promises: a body is JSON whatever its
content type, an unread commit is a 404, and every error has OSV's shape.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.ops.conftest import migrated
from tracker.adapters.settings import DeliverySettings, WatchSpec
from tracker.core.errors import TrackerError
from tracker.services import ApiTokens, Revisions, Subscriptions, Watching
from tracker.surfaces.api import create_app
from tracker.surfaces.api_errors import answer_of
from tracker.surfaces.cli import EXIT_CODES

REAL = "intfloat/multilingual-e5-large"
TYPO = "intfloat/multilingual-e5-larg"


def _surfaces(cli, cli_env, hub_standin, settings, make, db_url, **overrides):
    """The CLI and the API over one database: (run, client, auth headers, the API's Tracker)."""
    hub_standin.create_repo(REAL)
    hub_standin.commit(REAL, {"config.json": b'{"model_type": "xlm-roberta"}'}, message="init")
    url = migrated(db_url)
    env = {**cli_env, "TRACKER_DATABASE_URL": url}
    token = cli("token", "create", "parity", env=env).stdout.strip()
    tracker = make(settings, database={"url": url}, delivery=DeliverySettings(allow_hosts=("127.0.0.1",)), **overrides)
    client = TestClient(create_app(tracker))
    auth = {"Authorization": f"Bearer {token}"}

    def run(*args: str):
        return cli(*args, env=env)

    return run, client, auth, tracker


@pytest.fixture
def surfaces(cli, cli_env, hub_standin, settings, make, db_url):
    return _surfaces(cli, cli_env, hub_standin, settings, make, db_url)


@pytest.fixture
def both(surfaces):
    run, client, auth, _tracker = surfaces
    return run, client, auth


def error_line(output: str) -> str:
    """The CLI's message: its `error: ...` line, or click's `Error: Invalid value: ...` for a bad argument."""
    lines = [line for line in output.splitlines() if line.lower().startswith("error: ")]
    assert lines, output
    return lines[0].split(": ", 1)[1].removeprefix("Invalid value: ")


CASES = [
    # (CLI args, API method, path, body, CLI exit code, HTTP status)
    (("watch", "add", TYPO), "post", "/v1/watch", {"repo": TYPO}, 1, 404),
    (("watch", "add", "gpt2"), "post", "/v1/watch", {"repo": "gpt2"}, 2, 400),
    (("watch", "remove", "acme/none"), "delete", "/v1/watch/acme/none", None, 1, 404),
    (("subscribe", "*"), "post", "/v1/subscriptions", {"target": "*"}, 2, 400),
    (("subscribe", "acme/model/extra", "--webhook", "http://127.0.0.1:9/x"), "post", "/v1/subscriptions",
     {"target": "acme/model/extra", "webhook": "http://127.0.0.1:9/x"}, 2, 400),
    (("subscribe", "*", "--webhook", "http://127.0.0.1:9/x", "--category", "tokeniser"), "post",
     "/v1/subscriptions", {"target": "*", "webhook": "http://127.0.0.1:9/x", "categories": ["tokeniser"]}, 2, 400),
    (("subscribe", "*", "--slack", "https://hooks.slack.com/x", "--webhook", "http://127.0.0.1:9/x"), "post",
     "/v1/subscriptions", {"target": "*", "slack": "https://hooks.slack.com/x", "webhook": "http://127.0.0.1:9/x"},
     2, 400),
    # the delivery guard: a private address not allowed, a scheme that is not http(s)
    (("subscribe", "*", "--webhook", "http://10.0.0.7/x"), "post", "/v1/subscriptions",
     {"target": "*", "webhook": "http://10.0.0.7/x"}, 1, 400),
    (("subscribe", "*", "--webhook", "ftp://127.0.0.1/x"), "post", "/v1/subscriptions",
     {"target": "*", "webhook": "ftp://127.0.0.1/x"}, 1, 400),
    (("unsubscribe", "99"), "delete", "/v1/subscriptions/99", None, 1, 404),
    (("watch", "add", REAL, "--every", "5s"), "post", "/v1/watch", {"repo": REAL, "every": "5s"}, 2, 400),
    (("watch", "add", REAL, "--branch", "a b"), "post", "/v1/watch", {"repo": REAL, "branch": "a b"}, 2, 400),
    (("watch", "add", "acme/a..b"), "post", "/v1/watch", {"repo": "acme/a..b"}, 2, 400),
    (("watch", "remove", "acme/a..b"), "delete", "/v1/watch/acme/a..b", None, 2, 400),
]


@pytest.mark.parametrize("args, method, path, body, exit_code, status", CASES,
                         ids=[" ".join(c[0][:2]) + f" {i}" for i, c in enumerate(CASES)])
def test_the_same_bad_input_is_refused_alike_by_the_cli_and_the_api(both, args, method, path, body, exit_code,
                                                                     status):
    run, client, auth = both
    by_cli = run(*args)
    by_api = client.request(method.upper(), path, json=body, headers=auth)
    assert (by_cli.exit_code, by_api.status_code) == (exit_code, status), (by_cli.output, by_api.text)
    assert by_api.json()["code"] == {400: 3, 404: 5}[status]
    assert error_line(by_cli.output) == by_api.json()["message"]


def test_a_repo_the_config_file_lists_is_kept_by_both(cli, cli_env, hub_standin, settings, make, db_url):
    """Unwatched, a repo the config file lists would be watched again by the next command: both refuse."""
    config = Path(cli_env["TRACKER_CONFIG"])
    config.write_text(config.read_text() + f'\n[[watch]]\nrepo = "{REAL}"\n')
    run, client, auth, _tracker = _surfaces(cli, cli_env, hub_standin, settings, make, db_url,
                                            watch=(WatchSpec(repo=REAL),), config_path=config)
    assert run("watch", "list").exit_code == 0  # every command watches the config's repos
    by_cli = run("watch", "remove", REAL)
    by_api = client.delete(f"/v1/watch/{REAL}", headers=auth)
    expected = (f"{REAL} is listed in {config} ([[watch]] repo = \"{REAL}\"), which every command watches again: "
                f"delete that entry, then run `tracker watch remove {REAL}`")
    assert (by_cli.exit_code, error_line(by_cli.output)) == (1, expected)
    assert (by_api.status_code, by_api.json()) == (400, {"code": 3, "message": expected})
    assert [r["repo"] for r in client.get("/v1/repos").json()["repos"]] == [REAL]


def test_a_typo_gets_the_same_suggestion_from_both(both, hub_standin):
    run, client, auth = both
    answer = client.post("/v1/watch", json={"repo": TYPO}, headers=auth)
    assert answer.json() == {"code": 5, "message": f"{TYPO} is not on the Hub at {hub_standin.url}; did you mean "
                                                   f"{REAL}?"}
    assert client.get("/v1/repos").json()["repos"] == []
    unchecked = client.post("/v1/watch", json={"repo": TYPO, "check": False}, headers=auth)
    assert (unchecked.status_code, unchecked.json()["repo"]) == (201, TYPO)  # as --no-check


def test_a_body_is_json_whatever_its_content_type(both):
    _run, client, auth = both
    answer = client.post("/v1/watch", content=f'{{"repo": "{REAL}"}}',
                         headers={**auth, "Content-Type": "application/x-www-form-urlencoded"})
    assert (answer.status_code, answer.json()["repo"], answer.json()["created"]) == (201, REAL, True)


def test_an_unread_commit_is_a_404_never_an_empty_answer(both):
    _run, client, _auth = both
    answer = client.post("/v1/query", json={"commit": "0" * 40})
    assert (answer.status_code, answer.json()["code"]) == (404, 5)
    assert answer.json()["message"].startswith(f"the tracker has not read commit {'0' * 40}")


@pytest.mark.parametrize("method, path, status, expected", [
    ("GET", "/v1/query", 405, {"code": 12, "message": "method GET is not allowed on /v1/query: use POST"}),
    ("PUT", "/v1/watch", 405, {"code": 12, "message": "method PUT is not allowed on /v1/watch: use POST"}),
    ("GET", "/v1/nothing", 404, {"code": 5, "message": "no such endpoint: /v1/nothing (see /docs)"}),
])
def test_every_error_has_the_osv_shape(both, method, path, status, expected):
    _run, client, auth = both
    answer = client.request(method, path, headers=auth)
    assert (answer.status_code, answer.json()) == (status, expected)


# The CLI's writes without an API endpoint: (CLI args, the service call an endpoint would make, CLI exit code).
CLI_ONLY = [
    (("watch", "add", "--rule", "downloads>=10"), lambda t: Watching(t).add_rule("downloads>=10"), 2),
    (("watch", "add", "--rule", "colour=blue"), lambda t: Watching(t).add_rule("colour=blue"), 2),
    (("watch", "remove", "--rule", "99"), lambda t: Watching(t).remove_rule(99), 1),
    (("token", "create", "has space"), lambda t: ApiTokens(t).create("has space"), 2),
    (("token", "revoke", "nobody"), lambda t: ApiTokens(t).revoke("nobody"), 1),
    (("reanalyse", "acme/none"), lambda t: list(Revisions(t).reanalyse(["acme/none"])), 1),
    (("deliveries", "retry", "99"), lambda t: Subscriptions(t).retry(99), 1),
]


@pytest.mark.parametrize("args, call, exit_code", CLI_ONLY, ids=[" ".join(c[0][:3]) for c in CLI_ONLY])
def test_a_write_only_the_cli_offers_says_its_services_refusal(surfaces, args, call, exit_code):
    run, _client, _auth, tracker = surfaces
    by_cli = run(*args)
    with pytest.raises(TrackerError) as refused:
        call(tracker)
    assert by_cli.exit_code == exit_code == next(c for kind, c in EXIT_CODES if isinstance(refused.value, kind)), \
        by_cli.output
    assert error_line(by_cli.output) == str(refused.value)
    answer = answer_of(refused.value)  # what an endpoint calling the same service would answer
    assert (answer.status, answer.code) == {2: (400, 3), 1: (404, 5)}[exit_code]


def test_the_writes_only_the_cli_offers_have_no_endpoint(both):
    """Rules, tokens, reanalyse and retries are written through the CLI alone (GET /v1/rules reads the rules):
    an endpoint added for one of them belongs in CASES above."""
    _run, client, _auth = both
    paths = client.get("/openapi.json").json()["paths"]
    writes = sorted((path, method) for path, item in paths.items() for method in item
                    if method in ("post", "put", "patch", "delete"))
    assert writes == [("/hooks/hub", "post"), ("/v1/query", "post"), ("/v1/querybatch", "post"),
                      ("/v1/subscriptions", "post"), ("/v1/subscriptions/{subscription_id}", "delete"),
                      ("/v1/watch", "post"), ("/v1/watch/{owner}/{name}", "delete")]
