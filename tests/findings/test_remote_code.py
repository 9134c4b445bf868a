"""Remote code findings, with phi-2's real auto_map (configuration_phi / modeling_phi)."""

from __future__ import annotations

import pytest

from tests.findings.sources import make_change
from tests.shared import INCIDENTS
from tracker.core.findings import remote_code
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

RULES = SeverityRules.default()
PHI2_CONFIG = INCIDENTS / "04-phi2-native-port-jan-2024" / "after" / "config.json"

MODELING_OLD = b'''\
import math

import torch
from torch import nn

from .configuration_phi import PhiConfig


class PhiForCausalLM(nn.Module):
    def __init__(self, config: PhiConfig):
        super().__init__()
        self.scale = math.sqrt(config.hidden_size)
'''

MODELING_NEW = b'''\
import math
import subprocess as sp

import requests
import torch
from torch import nn

from .configuration_phi import PhiConfig
from .phi_utils import rotate


class PhiForCausalLM(nn.Module):
    def __init__(self, config: PhiConfig):
        super().__init__()
        self.scale = math.sqrt(config.hidden_size)
        sp.run(["sh", "-c", "id"])
        requests.get("https://example.invalid/beacon")
        eval("1 + 1")
'''

CONFIGURATION = b"class PhiConfig:\n    hidden_size = 2560\n"


@pytest.fixture(scope="module")
def phi2_config() -> bytes:
    return PHI2_CONFIG.read_bytes()


def base(config: bytes) -> dict[str, bytes]:
    return {"config.json": config, "configuration_phi.py": CONFIGURATION, "modeling_phi.py": MODELING_OLD}


def test_auto_map_points_at_phi_modules(phi2_config):
    ch, src = make_change(None, base(phi2_config))
    assert remote_code.auto_map_modules(ch, src) == {
        "configuration_phi.py": ["config.json:AutoConfig"],
        "modeling_phi.py": ["config.json:AutoModelForCausalLM"],
    }


def test_modeling_change_with_shell_network_and_eval_is_critical(phi2_config):
    old = base(phi2_config)
    new = {**old, "modeling_phi.py": MODELING_NEW, "phi_utils.py": b"def rotate(x):\n    return x\n"}
    ch, src = make_change(old, new)
    found = remote_code.analyse(ch, src, RULES)
    assert [(f.code, f.severity, f.path) for f in found] == [
        ("code.remote_code_changed", Severity.CRITICAL, "modeling_phi.py"),
        ("code.dangerous_call_added", Severity.CRITICAL, "modeling_phi.py"),
        ("code.remote_code_changed", Severity.CRITICAL, "phi_utils.py"),
    ]
    changed, dangerous, helper = found
    assert changed.summary == (
        "remote code changed: modeling_phi.py (+6 −0 lines); loaded with trust_remote_code via "
        "config.json:AutoModelForCausalLM"
    )
    assert changed.evidence["new_imports"] == [".phi_utils", "requests", "subprocess"]
    assert changed.evidence["lines_added"] == 6 and changed.evidence["diff_truncated"] is False
    assert "+        sp.run([\"sh\", \"-c\", \"id\"])" in changed.evidence["diff"]
    assert changed.evidence["diff"].startswith("--- a/modeling_phi.py\n+++ b/modeling_phi.py\n@@")
    assert dangerous.summary == "modeling_phi.py now calls eval, requests.get, subprocess.run (eval, network, shell)"
    assert dangerous.after == ["eval", "requests.get", "subprocess.run"]
    assert dangerous.evidence["calls"] == [
        {"kind": "shell", "call": "subprocess.run", "line": 16},
        {"kind": "network", "call": "requests.get", "line": 17},
        {"kind": "eval", "call": "eval", "line": 18},
    ]
    # phi_utils.py is not in auto_map, but modeling_phi imports it relatively: it runs too.
    assert helper.summary == (
        "remote code added: phi_utils.py (+2 −0 lines); loaded with trust_remote_code via imported by modeling_phi.py"
    )


def test_unreferenced_python_is_moderate_and_its_calls_high(phi2_config):
    old = base(phi2_config)
    script = b"import os\nfrom urllib.request import urlopen\nos.system('ls')\nurlopen('http://x')\n"
    ch, src = make_change(old, {**old, "scripts/convert.py": script})
    found = remote_code.analyse(ch, src, RULES)
    assert [(f.code, f.severity, f.summary) for f in found] == [
        ("code.python_changed", Severity.MODERATE,
         "Python file added: scripts/convert.py (+4 −0 lines); not referenced by auto_map"),
        ("code.dangerous_call_added_unloaded", Severity.HIGH,
         "scripts/convert.py now calls os.system, urllib.request.urlopen (network, shell)"),
    ]


def test_existing_dangerous_calls_are_not_reported_again(phi2_config):
    old = {**base(phi2_config), "modeling_phi.py": MODELING_NEW, "phi_utils.py": b""}
    new = {**old, "modeling_phi.py": MODELING_NEW + b"# comment\n"}
    ch, src = make_change(old, new)
    assert [f.code for f in remote_code.analyse(ch, src, RULES)] == ["code.remote_code_changed"]


def test_unparseable_file_is_a_finding_not_an_exception(phi2_config):
    old = base(phi2_config)
    ch, src = make_change(old, {**old, "modeling_phi.py": b"def broken(:\n    pass\n"})
    found = remote_code.analyse(ch, src, RULES)
    assert [(f.code, f.severity) for f in found] == [
        ("code.remote_code_changed", Severity.CRITICAL),
        ("code.unparseable", Severity.CRITICAL),
    ]
    assert found[1].summary == "modeling_phi.py does not parse: SyntaxError: invalid syntax (line 1)"
    ch, src = make_change(old, {**old, "configuration_phi.py": b"x = 1\x00\n\xff\xfe"})
    assert remote_code.analyse(ch, src, RULES)[1].code == "code.unparseable"


def test_removed_module_still_in_auto_map(phi2_config):
    old = base(phi2_config)
    new = {k: v for k, v in old.items() if k != "configuration_phi.py"}
    ch, src = make_change(old, new)
    [f] = remote_code.analyse(ch, src, RULES)
    assert (f.code, f.severity) == ("code.remote_code_removed", Severity.CRITICAL)
    assert f.summary == (
        "configuration_phi.py removed but config.json:AutoConfig still loads it: trust_remote_code loading fails"
    )


def test_native_port_drops_auto_map_so_python_is_no_longer_loaded(phi2_config):
    # Jan 2024: phi-2 moved to transformers' native PhiForCausalLM; without auto_map the .py is inert.
    import json

    native = json.loads(phi2_config)
    del native["auto_map"]
    old = base(phi2_config)
    new = {**old, "config.json": json.dumps(native).encode(), "modeling_phi.py": MODELING_OLD + b"\n# v2\n"}
    ch, src = make_change(old, new)
    [f] = remote_code.analyse(ch, src, RULES)
    assert (f.code, f.severity) == ("code.python_changed", Severity.MODERATE)


def test_tokenizer_auto_map_and_external_references():
    tok_cfg = b'{"auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", null]}}'
    cfg = b'{"auto_map": {"AutoModel": "other/repo--modeling_y.Y"}}'
    new = {"tokenizer_config.json": tok_cfg, "config.json": cfg, "tokenization_x.py": b"X = 1\n"}
    ch, src = make_change({}, new)
    [f] = remote_code.analyse(ch, src, RULES)
    assert f.code == "code.remote_code_changed"
    assert f.evidence["referenced_by"] == ["tokenizer_config.json:AutoTokenizer"]


def test_no_python_change_reads_nothing(phi2_config):
    ch, src = make_change(base(phi2_config), {**base(phi2_config), "README.md": b"hi"})
    assert remote_code.analyse(ch, src, RULES) == []
    assert src.reads == []


def test_long_diff_is_trimmed(phi2_config):
    old = base(phi2_config)
    big = b"".join(b"x%d = %d\n" % (i, i) for i in range(5000))
    ch, src = make_change(old, {**old, "modeling_phi.py": big})
    [f] = remote_code.analyse(ch, src, RULES)
    assert f.evidence["diff_truncated"] is True
    assert len(f.evidence["diff"].splitlines()) == remote_code.MAX_DIFF_LINES
    assert f.evidence["lines_added"] == 5000
