"""The reference page for intfloat/multilingual-e5-large, reproduced exactly.

Numbers from ../shared/seed/000_c006f5c1dcac5663.txt."""

from __future__ import annotations

import json

import pytest

from tests.shared import SEED_PAGE
from tracker.core.estimate import estimate, render_card

# Card table of the page: (card, full batch, full borderline, LoRA batch, serve batch)
PAGE_TABLE = [
    ("T4", 7, True, 29, 253),
    ("L4", 23, False, 45, 390),
    ("A100-40", 55, False, 77, 666),
    ("A100-80", 136, False, 158, 1354),
    ("H100", 136, False, 158, 1354),  # the page's "A100 / H100 80 GB" row
    ("H200", 259, False, 281, 2404),
]


def test_params(e5_config):
    est = estimate(e5_config)
    assert est.supported
    assert est.params == 559_890_432
    assert est.active_params == 559_890_432
    assert est.seq_len == 514  # 2048, or the model's context when shorter


def test_memory_at_batch_1(e5_config):
    est = estimate(e5_config)
    assert f"{est.full_finetune_gb:.1f}" == "11.2"
    assert f"{est.lora_gb:.2f}" == "1.69"
    # exact bytes, so a change to the formula shows here first
    assert est.full_finetune_bytes == pytest.approx(19.2 * 559_890_432 + 514 * (24 * 34 * 1024 + 3 * 1024))
    assert est.lora_params == 7_077_888


@pytest.mark.parametrize("card,full,full_borderline,lora,serve", PAGE_TABLE)
def test_card_table(e5_config, card, full, full_borderline, lora, serve):
    fit = estimate(e5_config).card(card)
    assert (fit.full_batch, fit.full_borderline, fit.lora_batch, fit.lora_borderline, fit.serve_batch) == (
        full, full_borderline, lora, False, serve,
    )


def test_structure_is_the_pages_100_rows(e5_config):
    rows = estimate(e5_config).structure
    assert len(rows) == 100
    assert [(r.index, r.name, r.type, r.shape) for r in rows[:8]] == [
        (1, "Input", "Input", "1 × 514"),
        (2, "Embedding", "Embedding", "1 × 514 × 1024"),
        (3, "Positional_Embedding", "Learned Pos Embed", "1 × 514 × 1024"),
        (4, "Attention_1", "Multi-Head Attention", "1 × 514 × 1024"),
        (5, "Add_1", "Add", "1 × 514 × 1024"),
        (6, "LayerNorm_1_1", "LayerNorm", "1 × 514 × 1024"),
        (7, "FFN_1", "Feed Forward", "1 × 514 × 1024"),
        (8, "Attention_2", "Multi-Head Attention", "1 × 514 × 1024"),
    ]
    assert (rows[95].index, rows[95].name) == (96, "Attention_24")
    assert (rows[98].name, rows[98].type) == ("FFN_24", "Feed Forward")
    assert (rows[99].index, rows[99].name, rows[99].type, rows[99].shape) == (100, "Output", "Output", "1 × 514 × 1024")
    for i in range(1, 25):
        base = 4 * i
        assert [r.name for r in rows[base - 1 : base + 3]] == [f"Attention_{i}", f"Add_{i}", f"LayerNorm_{i}_1", f"FFN_{i}"]


def test_page_structure_rows_verbatim(e5_config):
    """Every row of the page's table, parsed from the page text itself when present."""

    page = SEED_PAGE
    if not page.exists():
        pytest.skip("seed page not present")
    expected = []
    for line in page.read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            expected.append((int(cells[0]), cells[1], cells[2], cells[3]))
    assert len(expected) == 100
    assert [(r.index, r.name, r.type, r.shape) for r in estimate(e5_config).structure] == expected


def test_verifier_says_what_the_page_says(e5_config):
    assert [v.rule for v in estimate(e5_config).verifier] == ["deep-attention-default-init"]


def test_json_shape(e5_config):
    data = json.loads(json.dumps(estimate(e5_config).to_json()))
    for key in ("model_type", "params", "checkpoint_params", "seq_len", "full_finetune_gb", "lora_gb", "cards", "structure", "verifier"):
        assert key in data
    assert data["model_type"] == "xlm-roberta"
    assert data["checkpoint_params"] is None
    assert round(data["full_finetune_gb"], 1) == 11.2 and round(data["lora_gb"], 2) == 1.69
    assert [c["card"] for c in data["cards"]] == ["T4", "L4", "A10G", "A100-40", "L40S", "A100-80", "H100", "H200"]
    t4 = data["cards"][0]
    assert set(t4) >= {"card", "gb", "full_batch", "full_borderline", "lora_batch", "lora_borderline", "serve_batch", "cost_usd"}
    assert (t4["gb"], t4["full_batch"], t4["full_borderline"], t4["lora_batch"], t4["serve_batch"]) == (16, 7, True, 29, 253)
    assert data["structure"][1] == {"index": 2, "name": "Embedding", "type": "Embedding", "shape": "1 × 514 × 1024"}
    assert data["verifier"][0]["rule"] == "deep-attention-default-init"


def test_render_card_reads_like_the_page(e5_config):
    text = render_card(estimate(e5_config))
    assert "11.2 GB" in text and "1.69 GB" in text
    assert "batch 7, borderline" in text and "batch 2404" in text
    assert "559,890,432" in text
