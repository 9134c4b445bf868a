"""Bounds on what one upstream value can cost: an OpenVINO attribute, a finding's evidence.

Before: a 30 MB ``shape`` attribute on an OpenVINO Parameter was split whole before its 64
dimensions were kept (1.09 GB resident); five 6 MB added tokens were copied whole into one finding's
evidence (31 MB, and a 63 MB ``tracker diff --json``). Now an attribute is checked against its cap
before anything splits it, and every evidence string is cut at 4 KiB with its full size stated.
Both are built on the Hub stand-in and read by a real poll.
"""

from __future__ import annotations

import json

from tests.hostile.content_support import MiB, run_python
from tests.meaning.test_exports import openvino_ir
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.bounded import MAX_EVIDENCE_CHARS

HEADROOM = 384 * MiB  # address space the child may map once warm; splitting the attribute took 1.09 GB

CHILD = """
    import json, resource
    from pathlib import Path
    from tracker.adapters.hub import HubClient
    from tracker.adapters.settings import Settings
    from tracker.app import make_tracker

    def vm_size():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

    settings = Settings(database={"url": DB}, hub={"endpoint": URL, "timeout": 60.0})
    with make_tracker(settings, hub=HubClient(URL, timeout=60.0, sleep=lambda _s: None)) as tracker:
        tracker.store.repos.add("acme/warm", now=tracker.clock())
        tracker.poll(["acme/warm"])  # a baseline with an IR, before the cap
        resource.setrlimit(resource.RLIMIT_AS, (vm_size() + HEADROOM, resource.getrlimit(resource.RLIMIT_AS)[1]))
        (result,) = tracker.poll(["acme/ov"])
        pk = tracker.store.repos.get("acme/ov").pk
        row = tracker.store.revisions.get(pk, NEW)
        print(json.dumps({"result": [result.status, result.error],
                          "findings": [[f.code, f.severity.value, f.summary] for f in row.findings
                                       if f.category in ("exports", "analysis")]}))
"""


def test_a_30_mb_openvino_shape_attribute_is_refused_before_it_is_split(hub_standin, tmp_path):
    shape = ",".join(["1"] * 15_000_000)  # 30 MB: 15 million dimensions
    hostile = openvino_ir().replace(b'shape="?,?"', f'shape="{shape}"'.encode(), 1)
    for repo in ("acme/warm", "acme/ov"):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"openvino/openvino_model.xml": openvino_ir()})
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url})
    with make_tracker(settings) as tracker:  # the baseline of acme/ov, polled here
        tracker.store.repos.add("acme/ov", now=tracker.clock())
        tracker.poll(["acme/ov"])
    new = hub_standin.commit("acme/ov", {"openvino/openvino_model.xml": hostile}, message="reshape")
    code = (CHILD.replace("DB", repr(f"sqlite:///{tmp_path}/t.sqlite3")).replace("URL", repr(hub_standin.url))
            .replace("HEADROOM", str(HEADROOM)).replace("NEW", repr(new)))
    out = run_python(code, memory=16 * 1024 * MiB, timeout=600).result()
    assert out == {"result": ["new", None], "findings": [
        ["exports.openvino_malformed", "critical", "openvino/openvino_model.xml is not a readable OpenVINO IR: a "
         "'shape' attribute of 29,999,999 characters, over the 4,096-character cap; OpenVINO cannot load it"]]}


def test_evidence_strings_are_cut_at_4_kib_with_their_full_size_stated(hub_standin, tmp_path):
    repo = "acme/fat-tokens"
    hub_standin.create_repo(repo)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "added_tokens_decoder": {}}
    first = hub_standin.commit(repo, {"tokenizer_config.json": json.dumps(config).encode()})
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/tracker.sqlite3"},
                        hub={"endpoint": hub_standin.url, "timeout": 60.0})
    with make_tracker(settings, hub=HubClient(settings.hub.endpoint, timeout=60.0,
                                              sleep=lambda _s: None)) as tracker:
        tracker.store.repos.add(repo, now=tracker.clock())
        tracker.poll([repo])
        fat = {str(100 + k): {"content": chr(97 + k) * (2 * MiB), "special": False} for k in range(5)}
        config["added_tokens_decoder"] = fat
        new = hub_standin.commit(repo, {"tokenizer_config.json": json.dumps(config).encode()}, message="fat tokens")
        (result,) = tracker.poll([repo])
        assert (result.status, result.error) == ("new", None)
        row = tracker.store.revisions.get(tracker.store.repos.get(repo).pk, new)
    assert first != new
    [added] = [f for f in row.findings if f.code == "tokenizer.added_tokens_added"]
    suffix = "… (2,097,152 characters in all)"
    assert [e["content"] for e in added.evidence["examples"]] == [
        chr(97 + k) * (MAX_EVIDENCE_CHARS - len(suffix)) + suffix for k in range(5)]
    assert len(json.dumps(added.to_json())) < 6 * MAX_EVIDENCE_CHARS  # 10 MB before


def test_diffs_an_analyser_already_bounded_keep_their_own_bound():
    from tracker.core.findings.remote_code import MAX_DIFF_CHARS
    from tracker.core.findings.rules import SeverityRules

    diff = "+x = 1\n" * (MAX_DIFF_CHARS // 7)  # a code diff at its own cap (remote_code), 5 times 4 KiB
    finding = SeverityRules.default().finding("code.python_changed", "code", "Python file changed: a.py",
                                              evidence={"diff": diff, "token": "y" * 5000})
    suffix = "… (5,000 characters in all)"
    assert finding.to_json()["evidence"] == {"diff": diff, "token": "y" * (MAX_EVIDENCE_CHARS - len(suffix)) + suffix}
