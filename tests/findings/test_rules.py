"""The severity policy: each code's default severity with its reason, and config overrides."""

import pytest

from tracker.core.findings.rules import CodePolicy, SeverityRules, parse_policy, severity_policy
from tracker.core.model import Severity


def test_each_code_has_a_severity_and_a_reason():
    policy = severity_policy()
    assert policy["config.rope_changed"] == CodePolicy(
        Severity.HIGH, "rope_theta / rope_scaling / rotary parameters: positions encode differently, outputs change silently"
    )
    severity, why = policy["files.added"]
    assert (severity, why) == (Severity.INFO, "a file appeared")
    assert [code for code, p in policy.items() if not p.why.strip()] == []


def test_rules_and_policy_agree_on_every_default():
    rules = SeverityRules.default()
    assert {code: p.severity for code, p in severity_policy().items()} == dict(rules.table)
    assert rules.why("files.added") == "a file appeared"
    assert rules.why("no.such_code") == ""


def test_an_override_changes_the_severity_and_says_so_in_the_reason():
    policy = severity_policy({"files.added": "high"})
    assert policy["files.added"] == CodePolicy(
        Severity.HIGH, "set by this deployment's [severity] table (default info: a file appeared)"
    )
    assert SeverityRules.default().with_overrides({"files.added": "high"}).severity("files.added") is Severity.HIGH
    assert severity_policy()["files.added"].severity is Severity.INFO  # the defaults are not touched


def test_an_unknown_severity_name_in_an_override_is_refused():
    with pytest.raises(ValueError, match="'urgent' is not a valid Severity"):
        severity_policy({"files.added": "urgent"})


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[severity]\n"a.b" = "high"\n', '''x.toml: 'a.b' must be { severity = "...", why = "..." }'''),
        ('[severity]\n"a.b" = { severity = "high" }\n', '''x.toml: 'a.b' must be { severity = "...", why = "..." }'''),
        ('[severity]\n"a.b" = { severity = "high", why = "  " }\n', '''x.toml: 'a.b' must be { severity = "...", why = "..." }'''),
        ('[severity]\n"a.b" = { severity = "urgent", why = "x" }\n', "'urgent' is not a valid Severity"),
        ('[severity]\n"files.added" = { severity = "high", why = "x" }\n', "severity code 'files.added' is defined twice (x.toml)"),
    ],
)
def test_a_malformed_policy_line_is_refused(text, error):
    with pytest.raises(ValueError) as exc:
        parse_policy("x.toml", text, dict(severity_policy()))
    assert str(exc.value) == error
