"""`tracker revisions` of a repo that is not watched: its newest commits, from the Hub; nothing stored."""

from __future__ import annotations

import json

from tests.core.conftest import config_json


def test_revisions_of_an_unwatched_repo_are_read_from_the_hub(cli, hub_standin):
    hub_standin.create_repo("acme/other")
    shas = [hub_standin.commit("acme/other", {"config.json": config_json(vocab_size=1000 + i)}, message=f"edit {i}")
            for i in range(4)]
    result = cli("revisions", "acme/other", "--limit", "3")
    assert result.exit_code == 0
    assert result.stderr == ("acme/other is not watched: its newest 3 commit(s) on main, from the Hub (nothing "
                             "analysed or stored; `tracker diff` compares two of them)\n")
    assert [line.split()[2:] for line in result.stdout.splitlines()] == [
        [shas[1][:12], "edit", "1"], [shas[2][:12], "edit", "2"], [shas[3][:12], "edit", "3"]]
    listed = json.loads(cli("revisions", "acme/other", "--json", "--limit", "2").stdout)
    assert [(r["sha"], r["title"], r["status"], r["parent"]) for r in listed] == [
        (shas[2], "edit 2", "not_read", None), (shas[3], "edit 3", "not_read", shas[2])]
    assert json.loads(cli("watch", "list", "--json").stdout) == []
    diff = json.loads(cli("diff", "acme/other", shas[0], shas[3], "--json").stdout)
    assert [c["path"] for c in diff["files"]["changed"]] == ["config.json"]
