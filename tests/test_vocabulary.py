"""Each vocabulary a user can type is defined once in core; the surfaces' choices are derived from it."""

from __future__ import annotations

import typing
from pathlib import Path

import click
import pytest

from tracker.core.model import CATEGORIES, OUTPUT_FORMATS, SEVERITY_NAMES, Category, OutputFormat, Severity
from tracker.surfaces.api_models import SubscriptionIn
from tracker.surfaces.cli import main


def choices(command: str, option: str) -> tuple[str, ...]:
    found = main.commands[command]
    param = next(p for p in found.params if p.name == option)
    assert isinstance(param.type, click.Choice)
    return tuple(param.type.choices)


def test_severities_come_from_the_enum_worst_first():
    assert SEVERITY_NAMES == ("critical", "high", "moderate", "low", "info")
    assert [Severity(name).rank for name in SEVERITY_NAMES] == [0, 1, 2, 3, 4]
    assert choices("subscribe", "min_severity") == SEVERITY_NAMES
    assert choices("scan", "fail_on") == (*SEVERITY_NAMES, "floating")
    assert choices("audit", "fail_on") == (*SEVERITY_NAMES, "stale")
    # the API's schema keeps its inline enum (an unchanged OpenAPI document); it must say the same
    annotation = SubscriptionIn.model_fields["min_severity"].annotation
    assert typing.get_args(annotation) == SEVERITY_NAMES


def test_output_formats_come_from_the_enum():
    assert OUTPUT_FORMATS == tuple(f.value for f in OutputFormat) == ("text", "json", "sarif", "cyclonedx")
    assert choices("scan", "output_format") == OUTPUT_FORMATS
    assert choices("audit", "output_format") == OUTPUT_FORMATS


def test_categories_come_from_the_enum():
    assert CATEGORIES == tuple(c.value for c in Category)
    assert list(CATEGORIES) == sorted(CATEGORIES)  # the order users read them in, in errors and docs


def test_every_channel_kind_has_a_channel():
    from tracker.adapters.delivery.channels import CHANNELS, channel
    from tracker.core.model import ChannelKind

    assert set(CHANNELS) == set(ChannelKind)
    assert channel("slack").shown_url("https://hooks.slack.com/services/T0/B0/XXXX") == "https://hooks.slack.com/…"
    assert channel("webhook").shown_url("https://example.org/hook?token=abc") == "https://example.org/hook"
    assert channel("slack").new_secret() is None
    assert channel("webhook").new_secret().startswith("whsec_")


def test_a_misspelt_analyser_fails_when_its_module_is_imported():
    from tracker.core.findings.registry import analyser

    with pytest.raises(ValueError, match="library='sentence_transformers'"):
        analyser(library="sentence_transformers", order=999)  # the name is sentence-transformers


def test_an_analyser_registered_twice_or_at_a_taken_place_fails():
    from tracker.core.findings.registry import analyser

    def analyse(change, inputs, rules):
        return []

    analyse.__module__ = "tracker.core.findings.files"
    with pytest.raises(ValueError, match="registers a second analyser"):
        analyser(library=None, order=999)(analyse)
    analyse.__module__ = "tracker.core.findings.not_registered"
    with pytest.raises(ValueError, match="tracker.core.findings.files already runs there"):
        analyser(library=None, order=10)(analyse)


def test_every_module_with_an_analyse_is_registered_in_the_run_order():
    import tracker.core.findings as f

    assert f.ANALYSERS == (
        ("files", None), ("config", "transformers"), ("generation", "transformers"), ("tokenizer", "transformers"),
        ("slow_tokenizer", "transformers"), ("sentencepiece", "transformers"), ("chat_template", "transformers"),
        ("weights", None), ("manifests", None), ("gguf", "gguf"), ("processor", "transformers"),
        ("remote_code", None), ("licence", None), ("consistency", "transformers"),
        ("sentence_transformers", "sentence-transformers"), ("diffusers", "diffusers"), ("timm_config", "timm"),
        ("open_clip_config", "open_clip"), ("exports", None))
    folder = Path(f.__file__).parent
    with_analyse = sorted(p.stem for p in folder.glob("*.py") if "\ndef analyse(" in p.read_text())
    assert with_analyse == sorted(f.ANALYSER_MODULES)
