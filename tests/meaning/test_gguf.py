"""GGUF headers read by range requests: embedded template, tokenizer, quantization; never tensor data."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGMLQuantizationType, LlamaFileType

from tests.findings.sources import make_change
from tests.findings.sources import rendered as with_renderer
from tracker.core.estimate import estimate
from tracker.core.estimate.architectures import config_from_gguf
from tracker.core.findings import gguf, gguf_types
from tracker.core.findings.gguf import GGUFError, gguf_params, read_gguf_header
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

from .gguf_files import LLAMA3_TEMPLATE, LLAMA3_TEMPLATE_BEFORE_FIX, TOKENS, llama_tensors, write_gguf
from .hub import analyse_on_hub

RULES = SeverityRules.default()


def header_of(path: Path) -> dict:
    data = path.read_bytes()
    return read_gguf_header(lambda offset, n: data[offset : offset + n], len(data))


def codes(findings) -> list[tuple[str, str]]:
    return sorted((f.code, f.severity.value) for f in findings)


@pytest.mark.slow  # the stand-in hashes two sparse ~3.3 GB files (~1.7 s each)
def test_embedded_template_fix_in_a_multi_gb_gguf_is_a_rendered_prompt_finding_and_a_resave(
    hub_standin, tmp_path
):
    big = {"hidden": 4096, "layers": 24, "ffn": 14336}
    before = write_gguf(tmp_path / "before.gguf", template=LLAMA3_TEMPLATE_BEFORE_FIX, **big)
    after = write_gguf(tmp_path / "after.gguf", template=LLAMA3_TEMPLATE, **big)
    assert after.stat().st_size > 3_000_000_000
    hub_standin.create_repo("acme/llama-gguf")
    old = hub_standin.commit("acme/llama-gguf", {"model-Q4_K_M.gguf": before}, message="upload")
    new = hub_standin.commit("acme/llama-gguf", {"model-Q4_K_M.gguf": after}, message="fix the chat template")
    hub_standin.clear_log()

    findings = analyse_on_hub(hub_standin, tmp_path, "acme/llama-gguf", old, new)

    # Under 1 MB for the headers, and the weight comparison within its budget (16 MiB per side): the
    # tensors sampled are identical, so the re-upload is a re-save, not a weights change.
    assert hub_standin.bytes_served() < 1_000_000 + 2 * 16 * 1024 * 1024
    assert all(r.range for r in hub_standin.requests if r.path.startswith("/cdn-lfs/"))
    assert codes(findings) == [
        ("chat_template.rendered_prompt_changed", "high"),
        ("files.changed", "info"),
        ("weights.resaved", "low"),
    ]
    (rendered,) = [f for f in findings if f.code == "chat_template.rendered_prompt_changed"]
    assert rendered.path == "model-Q4_K_M.gguf"
    assert rendered.summary == (
        "rendered prompt changed for 4 of 8 conversations (exactly those with the generation prompt); "
        "one user turn, with generation prompt: adds '<|start_header_id|>assistant<|end_header_id|>\\n\\n' at the end"
    )


def test_requantization_names_the_type_change(tmp_path):
    old = {"model.gguf": b"old"}
    new = {"model.gguf": b"new"}
    change, sources = make_change(old, new)
    q4km = header_of(write_gguf(tmp_path / "a.gguf"))
    all_q40 = {name: GGMLQuantizationType.Q4_0 for name in llama_tensors(256, 2, len(TOKENS), 512)}
    q40 = header_of(write_gguf(tmp_path / "b.gguf", file_type=LlamaFileType.MOSTLY_Q4_0, quant=all_q40))
    sources.ggufs = {"old": {"model.gguf": q4km}, "new": {"model.gguf": q40}}

    findings = with_renderer(gguf.analyse, change, sources, RULES)

    assert [(f.code, f.severity, f.summary) for f in findings] == [
        ("weights.quantization_changed", Severity.HIGH,
         "model.gguf: re-quantized Q4_K_M → Q4_0; 16 of 21 tensors changed type (Q4_K → Q4_0 ×15, Q6_K → Q4_0 ×1)"),
    ]
    assert findings[0].before == "Q4_K_M" and findings[0].after == "Q4_0"
    assert findings[0].evidence["type_changes"] == {"Q4_K → Q4_0": 15, "Q6_K → Q4_0": 1}


def test_embedded_special_tokens_and_vocabulary_get_the_tokenizer_codes(tmp_path):
    change, sources = make_change({"m.gguf": b"1"}, {"m.gguf": b"2"})
    renamed = [*TOKENS[:-1], "ba"]  # the last token replaced
    sources.ggufs = {
        "old": {"m.gguf": header_of(write_gguf(tmp_path / "a.gguf", template=None))},
        "new": {"m.gguf": header_of(write_gguf(tmp_path / "b.gguf", template=None, tokens=renamed, eos=2))},
    }
    findings = with_renderer(gguf.analyse, change, sources, RULES)
    assert [(f.code, f.summary) for f in findings] == [
        ("tokenizer.tokens_removed", '1 token removed from the vocabulary (e.g. "ab" (8))'),
        ("tokenizer.tokens_added", '1 token added to the vocabulary (e.g. "ba" (8))'),
        ("tokenizer.eos_token_changed", "m.gguf: eos_token '<|eot_id|>' (3) → '<|end_of_text|>' (2)"),
    ]
    assert {f.path for f in findings} == {"m.gguf"}


def test_a_template_change_in_a_renamed_quantization_is_compared(tmp_path):
    change, sources = make_change({"m-Q4_K_M.gguf": b"1"}, {"m-Q4_0.gguf": b"2"})
    all_q40 = {name: GGMLQuantizationType.Q4_0 for name in llama_tensors(256, 2, len(TOKENS), 512)}
    sources.ggufs = {
        "old": {"m-Q4_K_M.gguf": header_of(write_gguf(tmp_path / "a.gguf", template=LLAMA3_TEMPLATE_BEFORE_FIX))},
        "new": {"m-Q4_0.gguf": header_of(write_gguf(tmp_path / "b.gguf", file_type=LlamaFileType.MOSTLY_Q4_0,
                                                    quant=all_q40))},
    }
    findings = with_renderer(gguf.analyse, change, sources, RULES)
    assert codes(findings) == [("chat_template.rendered_prompt_changed", "high"),
                               ("weights.quantization_changed", "high")]
    assert [f.summary for f in findings if f.code == "weights.quantization_changed"] == [
        "m-Q4_K_M.gguf → m-Q4_0.gguf: re-quantized Q4_K_M → Q4_0; 16 of 21 tensors changed type "
        "(Q4_K → Q4_0 ×15, Q6_K → Q4_0 ×1)"
    ]


def test_context_length_and_architecture_changes(tmp_path):
    change, sources = make_change({"m.gguf": b"1"}, {"m.gguf": b"2"})
    sources.ggufs = {
        "old": {"m.gguf": header_of(write_gguf(tmp_path / "a.gguf", template=None))},
        "new": {"m.gguf": header_of(write_gguf(tmp_path / "b.gguf", template=None, context=131072))},
    }
    assert [(f.code, f.severity, f.summary) for f in with_renderer(gguf.analyse, change, sources, RULES)] == [
        ("gguf.context_length_changed", Severity.MODERATE, "m.gguf: context length 8192 → 131072"),
    ]


def test_the_estimator_reads_parameter_counts_from_gguf_headers(tmp_path):
    header = header_of(write_gguf(tmp_path / "m.gguf", template=None))
    config = config_from_gguf(header)
    assert config == {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
        "num_hidden_layers": 2, "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 4,
        "vocab_size": 9, "max_position_embeddings": 8192, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
    }
    est = estimate(config, checkpoint_params=gguf_params(header))
    # 9·256 embed + 2·(4·256² + 3·256·512 + 2·256) + 256 + 9·256 head = 1,316,608
    assert (est.params, est.checkpoint_params, est.checkpoint_note) == (1_316_608, 1_316_608, None)


@pytest.mark.parametrize(
    "mangle,error",
    [
        (lambda d: b"GGUX" + d[4:], "not a GGUF file (magic b'GGUX')"),
        (lambda d: d[:4] + (1).to_bytes(4, "little") + d[8:], "GGUF version 1 is not supported (2 and 3 are)"),
        (lambda d: d[:8] + (10**7).to_bytes(8, "little") + d[16:], "10,000,000 tensors and 16 metadata keys is over the limits"),
        (lambda d: d[:24] + (2**40).to_bytes(8, "little") + d[32:], "string of 1,099,511,627,776 bytes at offset 32 runs past the end of the file ({size:,} bytes)"),
        (lambda d: d[:600], "tokenizer.ggml.tokens: array of 9 items runs past the end of the file (600 bytes)"),
        (lambda d: d[:300], "header runs past the end of the file (300 bytes)"),
    ],
    ids=["magic", "version", "tensor-count", "string-length", "truncated-array", "truncated"],
)
def test_hostile_or_broken_headers_are_one_line_errors(tmp_path, mangle, error):
    data = mangle(write_gguf(tmp_path / "m.gguf", template=None).read_bytes())
    with pytest.raises(GGUFError) as exc:
        read_gguf_header(lambda offset, n: data[offset : offset + n], len(data))
    assert str(exc.value) == error.format(size=len(data))


def test_the_read_stops_at_the_cap(tmp_path):
    data = write_gguf(tmp_path / "m.gguf", tokens=[f"t{i}" for i in range(20_000)], template=None).read_bytes()
    asked: list[tuple[int, int]] = []

    def read(offset: int, n: int) -> bytes:
        asked.append((offset, n))
        return data[offset : offset + n]

    with pytest.raises(GGUFError, match="^header is larger than the 200,000-byte cap$"):
        read_gguf_header(read, len(data), max_bytes=200_000, first_chunk=65_536)
    assert sum(n for _o, n in asked) <= 200_000


def test_a_polled_gguf_only_repo_gets_an_estimate_from_its_header(hub_standin, tmp_path):
    from tracker.adapters.hub import HubClient
    from tracker.adapters.settings import Settings
    from tracker.app import make_tracker

    hub_standin.create_repo("acme/gguf-only")
    hub_standin.commit("acme/gguf-only", {"model-Q4_K_M.gguf": write_gguf(tmp_path / "a.gguf", template=None)})
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url})
    tracker = make_tracker(settings, hub=HubClient.from_settings(settings, token=False, sleep=lambda _s: None))
    tracker.store.repos.add("acme/gguf-only", now=tracker.clock())
    tracker.poll()
    (row,) = tracker.store.revisions.of_repo(tracker.store.repos.get("acme/gguf-only").pk)
    assert row.estimate is not None
    assert (row.estimate.params, row.estimate.checkpoint_params) == (1_316_608, 1_316_608)


@pytest.mark.parametrize("ours", [gguf_types.GGUFValueType, gguf_types.GGMLQuantizationType, gguf_types.LlamaFileType])
def test_the_owned_gguf_vocabulary_is_the_gguf_packages(ours) -> None:
    """Every name and number the gguf package knows, the tracker knows the same (and nothing else)."""
    import gguf as package

    theirs = getattr(package, ours.__name__)
    assert {m.name: m.value for m in ours} == {m.name: int(m.value) for m in theirs}


def test_the_owned_block_sizes_are_the_gguf_packages() -> None:
    """Elements and bytes per block of every quantization type: where a weight comparison finds tensor data."""
    from gguf import GGML_QUANT_SIZES

    assert gguf_types.BLOCK_SIZES == {t.name: tuple(size) for t, size in GGML_QUANT_SIZES.items()}
