"""What tracker verify refuses before anything runs: pickles, remote code, files over max_bytes; and
a model that breaches the memory cap ends its process with one clear line.

The refusals are decided from the Hub's listing and small JSON files, so most of these tests need no
torch; those that run the worker skip without the verify extra.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hubstandin.hub import HubStandin

from tests.verify import repos
from tracker.adapters.hub.verify_fetching import Fetcher, NotVerifiable, VerifyError
from tracker.adapters.verify.runner import Limits
from tracker.adapters.verify.verifying import VerifyOptions, verify_revisions

TINY_CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1,
               "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 30}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):
    with HubStandin(tmp_path_factory.mktemp("verify-safety-hub")) as hub:
        yield hub


@pytest.fixture
def fetcher(hub: HubStandin, tmp_path: Path) -> Fetcher:
    return Fetcher(endpoint=hub.url, cache_dir=tmp_path / "cache", max_bytes=1024 * 1024, max_params=10**9)


def safetensors_bytes(elements: int) -> bytes:
    """A valid safetensors file of ``elements`` parameters, under a name no model has (so they load as missing)."""
    import numpy as np
    from safetensors.numpy import save

    return save({"unused.weight": np.zeros((elements,), dtype=np.float32)})


def requested(hub: HubStandin, name: str) -> list[str]:
    return [r.url_path for r in hub.requests if r.path.endswith("/" + name)]


def test_a_revision_with_only_a_pickle_is_not_verifiable_and_the_pickle_is_never_fetched(hub, fetcher, tmp_path):
    marker = tmp_path / "unpickled"
    hub.create_repo("t/pickle-only")
    sha = hub.commit("t/pickle-only", {"config.json": repos.json_bytes(TINY_CONFIG),
                                       "pytorch_model.bin": repos.poisoned_pickle(marker)})
    hub.clear_log()
    with pytest.raises(NotVerifiable) as caught:
        fetcher.fetch("t/pickle-only", sha)
    assert caught.value.reason == ("the revision has weights only as pickles (pytorch_model.bin); "
                                   "the tracker loads safetensors only and never opens a pickle")
    assert requested(hub, "pytorch_model.bin") == []
    assert not marker.exists()


def test_a_pickle_beside_safetensors_is_left_on_the_hub(hub, fetcher, tmp_path):
    marker = tmp_path / "unpickled"
    hub.create_repo("t/both")
    sha = hub.commit("t/both", {"config.json": repos.json_bytes(TINY_CONFIG), "model.safetensors": safetensors_bytes(8),
                                "pytorch_model.bin": repos.poisoned_pickle(marker)})
    hub.clear_log()
    fetched = fetcher.fetch("t/both", sha)
    assert fetched.files == ("config.json", "model.safetensors")
    assert sorted(p.name for p in fetched.folder.iterdir()) == ["config.json", "model.safetensors"]
    assert requested(hub, "pytorch_model.bin") == []
    assert not marker.exists()


@pytest.mark.parametrize("where", ["config.json", "tokenizer_config.json"])
def test_auto_map_makes_a_revision_not_verifiable_and_its_code_is_never_fetched(hub, fetcher, where):
    repo_id = f"t/remote-code-{where.split('.')[0].replace('_', '-')}"
    config = dict(TINY_CONFIG)
    extra = {"auto_map": {"AutoModel": "modeling_evil.EvilModel", "AutoTokenizer": ["tok_evil.Tok", None]}}
    files = {"config.json": repos.json_bytes({**config, **extra} if where == "config.json" else config),
             "tokenizer_config.json": repos.json_bytes(extra if where != "config.json" else {}),
             "model.safetensors": safetensors_bytes(8),
             "modeling_evil.py": b"import os\nos.system('touch /tmp/evil')\n"}
    hub.create_repo(repo_id)
    sha = hub.commit(repo_id, files)
    hub.clear_log()
    with pytest.raises(NotVerifiable) as caught:
        fetcher.fetch(repo_id, sha)
    assert caught.value.reason == (f"{where} has auto_map: loading needs the repo's own code, "
                                   "and the tracker never runs remote code")
    assert requested(hub, "modeling_evil.py") == []
    assert requested(hub, "model.safetensors") == []


def test_a_custom_sentence_transformers_module_is_remote_code(hub, fetcher):
    modules = [{"idx": 0, "name": "0", "path": "", "type": "custom_st.MyModule"}]
    hub.create_repo("t/st-custom")
    sha = hub.commit("t/st-custom", {"modules.json": repos.json_bytes(modules), "config.json": repos.json_bytes(TINY_CONFIG),
                                     "model.safetensors": safetensors_bytes(8)})
    with pytest.raises(NotVerifiable, match=r"^modules.json names the module 'custom_st.MyModule': loading it needs"):
        fetcher.fetch("t/st-custom", sha)


def test_a_weight_file_over_max_bytes_is_refused_before_download(hub, fetcher):
    hub.create_repo("t/large")
    sha = hub.commit("t/large", {"config.json": repos.json_bytes(TINY_CONFIG),
                                 "model.safetensors": safetensors_bytes(300_000)})  # 1.2 MB, over 1 MiB
    hub.clear_log()
    with pytest.raises(NotVerifiable) as caught:
        fetcher.fetch("t/large", sha)
    assert caught.value.reason == "model.safetensors is 1.1 MiB, over [verify] max_bytes (1.0 MiB): not downloaded"
    assert requested(hub, "model.safetensors") == []
    assert requested(hub, "config.json") == []  # refused from the listing alone
    assert hub.bytes_served() < 64 * 1024


def test_a_model_over_max_params_is_not_run(hub, tmp_path):
    hub.create_repo("t/many-params")
    sha = hub.commit("t/many-params", {"config.json": repos.json_bytes(TINY_CONFIG),
                                       "model.safetensors": safetensors_bytes(1000)})
    fetcher = Fetcher(endpoint=hub.url, cache_dir=tmp_path, max_bytes=1024**2, max_params=999)
    with pytest.raises(NotVerifiable, match=r"^the model has 1,000 parameters, over the limit of 999 \(--max-params\)$"):
        fetcher.fetch("t/many-params", sha)


def test_the_hub_token_is_sent_to_the_hub_and_not_to_the_cdn(hub, tmp_path):
    hub.create_repo("t/token")
    sha = hub.commit("t/token", {"config.json": repos.json_bytes(TINY_CONFIG), "model.safetensors": safetensors_bytes(8)})
    hub.clear_log()
    Fetcher(endpoint=hub.url, cache_dir=tmp_path, max_bytes=1024**2, max_params=10**9,
            token="hf_secret_token").fetch("t/token", sha)
    log = hub.requests
    to_hub = [r for r in log if r.host in hub.url]
    to_cdn = [r for r in log if r.host not in hub.url]
    assert to_cdn, "the weights are served from the CDN origin"
    assert all(r.headers.get("authorization") == "Bearer hf_secret_token" for r in to_hub)
    assert all("authorization" not in r.headers for r in to_cdn)


def test_without_the_extra_the_command_says_how_to_install_it(hub, tmp_path, monkeypatch):
    import sys

    from tracker.surfaces.cli import main

    for name in ("torch", "transformers", "sentence_transformers"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed: find_spec answers None
    (tmp_path / "tracker.toml").write_text("")
    result = CliRunner().invoke(main, ["--config", str(tmp_path / "tracker.toml"), "verify", "a/b", "main", "dev"])
    assert result.exit_code == 1
    assert result.output == ("error: tracker verify needs the verify extra: pip install 'upstream-tracker[verify]' "
                             "(with a CPU build of torch installed first)\n")


# -- the worker itself (the verify extra) ----------------------------------------------------------


@pytest.fixture
def options(hub: HubStandin, tmp_path: Path) -> VerifyOptions:
    return VerifyOptions(endpoint=hub.url, cache_dir=tmp_path / "cache", max_bytes=1024**2, max_params=10**12,
                         samples=2, device="cpu", limits=Limits(int(1.5 * 1024**3), 120, 120))


def test_pickle_only_through_the_command_path_is_a_verdict_not_an_error(hub, options, tmp_path):
    pytest.importorskip("torch")
    marker = tmp_path / "unpickled"
    hub.create_repo("t/pickle-verdict")
    old = hub.commit("t/pickle-verdict", {"config.json": repos.json_bytes(TINY_CONFIG),
                                          "pytorch_model.bin": repos.poisoned_pickle(marker)})
    new = hub.commit("t/pickle-verdict", {"README.md": b"card"})
    result = verify_revisions("t/pickle-verdict", old, new, options)
    assert result.measurement.to_json() == {
        "kind": "unknown", "verdict": "not verifiable", "verifiable": False,
        "reason": "the revision has weights only as pickles (pytorch_model.bin); "
                  "the tracker loads safetensors only and never opens a pickle"}
    assert not marker.exists()


def test_a_model_over_the_memory_cap_ends_with_one_clear_line(hub, options):
    pytest.importorskip("torch")
    # 8M x 64 embeddings: 2 GiB of float32 to initialise, over a 1.5 GiB address space.
    config = {**TINY_CONFIG, "hidden_size": 64, "intermediate_size": 64, "vocab_size": 8_000_000}
    hub.create_repo("t/memory")
    files = {"config.json": repos.json_bytes(config), "model.safetensors": safetensors_bytes(8)}
    files.update({name: repos.minilm_dir() / name for name in repos.TOKENIZER_FILES})
    old = hub.commit("t/memory", files)
    new = hub.commit("t/memory", {"README.md": b"card"})
    with pytest.raises(VerifyError) as caught:
        verify_revisions("t/memory", old, new, options)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the model needs more memory than [verify] max_memory allows (1.5 GiB): ")


def test_cuda_on_a_machine_without_one_is_one_line(hub, options):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    from dataclasses import replace

    with pytest.raises(VerifyError) as caught:
        verify_revisions("t/any", "a", "b", replace(options, device="cuda"))
    assert str(caught.value) == "--device cuda: torch sees no CUDA device on this machine; use --device cpu"


def test_a_module_whose_weights_are_a_pickle_alone_is_not_verifiable(hub, fetcher, tmp_path):
    marker = tmp_path / "unpickled"
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    hub.create_repo("t/dense-pickle")
    sha = hub.commit("t/dense-pickle", {"modules.json": repos.json_bytes(modules),
                                        "config.json": repos.json_bytes(TINY_CONFIG),
                                        "model.safetensors": safetensors_bytes(8),
                                        "2_Dense/config.json": b"{}",
                                        "2_Dense/pytorch_model.bin": repos.poisoned_pickle(marker)})
    hub.clear_log()
    with pytest.raises(NotVerifiable) as caught:
        fetcher.fetch("t/dense-pickle", sha)
    assert caught.value.reason.startswith("the revision has weights only as pickles (2_Dense/pytorch_model.bin); ")
    assert requested(hub, "pytorch_model.bin") == []
    assert not marker.exists()


@pytest.mark.parametrize(("limits", "message"), [
    (Limits(16 * 1024**3, 600, 0.5),
     "the verification ran past its wall-clock limit of 0.5 s ([verify] timeout) and was stopped"),
    (Limits(16 * 1024**3, 1, 600),
     "the verification used more than 1 CPU seconds ([verify] max_cpu) and was stopped"),
])
def test_the_wall_clock_and_cpu_limits_stop_the_process_with_one_line(tmp_path, limits, message):
    pytest.importorskip("torch")
    import shutil

    from tracker.adapters.verify.runner import run_worker

    # Busy for several CPU-seconds whatever the machine: importing torch, then tokenizing 8 MB of text.
    for name in repos.TOKENIZER_FILES:
        shutil.copy(repos.minilm_dir() / name, tmp_path / name)
    request = {"kind": "tokenizer", "device": "cpu", "texts": ["many words " * 800_000],
               "old_folder": str(tmp_path), "new_folder": str(tmp_path)}
    with pytest.raises(VerifyError) as caught:
        run_worker(request, limits)
    assert str(caught.value) == message


def test_a_repo_the_hub_does_not_have_is_one_line(fetcher):
    with pytest.raises(VerifyError) as caught:
        fetcher.fetch("t/nope", "main")
    assert str(caught.value).startswith("cannot list t/nope@main on the Hub: ")
    assert "\n" not in str(caught.value)
