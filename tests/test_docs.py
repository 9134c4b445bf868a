"""The documentation lists what the code does."""

from pathlib import Path

from tracker.findings.rules import SeverityRules
from tracker.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]


def test_every_finding_code_is_documented_with_its_default_severity():
    text = (ROOT / "docs" / "findings.md").read_text()
    rules = SeverityRules.default()
    missing = [code for code, sev in rules.table.items() if f"| `{code}` | {sev.value} |" not in text]
    assert missing == []


def test_the_shipped_config_loads_and_watches_e5():
    settings = load_settings(ROOT / "config" / "tracker.toml", env={})
    assert settings.watch[0].repo == "intfloat/multilingual-e5-large"
    assert settings.database_url == "sqlite:///data/tracker.sqlite3"
    assert settings.osv_api_url == "https://api.osv.dev"
