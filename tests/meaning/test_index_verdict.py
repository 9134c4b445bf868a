"""The index verdict, exactly: each class of change as a two-revision all-MiniLM-L6-v2 repo on the Hub stand-in.

``embeddings.incompatible`` answers one question, "must stored vectors be recomputed?", and names each
cause with its evidence. The same scenarios are checked against the real library in
``test_index_verdict_library.py``.
"""

from __future__ import annotations

import pytest

from .hub import analyse_scenarios
from .index_repos import SCENARIOS

VERDICT = "stored embeddings are no longer comparable with new ones: "
BERT_REBUILDS = "transformers 5 rebuilds BertTokenizer's {part} from tokenizer_config.json ({v4}), so tokenizer_config.json decides"
CASING_DRIFT = ("tokenizer.drift", "high", 'tokenization changed for 27 of 42 sample texts (64%), '
                'e.g. "The quick brown fox jumps ove…": token 1 "the" (1996) → "[UNK]" (100)')
POST_PROCESSOR_CHANGE = ('post_processor changed: single: [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},… '
                         '(3 items) → [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},… (4 items) (and 2 more)')


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("index"), "sentence-transformers", SCENARIOS)


def triples(findings):
    return [(f.code, f.severity.value, f.summary) for f in findings if f.category != "files"]


EXPECTED = {
    "casing_both": [
        ("embeddings.incompatible", "critical", VERDICT + "27 of 42 sample texts tokenize differently: "
         "lowercasing turned off in tokenizer_config.json; re-embed the index"),
        ("tokenizer.behaviour_changed", "high", "do_lower_case: true → false"),
        CASING_DRIFT,
        ("tokenizer.ignored_by_loader", "low", "normalizer changed: lowercase: true → false, with no effect: "
         + BERT_REBUILDS.format(part="normalizer", v4="as did transformers 4")),
    ],
    "casing_config_only": [
        ("embeddings.incompatible", "critical", VERDICT + "27 of 42 sample texts tokenize differently: "
         "lowercasing turned off in tokenizer_config.json; re-embed the index"),
        ("tokenizer.behaviour_changed", "high", "do_lower_case: true → false"),
        CASING_DRIFT,
    ],
    "casing_json_only": [
        ("tokenizer.ignored_by_loader", "low", "normalizer changed: lowercase: true → false, with no effect: "
         + BERT_REBUILDS.format(part="normalizer", v4="as did transformers 4")),
    ],
    "st_lower_already_lowercased": [
        ("sentence_transformers.do_lower_case_no_effect", "info", "sentence_bert_config.json: do_lower_case: "
         "false → true, with no effect: the tokenizer already lowercases (tokenizer_config.json decides)"),
    ],
    "st_lower_on_cased": [
        ("embeddings.incompatible", "critical", VERDICT + "20 of 42 sample texts tokenize differently: "
         "lowercasing turned on in sentence_bert_config.json; re-embed the index"),
        ("sentence_transformers.do_lower_case_changed", "high", "sentence_bert_config.json: do_lower_case: false → true"),
    ],
    "eos_appended": [
        ("embeddings.incompatible", "critical", VERDICT + "42 of 42 sample texts tokenize differently: [MASK] now "
         "appended to every input by tokenizer.json's post-processor (the token this pooling reads); re-embed the index"),
        ("tokenizer.drift", "high", 'tokenization changed for 42 of 42 sample texts (100%), '
         'e.g. "The quick brown fox jumps ove…": token 12 (end) → "[MASK]" (103)'),
        ("tokenizer.post_processor_changed", "high", POST_PROCESSOR_CHANGE),
    ],
    "add_eos_in_config": [
        ("tokenizer.eos_token_changed", "high", "eos_token: (unset) → [MASK]"),
        ("tokenizer.ignored_by_loader", "low", "add_eos_token: (unset) → true, with no effect: transformers 5 drops "
         "add_bos_token / add_eos_token when a tokenizer.json is there (transformers 4's Llama and Gemma fast "
         "tokenizers obeyed them), so tokenizer.json's post-processor decides"),
    ],
    "post_processor_despite_add_eos": [
        ("embeddings.incompatible", "critical", VERDICT + "42 of 42 sample texts tokenize differently: [PAD] now "
         "appended to every input by tokenizer.json's post-processor (the token this pooling reads); re-embed the index"),
        ("tokenizer.drift", "high", 'tokenization changed for 42 of 42 sample texts (100%), '
         'e.g. "The quick brown fox jumps ove…": token 12 (end) → "[PAD]" (0)'),
        ("tokenizer.post_processor_changed", "high", POST_PROCESSOR_CHANGE),
    ],
    "bert_post_processor_ignored": [
        ("tokenizer.ignored_by_loader", "low", POST_PROCESSOR_CHANGE + ", with no effect: "
         + BERT_REBUILDS.format(part="post_processor", v4="transformers 4 obeyed tokenizer.json's")),
    ],
    "query_prompt": [
        ("sentence_transformers.query_prompt_changed", "high", "config_sentence_transformers.json: prompt 'query': "
         "'query: ' → 'search query: ': queries encode differently, stored document vectors stay valid"),
    ],
    "passage_prompt": [
        ("embeddings.incompatible", "critical", VERDICT + "document-side prompt 'passage': 'passage: ' → "
         "'search passage: ' (42 of 42 sample texts tokenize differently); re-embed the index"),
        ("sentence_transformers.prompts_changed", "high",
         "config_sentence_transformers.json: prompt 'passage': 'passage: ' → 'search passage: '"),
    ],
    "passage_prompt_spacing": [
        ("sentence_transformers.prompt_same_tokens", "info", "config_sentence_transformers.json: prompt 'passage': "
         "'passage: ' → 'passage:', which tokenizes the same for every sample text: no effect"),
    ],
    "default_prompt": [
        ("embeddings.incompatible", "critical", VERDICT + "default_prompt_name: null → query: default encodes now "
         "start with 'query: ', 42 of 42 sample texts tokenize differently; re-embed the index"),
        ("sentence_transformers.prompts_changed", "high", "config_sentence_transformers.json: default_prompt_name: "
         "null → query"),
    ],
    "schema_migrated": [
        ("sentence_transformers.schema_migrated", "info", "re-saved in another sentence-transformers schema with the "
         "same meaning: modules.json type paths (e.g. sentence_transformers.models.Transformer → "
         "sentence_transformers.base.modules.transformer.Transformer); 1_Pooling/config.json from the classic to "
         "the compact pooling schema"),
    ],
    "schema_migrated_back": [
        ("sentence_transformers.schema_migrated", "info", "re-saved in another sentence-transformers schema with the "
         "same meaning: modules.json type paths (e.g. sentence_transformers.base.modules.transformer.Transformer → "
         "sentence_transformers.models.Transformer); 1_Pooling/config.json from the compact to the classic "
         "pooling schema"),
    ],
    "schema_migrated_cls": [
        ("embeddings.incompatible", "critical", VERDICT + "pooling mean → cls; re-embed the index"),
        ("sentence_transformers.pooling_changed", "high", "1_Pooling/config.json: pooling mean → cls"),
        ("sentence_transformers.schema_migrated", "info", "re-saved in another sentence-transformers schema with the "
         "same meaning: modules.json type paths (e.g. sentence_transformers.models.Transformer → "
         "sentence_transformers.base.modules.transformer.Transformer); 1_Pooling/config.json from the classic to "
         "the compact pooling schema"),
    ],
    "max_seq_32": [
        ("embeddings.incompatible", "critical", VERDICT + "max_seq_length: 256 → 32: texts longer than 32 tokens "
         "embed differently (12 of the sample texts are longer than 32 tokens); re-embed the index"),
        ("sentence_transformers.max_seq_length_changed", "moderate", "sentence_bert_config.json: max_seq_length: 256 → 32"),
    ],
    "max_seq_128": [
        ("sentence_transformers.max_seq_length_changed", "moderate",
         "sentence_bert_config.json: max_seq_length: 256 → 128 (no sample text is longer than 128 tokens)"),
    ],
    "transformer_moved": [
        ("sentence_transformers.modules_changed", "high",
         "modules.json: Transformer module moved from the repo root to 'other', which holds the same model files"),
        ("weights.file_added", "low", "weight file added: other/model.safetensors (240 bytes)"),
    ],
    "transformer_repointed": [
        ("embeddings.incompatible", "critical", VERDICT + "Transformer module re-pointed from the repo root to "
         "'other', whose model files differ; 27 of 42 sample texts tokenize differently: lowercasing turned off in "
         "tokenizer_config.json; re-embed the index"),
        ("sentence_transformers.modules_changed", "high",
         "modules.json: Transformer module moved from the repo root to 'other'"),
        ("weights.file_added", "low", "weight file added: other/model.safetensors (240 bytes)"),
    ],
    "module_path_absolute": [
        ("sentence_transformers.malformed", "critical",
         "modules.json: module path '/etc/evil' leaves the repo; sentence-transformers cannot load the model"),
    ],
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_class_of_change_gives_exactly_its_findings(results, name):
    assert triples(results[name]) == EXPECTED[name]


def test_every_scenario_is_checked():
    assert set(EXPECTED) == set(SCENARIOS)


def test_the_verdict_names_each_cause_in_its_evidence(results):
    verdict = results["transformer_repointed"][0]
    assert verdict.library == "sentence-transformers" and verdict.category == "embeddings"
    assert verdict.evidence["reasons"] == [
        "Transformer module re-pointed from the repo root to 'other', whose model files differ",
        "27 of 42 sample texts tokenize differently: lowercasing turned off in tokenizer_config.json"]


def test_drift_from_a_config_only_change_says_which_file_decides(results):
    drift = next(f for f in results["casing_config_only"] if f.code == "tokenizer.drift")
    assert drift.evidence["precedence"] == [
        "transformers 5 rebuilds BertTokenizer's normalizer and post-processor from tokenizer_config.json "
        "(transformers 4 rebuilt the normalizer only)"]


@pytest.mark.parametrize("path", ["/etc/evil", "a/../../etc", "./a", "a\\\\b", "..", "a/./b"])
def test_a_module_path_that_leaves_the_repo_is_refused_as_written(path):
    from tracker.core.findings.config import Unreadable
    from tracker.core.findings.sentence_transformers import _safe_folder

    with pytest.raises(Unreadable, match="leaves the repo"):
        _safe_folder(path)


@pytest.mark.parametrize(("type_path", "kind"), [
    ("sentence_transformers.models.Pooling", "Pooling"),
    ("sentence_transformers.sentence_transformer.modules.pooling.Pooling", "Pooling"),
    ("sentence_transformers.sentence_transformer.modules.normalize.Normalize", "Normalize"),
    ("sentence_transformers.base.modules.normalize.Normalize", "Normalize"),
    ("sentence_transformers.base.modules.transformer.Transformer", "Transformer"),
    ("sentence_transformers.models.Transformer", "Transformer"),
    ("sentence_transformers.sentence_transformer.modules.static_embedding", "StaticEmbedding"),
    ("sentence_transformers.sentence_transformer.modules.bow", "BoW"),
])
def test_every_known_module_type_path_reads_as_one_kind(type_path, kind):
    from tracker.core.findings.sentence_transformers import Module

    module = Module(name="0", path="", type=type_path)
    assert (module.kind, module.identity) == (kind, f"st:{kind}")


def test_a_custom_module_keeps_its_own_type():
    from tracker.core.findings.sentence_transformers import Module

    assert Module(name="0", path="", type="custom_st.Pooling").identity == "custom_st.Pooling"


@pytest.fixture(scope="module")
def diff_output(tmp_path_factory):
    """``tracker diff`` of two scenarios pushed to a stand-in, neither watched (read from the Hub)."""
    from click.testing import CliRunner
    from hubstandin import HubStandin

    from tracker.surfaces.cli import main

    root = tmp_path_factory.mktemp("diff")
    hub = HubStandin(root / "hub").start()
    env = {"HF_ENDPOINT": hub.url, "TRACKER_DATABASE_URL": f"sqlite:///{root}/t.sqlite3"}
    try:
        out = {}
        for name in ("transformer_repointed", "query_prompt"):
            repo = f"sentence-transformers/{name.replace('_', '-')}"
            hub.create_repo(repo)
            old = hub.commit(repo, SCENARIOS[name][0], message="upload")
            new = hub.commit(repo, SCENARIOS[name][1], message=name)
            result = CliRunner().invoke(main, ["diff", repo, old, new], env=env, catch_exceptions=False)
            assert result.exit_code == 0, result.output
            out[name] = result.output.splitlines()
        yield out
    finally:
        hub.stop(wait=False)


def test_tracker_diff_prints_the_index_verdict_first_with_each_cause(diff_output):
    assert diff_output["transformer_repointed"][:3] == [
        "critical: " + VERDICT + "Transformer module re-pointed from the repo root to 'other', whose model files "
        "differ; 27 of 42 sample texts tokenize differently: lowercasing turned off in tokenizer_config.json; "
        "re-embed the index  (embeddings.incompatible)",
        "  cause: Transformer module re-pointed from the repo root to 'other', whose model files differ",
        "  cause: 27 of 42 sample texts tokenize differently: lowercasing turned off in tokenizer_config.json",
    ]


def test_tracker_diff_says_the_index_stands_when_only_queries_change(diff_output):
    assert diff_output["query_prompt"][0] == (
        "index: stored embeddings stay comparable (no change moves the vectors of stored items)")


@pytest.mark.parametrize(("config", "modes", "dimension", "schema"), [
    ({"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True}, ("mean",), 384, "classic"),
    ({"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True},
     ("cls", "mean"), 384, "classic"),  # concatenated in sentence-transformers' order, whatever the key order
    ({"word_embedding_dimension": 384}, ("mean",), 384, "classic"),
    ({"embedding_dimension": 384, "pooling_mode": "lasttoken", "include_prompt": True}, ("lasttoken",), 384, "compact"),
    ({"embedding_dimension": 384, "pooling_mode": ["cls", "mean"]}, ("cls", "mean"), 384, "compact"),
])
def test_both_pooling_schemas_read_into_one_model(config, modes, dimension, schema):
    from tracker.core.findings.sentence_transformers import pooling_spec

    spec = pooling_spec(config)
    assert (spec.modes, spec.dimension, spec.include_prompt, spec.schema) == (modes, dimension, True, schema)
