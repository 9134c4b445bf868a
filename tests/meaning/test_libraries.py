"""Which libraries a revision is loaded with: recorded on the revision, findings grouped by them.

The seed model, intfloat/multilingual-e5-large, is loaded through sentence-transformers: its repo
holds the real e5 config.json, a card tagged sentence-transformers, modules.json (Transformer →
Pooling → Normalize) and 1_Pooling/config.json (mean pooling over 1024 dimensions).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hubstandin import HubStandin

from tests.findings.sources import analyse_revision, make_change
from tracker.core.diff import readme_front_matter
from tracker.core.findings.libraries import detect_libraries
from tracker.core.model import FileEntry, Snapshot
from tracker.surfaces.cli import main

from .st_repos import FIXTURE, safetensors_bytes

REPO = "intfloat/multilingual-e5-large"
E5_CONFIG = (Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "intfloat__multilingual-e5-large.json")
CARD = b"---\nlicense: mit\nlibrary_name: sentence-transformers\ntags:\n- sentence-transformers\n---\n# e5\n"
POOLING = {"word_embedding_dimension": 1024, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
           "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}


def e5_files(**pooling) -> dict[str, bytes]:
    return {"config.json": E5_CONFIG.read_bytes(), "README.md": CARD,
            "modules.json": (FIXTURE / "modules.json").read_bytes(),
            "1_Pooling/config.json": json.dumps({**POOLING, **pooling}, indent=2).encode(),
            "sentence_bert_config.json": b'{"max_seq_length": 512, "do_lower_case": false}',
            "model.safetensors": safetensors_bytes({"embeddings.word_embeddings.weight": [4, 4]})}


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """The seed model watched, polled, then a pooling change (mean → cls) pushed and polled."""
    root = tmp_path_factory.mktemp("libraries")
    hub = HubStandin(root / "hub").start()
    (root / "tracker.toml").write_text('[poll]\nevery = "2h"\n')
    env = {"HF_ENDPOINT": hub.url, "TRACKER_DATABASE_URL": f"sqlite:///{root}/t.sqlite3",
           "TRACKER_CONFIG": str(root / "tracker.toml")}
    runner = CliRunner()

    def cli(*args):
        result = runner.invoke(main, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    old_cwd = os.getcwd()
    os.chdir(root)
    try:
        hub.create_repo(REPO)
        old = hub.commit(REPO, e5_files(), message="initial commit")
        cli("watch", "add", REPO)
        cli("poll")
        new = hub.commit(REPO, e5_files(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True),
                         message="Use the CLS token")
        cli("poll")
        yield cli, old, new, env
    finally:
        os.chdir(old_cwd)
        hub.stop(wait=False)


def test_tracker_diff_says_first_that_stored_embeddings_are_no_longer_comparable(watched):
    cli, old, new, _ = watched
    lines = cli("diff", REPO, old, new).splitlines()
    assert lines[0] == ("critical: stored embeddings are no longer comparable with new ones: pooling mean → cls; "
                        "re-embed the index  (embeddings.incompatible)")
    assert lines[1:] == [
        "  cause: pooling mean → cls",
        f"{REPO}: {old[:12]} → {new[:12]}",  # one arrow everywhere
        "libraries: sentence-transformers, transformers",
        "sentence-transformers:",
        "  embeddings:",
        "    [critical] stored embeddings are no longer comparable with new ones: pooling mean → cls; "
        "re-embed the index  (embeddings.incompatible)",
        "  sentence_transformers:",
        "    [high    ] 1_Pooling/config.json: pooling mean → cls  (sentence_transformers.pooling_changed)",
        "any library:",
        "  files:",
        "    [info    ] changed 1_Pooling/config.json (191 bytes → 191 bytes)  (files.changed)",
        "changed  1_Pooling/config.json",
    ]


def test_diff_json_and_the_revision_record_the_libraries(watched):
    cli, old, new, _ = watched
    result = json.loads(cli("diff", REPO, old, new, "--json"))
    assert result["libraries"] == {"old": ["sentence-transformers", "transformers"],
                                   "new": ["sentence-transformers", "transformers"]}
    assert [f["code"] for f in result["findings"]] == [
        "embeddings.incompatible", "sentence_transformers.pooling_changed", "files.changed"]
    assert {name: [f["code"] for f in items] for name, items in result["by_library"].items()} == {
        "sentence-transformers": ["embeddings.incompatible", "sentence_transformers.pooling_changed"],
        "any": ["files.changed"]}
    assert list(result["by_library"]) == ["sentence-transformers", "any"]
    revisions = json.loads(cli("revisions", REPO, "--json"))
    assert [(r["sha"], r["libraries"]) for r in revisions] == [
        (old, ["sentence-transformers", "transformers"]), (new, ["sentence-transformers", "transformers"])]
    assert revisions[1]["top_findings"][0]["code"] == "embeddings.incompatible"


def snapshot(*paths: str) -> Snapshot:
    return Snapshot(files=tuple(FileEntry(path=p, size=10, blob_id=f"{i:040x}") for i, p in enumerate(paths)))


@pytest.mark.parametrize(("paths", "files", "expected"), [
    (("model_index.json", "unet/config.json", "vae/diffusion_pytorch_model.safetensors"), {}, ("diffusers",)),
    (("config.json", "model.safetensors"), {"config.json": b'{"architecture": "vit_base_patch16_224", '
                                            b'"num_classes": 1000, "pretrained_cfg": {"mean": [0.5]}}'}, ("timm",)),
    (("open_clip_config.json", "open_clip_pytorch_model.bin"), {}, ("open_clip",)),
    (("adapter_config.json", "adapter_model.safetensors"), {}, ("peft",)),
    (("llama-3-8b.Q4_K_M.gguf",), {}, ("gguf",)),
    (("config.json", "onnx/model.onnx", "openvino/openvino_model.xml"), {"config.json": b'{"model_type": "bert"}'},
     ("transformers", "onnx", "openvino")),
    (("README.md", "weights.bin"), {"README.md": b"---\nlibrary_name: timm\ntags: [open_clip, unknown]\n---\n"},
     ("timm", "open_clip")),
    (("README.md",), {"README.md": b"---\n: [broken\n---\n"}, ()),
    (("config.json",), {"config.json": b"[not json"}, ()),
])
def test_libraries_come_from_the_card_and_the_file_layout(paths, files, expected):
    assert detect_libraries(snapshot(*paths), files.get, readme_front_matter) == expected


def test_a_library_analysers_findings_carry_the_library():
    change, sources = make_change({"modules.json": b"[]"}, {"modules.json": b"[{not json"})
    assert [(f.code, f.library) for f in analyse_revision(change, sources)
            if f.category == "sentence_transformers"] == [("sentence_transformers.malformed", "sentence-transformers")]


def test_the_revision_page_names_the_libraries_and_shows_the_module_pipeline_before_and_after(watched):
    from fastapi.testclient import TestClient

    from tracker.adapters.settings import load_settings
    from tracker.app import make_tracker
    from tracker.surfaces.api import create_app

    _, old, new, env = watched
    tracker = make_tracker(load_settings(env["TRACKER_CONFIG"], env=env))
    page = TestClient(create_app(tracker)).get(f"/repos/{REPO}/revisions/{new}")
    assert page.status_code == 200
    html = page.text
    assert ('<p class="meta libraries">Loaded with <span class="library">sentence-transformers</span>, '
            '<span class="library">transformers</span></p>') in html
    modules = ("<code>sentence_transformers.models.Transformer</code> → <code>sentence_transformers.models.Pooling</code>"
               " → <code>sentence_transformers.models.Normalize</code>")
    assert f'<tr><td>Before</td><td class="removed">{modules}</td></tr>' in html
    assert f'<tr><td>After</td><td class="added">{modules}</td></tr>' in html
    assert "stored embeddings are no longer comparable with new ones: pooling mean → cls; re-embed the index" in html
    by_library = html[html.index("<h2>By library</h2>"):]
    assert by_library.index("<dt>sentence-transformers") < by_library.index("<dt>any library")
