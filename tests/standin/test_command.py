"""`python -m hubstandin`: the README's seed, and `commit` to a running stand-in from another process."""

from __future__ import annotations

import socket

import httpx2
import pytest
from hubstandin.__main__ import README_REPOS, main, seed_readme
from huggingface_hub import HfApi


def test_the_readme_seed_holds_the_readmes_repos_with_their_histories(hub_standin):
    seed_readme(hub_standin)
    seed_readme(hub_standin)  # idempotent
    api = HfApi(endpoint=hub_standin.url)
    titles = {repo: [c.title for c in reversed(api.list_repo_commits(repo))] for repo in README_REPOS}
    assert titles == {
        "intfloat/multilingual-e5-large": ["initial commit", "Update README.md", "eos_token_id 250001",
                                           "Longer context: 8194 positions"],
        "Qwen/Qwen2.5-7B-Instruct": ["initial commit", "Update generation_config.json"],
        "meta-llama/Llama-3.1-8B-Instruct": ["initial commit", "Update config.json"],
        "acme/llama-ft-gguf": ["initial commit"],
    }
    listed = [m.id for m in api.list_models(filter="sentence-transformers")]
    assert listed == ["intfloat/multilingual-e5-large"]


def test_commit_to_a_running_stand_in(hub_standin, tmp_path, capsys):
    hub_standin.create_repo("acme/model")
    (tmp_path / "config.json").write_text('{"hidden_size": 32}\n')
    code = main(["commit", "acme/model", f"config.json={tmp_path / 'config.json'}", "-m", "Bump",
                 "--endpoint", hub_standin.url])
    head = hub_standin.head("acme/model")
    assert (code, capsys.readouterr()) == (0, (f"committed {head[:12]} to acme/model (main): Bump\n", ""))
    assert httpx2.get(f"{hub_standin.url}/acme/model/resolve/main/config.json").content == b'{"hidden_size": 32}\n'

    assert main(["commit", "acme/other", f"x={tmp_path / 'config.json'}", "--endpoint", hub_standin.url]) == 1
    assert capsys.readouterr().err == "error: acme/other: no repo acme/other here (--create makes it)\n"
    assert main(["commit", "acme/other", f"x={tmp_path / 'nope'}", "--endpoint", hub_standin.url]) == 1
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope'}: No such file or directory\n"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert main(["commit", "acme/model", f"x={tmp_path / 'config.json'}", "--endpoint", closed]) == 1
    assert capsys.readouterr().err == (f"error: cannot reach the stand-in at {closed} ([Errno 111] Connection "
                                       "refused): is it running? (--endpoint)\n")
    with pytest.raises(SystemExit):
        main(["commit", "acme/model", "config.json"])
    assert "'config.json': give PATH=FILE, e.g. config.json=./config.json" in capsys.readouterr().err
