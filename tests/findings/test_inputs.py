"""The analysis step is pure: analysers read a RevisionInputs and nothing else, and the pipeline's rounds
of planned reads give them everything they read."""

from __future__ import annotations

import json
import logging

import pytest

from tests.findings.sources import DictSources, make_change, snapshot
from tracker.adapters.template_sandbox import LeasedSandbox
from tracker.core.findings import analyse_revision
from tracker.core.findings.inputs import SAFETENSORS, NotRead, RevisionInputs, allows_key, text_key
from tracker.pipeline import analysis
from tracker.pipeline.analysis import Rounds, analyse_change

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
          "hidden_size": 4096, "rope_theta": 10000.0, "torch_dtype": "bfloat16"}
GENERATION = {"bos_token_id": 1, "eos_token_id": 2, "temperature": 0.6, "top_p": 0.9}


def side(config: dict, generation: dict) -> dict[str, bytes]:
    return {"config.json": json.dumps(config).encode(), "generation_config.json": json.dumps(generation).encode(),
            "README.md": b"---\nlicense: apache-2.0\nlibrary_name: transformers\n---\n# model\n"}


OLD = side(CONFIG, GENERATION)
NEW = side(dict(CONFIG, rope_theta=500000.0), dict(GENERATION, eos_token_id=[2, 3]))
FINDINGS = [
    ("config.rope_changed", "high", "transformers", "rope_theta: 10000.0 → 500000.0"),
    ("generation.eos_token_id_changed", "high", "transformers", "eos_token_id: 2 → [2, 3]"),
    ("files.changed", "info", None, "changed config.json (154 bytes → 155 bytes)"),
    ("files.changed", "info", None, "changed generation_config.json (72 bytes → 77 bytes)"),
]


def test_the_analysers_run_on_a_revision_inputs_built_from_files_with_no_hub_at_all():
    inputs = RevisionInputs.of_files(snapshot(OLD), snapshot(NEW), old_files=OLD, new_files=NEW)
    change, _ = make_change(OLD, NEW)
    found = [(f.code, f.severity.value, f.library, f.summary) for f in analyse_revision(change, inputs)]
    assert found == FINDINGS


def test_a_read_the_inputs_do_not_hold_raises_when_strict_and_is_recorded_when_not():
    inputs = RevisionInputs.of_files(snapshot(OLD), snapshot(NEW), old_files=OLD, new_files={})
    with pytest.raises(NotRead) as raised:
        inputs.text("new", "config.json")
    assert raised.value.key == text_key("new", "config.json")
    assert inputs.text("new", "model.safetensors") is None  # not listed: absent, no key needed
    lenient = RevisionInputs(inputs.sides, inputs.values, strict=False)
    assert lenient.text("new", "config.json") is None
    assert lenient.unplanned == [text_key("new", "config.json")]
    with pytest.raises(ValueError, match="side must be 'old' or 'new'"):
        inputs.text("both", "config.json")


def test_what_the_rounds_fetched_replays_to_the_same_findings_without_a_reader():
    change, reader = make_change(OLD, NEW)
    planned = analyse_change(change, reader, renderers=LeasedSandbox, keep_inputs=True)
    assert [(f.code, f.severity.value, f.library, f.summary) for f in planned.findings] == FINDINGS
    assert planned.inputs is not None and planned.inputs.has(allows_key("the config analysis"))
    with LeasedSandbox() as renderer:
        assert analyse_revision(change, planned.inputs, renderer=renderer) == planned.findings
    assert planned.inputs.unplanned == []


def test_the_rounds_fetch_only_what_the_analysers_read_in_the_order_they_read_it():
    change, reader = make_change(OLD, NEW)
    analyse_change(change, reader, renderers=LeasedSandbox)
    # library detection first (README.md and config.json, new side then old), then the analysers' own reads
    assert reader.reads[:4] == [("new", "README.md"), ("new", "config.json"), ("old", "README.md"),
                                ("old", "config.json")]
    assert set(reader.reads) == {(s, p) for s in ("old", "new") for p in OLD}


def test_an_analyser_that_keeps_wanting_more_is_bounded(monkeypatch, caplog):
    change, reader = make_change(OLD, NEW)
    rounds = Rounds(change, DictSources(OLD, NEW), None)

    def greedy(inputs: RevisionInputs) -> int:
        return sum(inputs.allows(f"step {i}") for i in range(10_000))

    with pytest.raises(NotRead):  # the test suite: an unplanned read fails
        rounds.complete(greedy)
    monkeypatch.setattr(analysis, "UNPLANNED_RAISES", False)
    with caplog.at_level(logging.WARNING, logger="tracker.processing"):
        assert rounds.complete(greedy) == analysis.round_bound(change)  # in production: the rest read as absent
    assert f"past {analysis.round_bound(change)} rounds of reads, {10_000 - analysis.round_bound(change)} more" \
           in caplog.text


def test_an_analysers_rounds_hold_parsed_gguf_headers_only_within_the_revisions_header_memory():
    from tracker.pipeline.sources import RevisionBudget

    files = {name: b"GGUF" for name in ("a.gguf", "b.gguf", "c.gguf")}
    change, _ = make_change(None, files)
    header = {"header_bytes": 5 * 1024 * 1024, "metadata": {}, "tensors": {}}  # parses to some 40 MiB
    reader = DictSources({}, files, ggufs={"new": dict.fromkeys(files, header)})
    budget = RevisionBudget(header_bytes=64 * 1024 * 1024, cpu_clock=lambda: 0.0)
    rounds = Rounds(change, reader, None, budget)

    def read_all(inputs: RevisionInputs) -> list[bool]:
        return [inputs.gguf_header("new", name) is not None for name in sorted(files)]

    assert rounds.complete(read_all) == [True, True, False]  # 40 MiB held, then 80 MiB: no third
    assert budget.skipped == {"header_bytes": [
        "the GGUF header of c.gguf (the analysis holds 83,886,080 bytes of parsed headers)"]}
    assert rounds.complete(read_all) == [True, True, False]  # each analyser (or part) holds its own


def test_chat_templates_are_rendered_by_the_renderer_handed_in_and_core_starts_none():
    template = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
                "{% if add_generation_prompt %}<assistant>{% endif %}")
    old = {"chat_template.jinja": template.encode()}
    new = {"chat_template.jinja": template.replace("{% if add_generation_prompt %}<assistant>{% endif %}",
                                                   "<assistant>").encode()}
    inputs = RevisionInputs.of_files(snapshot(old), snapshot(new), old_files=old, new_files=new)
    change, _ = make_change(old, new)
    changed = ("files.changed", "info", "changed chat_template.jinja (122 bytes → 81 bytes)")
    assert [(f.code, f.severity.value, f.summary) for f in analyse_revision(change, inputs)] == [
        ("analysis.failed", "moderate", "chat_template analysis failed: TypeError: rendering chat templates needs a "
                                        "TemplateRenderer (tracker/core/templates.py), handed to the analysis by the "
                                        "pipeline"), changed]
    with LeasedSandbox() as renderer:
        assert [(f.code, f.severity.value, f.summary) for f in analyse_revision(change, inputs, renderer=renderer)] == [
            ("chat_template.rendered_prompt_changed", "high", "rendered prompt changed for 4 of 8 conversations "
             "(exactly those without the generation prompt); one user turn, no generation prompt: adds '<assistant>' "
             "at the end"), changed]


class CountingReader(DictSources):
    """A reader that records each key fetched, in order."""

    def __init__(self, files: dict[str, bytes], headers: dict[str, dict]) -> None:
        super().__init__({}, files, headers={"new": headers})
        self.fetched: list[str] = []

    def safetensors_header(self, side, path):
        self.fetched.append(path)
        return super().safetensors_header(side, path)


SHARDS = {f"model-{i:02d}.safetensors": b"\0" * 8 for i in range(40)}
SHARD_HEADERS = {path: {f"w{i}": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
                 for i, path in enumerate(SHARDS)}


def test_what_an_analyser_wants_ahead_is_fetched_in_one_round_in_the_order_it_reads():
    change, _ = make_change(None, SHARDS)
    runs: list[int] = []

    def reads_every_header(inputs: RevisionInputs, ahead: bool) -> list[str]:
        runs.append(1)
        if ahead:
            inputs.want(inputs.file_key(SAFETENSORS, "new", path) for path in sorted(SHARDS))
        return [next(iter(inputs.safetensors_header("new", path))) for path in sorted(SHARDS)]

    for ahead, rounds in ((False, 41), (True, 2)):  # a round per header, or one for all of them
        runs.clear()
        reader = CountingReader(SHARDS, SHARD_HEADERS)
        assert Rounds(change, reader, None).complete(lambda i, ahead=ahead: reads_every_header(i, ahead)) == \
            [f"w{i}" for i in range(40)]
        assert (len(runs), reader.fetched) == (rounds, sorted(SHARDS))


def test_what_an_analyser_computed_in_an_earlier_round_is_remembered_for_its_later_ones():
    change, _ = make_change(None, SHARDS)
    computed: list[str] = []

    def measure(inputs: RevisionInputs, path: str) -> str:
        computed.append(path)
        return next(iter(inputs.safetensors_header("new", path)))

    def reads_one_by_one(inputs: RevisionInputs) -> list[str]:
        return [inputs.remembered(("measure", path), lambda path=path: measure(inputs, path))
                for path in sorted(SHARDS)]

    assert Rounds(change, CountingReader(SHARDS, SHARD_HEADERS), None).complete(reads_one_by_one) == \
        [f"w{i}" for i in range(40)]
    # each completed once; the 40 measurements stopped by a header not yet read are not kept
    assert sorted(set(computed)) == sorted(SHARDS) and len(computed) == 80


def test_want_names_no_key_for_a_file_the_side_does_not_list_and_does_nothing_past_the_bound():
    inputs = RevisionInputs.of_files(None, snapshot(SHARDS), new_files={})
    assert inputs.file_key(SAFETENSORS, "new", "absent.safetensors") is None
    inputs.want([None])  # nothing wanted
    with pytest.raises(NotRead) as raised:
        inputs.want(inputs.file_key(SAFETENSORS, "new", p) for p in ("model-00.safetensors", "model-01.safetensors"))
    assert raised.value.keys == ((SAFETENSORS, "new", "model-00.safetensors"),
                                 (SAFETENSORS, "new", "model-01.safetensors"))
    lenient = RevisionInputs(inputs.sides, inputs.values, strict=False)
    lenient.want([(SAFETENSORS, "new", "model-00.safetensors")])
    assert lenient.unplanned == []
