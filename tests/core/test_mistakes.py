"""Common mistakes are caught where they are made, with the argument named and the fix said:
a typo in `watch add`, a revision the Hub does not have, a Hub that cannot be asked, a bad or busy port,
a subscription nothing watched matches. Real stand-in, real CLI, real sockets."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from tests.core.conftest import config_json
from tracker.surfaces.cli import main

REPO = "acme/tiny-model"
DOWN = "http://127.0.0.1:9"
HOOK = "http://127.0.0.1:9/hook"  # allowed by TRACKER_DELIVERY_ALLOW_HOSTS; nothing is sent here  # nothing listens on the discard port: connection refused at once


@pytest.fixture
def run(hub_standin, tmp_path, monkeypatch):
    """The real `tracker` command in-process: run(*args, hub=URL) (the stand-in unless told otherwise)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tracker.toml").write_text('[hub]\nmax_retries = 0\ntimeout = "5s"\n\n'
                                          '[delivery]\nallow_hosts = ["127.0.0.1"]\n')  # set once, in the file

    def invoke(*args: str, hub: str | None = None):
        env = {"HF_ENDPOINT": hub or hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3",
               "TRACKER_CONFIG": str(tmp_path / "tracker.toml")}
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    return invoke


@pytest.fixture
def tiny(hub_standin) -> list[str]:
    hub_standin.create_repo(REPO)
    hub_standin.create_repo("acme/other-model")
    return [hub_standin.commit(REPO, {"config.json": config_json()}, message="initial"),
            hub_standin.commit(REPO, {"config.json": config_json(num_hidden_layers=8)}, message="deeper")]


def watched(run) -> list[str]:
    return [w["repo"] for w in json.loads(run("watch", "list", "--json").output)]


def test_watch_add_of_a_typo_exits_1_with_close_matches_and_adds_nothing(run, tiny, hub_standin):
    result = run("watch", "add", "acme/other-model", "acme/tiny-modl")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: acme/tiny-modl is not on the Hub at {hub_standin.url}; did you mean acme/tiny-model?",
        "nothing added: fix the ids above (or pass --no-check to add them anyway)"]
    assert result.stdout == ""
    assert watched(run) == []


def test_watch_add_of_an_id_with_nothing_close_says_so(run, tiny, hub_standin):
    result = run("watch", "add", "zzz/qqqqqqqq")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (f"error: zzz/qqqqqqqq is not on the Hub at {hub_standin.url} "
                                             "(misspelt, deleted, or private: set HF_TOKEN)")


def test_watch_add_no_check_adds_offline_without_a_request(run, tiny, hub_standin):
    before = len(hub_standin.requests)
    result = run("watch", "add", "acme/tiny-modl", "--no-check", hub=DOWN)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "watching acme/tiny-modl (main, every 1h)\n", "")
    assert len(hub_standin.requests) == before
    assert watched(run) == ["acme/tiny-modl"]


def test_watch_add_with_the_hub_unreachable_warns_and_adds(run, tiny):
    result = run("watch", "add", REPO, hub=DOWN)
    assert result.exit_code == 0
    assert result.stdout == f"watching {REPO} (main, every 1h)\n"
    (warning,) = result.stderr.splitlines()
    assert warning.startswith(f"warning: could not ask the Hub whether {REPO} exists (")
    assert warning.endswith("); adding it anyway")
    assert watched(run) == [REPO]


def test_watch_add_of_ids_the_hub_has_is_quiet(run, tiny):
    result = run("watch", "add", REPO, "acme/other-model")
    assert (result.exit_code, result.stderr) == (0, "")
    assert watched(run) == ["acme/other-model", REPO]


def test_diff_names_the_argument_the_hub_does_not_have(run, tiny):
    result = run("diff", REPO, tiny[0], "nothex")
    assert (result.exit_code, result.stderr) == (1, f"error: NEW 'nothex': no such revision of {REPO} on the Hub\n")
    result = run("diff", REPO, "f" * 40, tiny[1])
    assert (result.exit_code, result.stderr) == (1, f"error: OLD {'f' * 40!r}: no such revision of {REPO} on the Hub\n")


def test_diff_of_a_repo_the_hub_does_not_have_names_the_repo(run, tiny, hub_standin):
    result = run("diff", "acme/tiny-modl", "main", "main")
    assert result.exit_code == 1
    assert result.stderr == (f"error: REPO acme/tiny-modl is not on the Hub at {hub_standin.url}; "
                             "did you mean acme/tiny-model?\n")


def test_diff_with_the_hub_unreachable_says_it_could_not_ask(run, tiny):
    result = run("diff", REPO, "main", tiny[1], hub=DOWN)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: OLD 'main': could not ask the Hub (")
    assert result.stderr.endswith("); retry later\n") and result.stderr.count("\n") == 1
    assert result.stderr.count("(") == result.stderr.count(")")


def test_query_names_the_revision_and_tells_missing_from_unreachable(run, tiny):
    assert run("watch", "add", REPO).exit_code == 0
    assert run("poll").exit_code == 0
    result = run("query", "--repo", REPO, "--revision", "nothex")
    assert (result.exit_code, result.stderr) == (
        1, f"error: --revision 'nothex': {REPO}: no revision 'nothex' on the Hub\n")
    result = run("query", "--repo", REPO, "--revision", "nothex", hub=DOWN)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: --revision 'nothex': could not ask the Hub ({REPO}@nothex: "
                                    "cannot ask the Hub now (")
    assert result.stderr.count("(") == result.stderr.count(")") and result.stderr.count("\n") == 1
    result = run("query", "--repo", "acme/tiny-modl", "--revision", "main")
    assert (result.exit_code, result.stderr) == (
        1, "error: not watched: acme/tiny-modl (add with `tracker watch add acme/tiny-modl`)\n")


def test_estimate_resolves_a_short_sha_of_a_watched_repo_like_query(run, tiny, hub_standin):
    assert run("watch", "add", REPO).exit_code == 0
    assert run("poll").exit_code == 0  # the head is the baseline
    third = hub_standin.commit(REPO, {"config.json": config_json(num_hidden_layers=12)}, message="deeper still")
    assert run("poll").exit_code == 0
    for sha in (tiny[1], third):
        full = run("estimate", REPO, "--revision", sha, "--json")
        short = run("estimate", REPO, "--revision", sha[:7], "--json")
        assert (full.exit_code, short.exit_code, short.stderr) == (0, 0, "")
        assert json.loads(short.stdout) == json.loads(full.stdout)
    assert run("query", "--repo", REPO, "--revision", third[:7]).exit_code == 0
    layers = [json.loads(run("estimate", REPO, "--revision", sha[:7], "--json").stdout) for sha in (tiny[1], third)]
    assert layers[0] != layers[1]


def test_estimate_of_a_revision_it_cannot_resolve_is_one_line_naming_it(run, tiny):
    short = tiny[0][:7]
    result = run("estimate", "acme/other-model", "--revision", short)  # not watched: the Hub takes full ids only
    assert (result.exit_code, result.stdout, result.stderr) == (
        1, "", f"error: --revision '{short}': no such revision of acme/other-model on the Hub (a short commit id "
               "is resolved among the commits the tracker has read of a watched repo; give all 40 hex digits)\n")
    result = run("estimate", REPO, "--revision", "nothex")
    assert (result.exit_code, result.stderr) == (1, f"error: --revision 'nothex': no such revision of {REPO} on the Hub\n")
    result = run("estimate", REPO, "--revision", tiny[0][:7], hub=DOWN)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: --revision '{tiny[0][:7]}': could not ask the Hub (")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_port_out_of_range_is_bad_usage(run, command):
    result = run(command, "--port", "99999")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--port': 99999 is not in the range 1<=x<=65535.")


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_busy_port_is_one_line_and_exit_1_before_anything_starts(run, hub_standin, command, tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        before = len(hub_standin.requests)
        result = run(command, "--port", str(port))
    assert result.exit_code == 1
    assert result.stderr == (f"error: cannot listen on 127.0.0.1:{port}: the port is already in use (another "
                             "tracker run or serve?); free it or pick another with --port\n")
    assert len(hub_standin.requests) == before  # nothing polled
    assert not (tmp_path / "t.sqlite3").exists()  # nothing opened


def test_subscribe_to_what_nothing_watched_matches_warns_and_keeps_it(run, tiny):
    result = run("subscribe", "acme/unwatched", "--webhook", HOOK)
    assert result.exit_code == 0
    assert result.stderr == ("warning: acme/unwatched is not watched, so no alert comes until you "
                             "`tracker watch add acme/unwatched`\n")
    result = run("subscribe", "nobody", "--webhook", HOOK)
    assert result.stderr == ("warning: no repo of nobody is watched, so no alert comes until you "
                             "`tracker watch add nobody/NAME`\n")
    assert run("watch", "add", REPO).exit_code == 0
    for target in (REPO, "acme", "*"):
        result = run("subscribe", target, "--webhook", HOOK)
        assert (result.exit_code, result.stderr) == (0, ""), target
    assert len(json.loads(run("subscriptions", "--json").output)) == 5
