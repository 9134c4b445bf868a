"""Each vocabulary a user can type is defined once in core; the surfaces' choices are derived from it."""

from __future__ import annotations

import typing

import click

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


def test_a_misspelt_analyser_fails_when_the_package_is_imported():
    import subprocess
    import sys

    code = ("import tracker.core.findings.libraries\n"
            "import tracker.core.findings as f\n"
            "assert f._missing(f.ANALYSER_MODULES) == []\n"
            "assert f._missing(('files', 'tokenzier')) == ['tokenzier']\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
