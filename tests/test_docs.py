"""The documentation lists what the code does."""

from pathlib import Path

from tracker.adapters.settings import load_settings
from tracker.core.findings.rules import SeverityRules, severity_policy

ROOT = Path(__file__).resolve().parents[1]


def test_every_finding_code_is_documented_with_its_default_severity_and_why():
    text = (ROOT / "docs" / "findings.md").read_text()
    policy = severity_policy()
    rows = {code: f"| `{code}` | {p.severity.value} | {p.why.replace('|', chr(92) + '|')} |" for code, p in policy.items()}
    missing = [code for code, row in rows.items() if row not in text.splitlines()]
    assert missing == []
    assert set(SeverityRules.default().table) == set(policy)


def test_the_shipped_config_loads_and_watches_e5():
    settings = load_settings(ROOT / "config" / "tracker.toml", env={})
    assert settings.watch[0].repo == "intfloat/multilingual-e5-large"
    assert settings.database.url == "sqlite:///data/tracker.sqlite3"
    assert settings.osv.api_url == "https://api.osv.dev"
