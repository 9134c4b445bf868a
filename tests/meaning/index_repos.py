"""Two-revision all-MiniLM-L6-v2 repos, one change each, for the index verdict (``embeddings.incompatible``).

Each scenario is ``(before, after)`` file maps built from the real files; the stand-in tests push them
to the Hub stand-in, the library tests load them with the real sentence-transformers.
"""

from __future__ import annotations

import json

from .st_repos import edit_json, minilm_files

BASE = minilm_files()
MODULES = json.loads(BASE["modules.json"])
TOKENIZER = json.loads(BASE["tokenizer.json"])
E5_PROMPTS = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": None,
              "similarity_fn_name": "cosine"}
COMPACT_TYPES = {  # modules.json as sentence-transformers 6.x writes it
    "sentence_transformers.models.Transformer": "sentence_transformers.base.modules.transformer.Transformer",
    "sentence_transformers.models.Pooling": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
    "sentence_transformers.models.Normalize": "sentence_transformers.base.modules.normalize.Normalize",
}


def tokenizer_json(files: dict[str, bytes], **parts: object) -> dict[str, bytes]:
    """``files`` with top-level parts of tokenizer.json replaced."""
    doc = json.loads(files["tokenizer.json"])
    doc.update(parts)
    return {**files, "tokenizer.json": json.dumps(doc, ensure_ascii=False).encode()}


def uncased_json(files: dict[str, bytes]) -> dict[str, bytes]:
    return tokenizer_json(files, normalizer={**TOKENIZER["normalizer"], "lowercase": False})


def post_processor(*last: str) -> dict[str, object]:
    """[CLS] $A [SEP] and ``last`` appended, as tokenizer.json's TemplateProcessing."""
    ids = {"[CLS]": 101, "[SEP]": 102, "[MASK]": 103, "[PAD]": 0}
    tail = ["[SEP]", *last]
    single = [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
              *({"SpecialToken": {"id": t, "type_id": 0}} for t in tail)]
    pair = [*single, {"Sequence": {"id": "B", "type_id": 1}}, *({"SpecialToken": {"id": t, "type_id": 1}} for t in tail)]
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in ("[CLS]", *tail)}}


def compact_pooling(mode: str = "mean") -> bytes:
    return json.dumps({"embedding_dimension": 384, "pooling_mode": mode, "include_prompt": True}, indent=2).encode()


def _generic(files: dict[str, bytes]) -> dict[str, bytes]:
    """A tokenizer class transformers builds from tokenizer.json whole (its post-processor obeyed), last-token pooled."""
    files = edit_json(files, "tokenizer_config.json", tokenizer_class="PreTrainedTokenizerFast")
    files = edit_json(files, "1_Pooling/config.json", pooling_mode_mean_tokens=False, pooling_mode_lasttoken=True)
    return tokenizer_json(files, post_processor=post_processor())


def _cased(files: dict[str, bytes]) -> dict[str, bytes]:
    return uncased_json(edit_json(files, "tokenizer_config.json", do_lower_case=False))


def _repointed(tokenizer_config: bytes = BASE["tokenizer_config.json"]) -> dict[str, bytes]:
    """The Transformer module re-pointed to ``other/``, a copy of the model with its own tokenizer_config.json."""
    moved = {f"other/{name}": BASE[name] for name in ("config.json", "tokenizer.json", "tokenizer_config.json",
                                                      "special_tokens_map.json", "vocab.txt", "model.safetensors",
                                                      "sentence_bert_config.json")}
    modules = [{**MODULES[0], "path": "other"}, *MODULES[1:]]
    return {**BASE, **moved, "other/tokenizer_config.json": tokenizer_config, "modules.json": json.dumps(modules, indent=2).encode()}


E5 = {**BASE, "config_sentence_transformers.json": json.dumps(E5_PROMPTS).encode()}
GENERIC = _generic(BASE)
GENERIC_EOS = edit_json(GENERIC, "tokenizer_config.json", add_eos_token=True, eos_token="[MASK]")
CASED = _cased(BASE)
MIGRATED = {**BASE, "1_Pooling/config.json": compact_pooling(), "modules.json": json.dumps(
    [{**m, "type": COMPACT_TYPES[m["type"]]} for m in MODULES], indent=2).encode()}


def _prompts(**changes: object) -> dict[str, bytes]:
    return {**E5, "config_sentence_transformers.json": json.dumps({**E5_PROMPTS, **changes}).encode()}


SCENARIOS: dict[str, tuple[dict[str, bytes], dict[str, bytes]]] = {
    "casing_both": (BASE, _cased(BASE)),
    "casing_config_only": (BASE, edit_json(BASE, "tokenizer_config.json", do_lower_case=False)),
    "casing_json_only": (BASE, uncased_json(BASE)),
    "st_lower_already_lowercased": (BASE, edit_json(BASE, "sentence_bert_config.json", do_lower_case=True)),
    "st_lower_on_cased": (CASED, edit_json(CASED, "sentence_bert_config.json", do_lower_case=True)),
    "eos_appended": (GENERIC, tokenizer_json(GENERIC, post_processor=post_processor("[MASK]"))),
    "add_eos_in_config": (GENERIC, GENERIC_EOS),
    "post_processor_despite_add_eos": (GENERIC_EOS, tokenizer_json(GENERIC_EOS, post_processor=post_processor("[PAD]"))),
    "bert_post_processor_ignored": (BASE, tokenizer_json(BASE, post_processor=post_processor("[MASK]"))),
    "query_prompt": (E5, _prompts(prompts={"query": "search query: ", "passage": "passage: "})),
    "passage_prompt": (E5, _prompts(prompts={"query": "query: ", "passage": "search passage: "})),
    "passage_prompt_spacing": (E5, _prompts(prompts={"query": "query: ", "passage": "passage:"})),
    "default_prompt": (E5, _prompts(default_prompt_name="query")),
    "schema_migrated": (BASE, MIGRATED),
    "schema_migrated_back": (MIGRATED, BASE),
    "schema_migrated_cls": (BASE, {**MIGRATED, "1_Pooling/config.json": compact_pooling("cls")}),
    "max_seq_32": (BASE, edit_json(BASE, "sentence_bert_config.json", max_seq_length=32)),
    "max_seq_128": (BASE, edit_json(BASE, "sentence_bert_config.json", max_seq_length=128)),
    "transformer_moved": (BASE, _repointed()),
    "transformer_repointed": (BASE, _repointed(edit_json(BASE, "tokenizer_config.json", do_lower_case=False)[
        "tokenizer_config.json"])),
    "module_path_absolute": (BASE, {**BASE, "modules.json": json.dumps(
        [*MODULES[:1], {**MODULES[1], "path": "/etc/evil"}]).encode()}),
}
