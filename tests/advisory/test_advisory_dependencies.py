"""Dependency collection (requirements.txt, transformers_version, remote-code imports) and findings."""

from __future__ import annotations

from tests.advisory.support import ENDPOINT, T1, checked, linear
from tracker.adapters.osvdev import OsvClient
from tracker.core.advisory.affected import affected_commits
from tracker.core.advisory.build import advisory_events, build_revision_advisory
from tracker.core.advisory.dependencies import (
    PackageQuery,
    Unpinned,
    collect_dependencies,
    remote_code_imports,
    unpinned_findings,
    vulnerability_findings,
)
from tracker.core.model import Severity

REQUIREMENTS = b"""\
# pinned
torch==2.7.1
Transformers == 4.36.0 ; python_version >= "3.8"  # marker kept
accelerate>=0.20
einops
numpy==1.26.*
sentencepiece===0.2.0
flash-attn @ https://example.org/flash_attn-2.5.0.whl
--extra-index-url https://download.pytorch.org/whl/cu121
-r other.txt
safetensors==\\
    0.4.3
this is not a requirement!
"""

MODELING = """\
from __future__ import annotations
import math, os
import torch.nn as nn
from torch import Tensor
from .configuration_foo import FooConfig
from configuration_foo import FooConfig as Again
import einops
try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None
from google.protobuf import message
import mystery_pkg

def lazy():
    import tiktoken
"""


def test_collect_dependencies():
    scan = collect_dependencies(
        requirements_txt=REQUIREMENTS,
        config={"transformers_version": "4.36.0", "model_type": "foo"},
        remote_code={"modeling_foo.py": MODELING, "configuration_foo.py": "import transformers\n"},
    )
    assert scan.queries == [
        PackageQuery("PyPI", "safetensors", "0.4.3"),
        PackageQuery("PyPI", "sentencepiece", "0.2.0"),
        PackageQuery("PyPI", "torch", "2.7.1"),
        PackageQuery("PyPI", "transformers", "4.36.0"),
    ]
    assert scan.sources[("transformers", "4.36.0")] == [
        "requirements.txt:3", "config.json transformers_version", "import transformers in remote code"]
    assert scan.sources[("torch", "2.7.1")] == ["requirements.txt:2", "import torch in remote code"]
    assert scan.sources[("safetensors", "0.4.3")] == ["requirements.txt:11"]
    assert scan.unpinned == [
        Unpinned("accelerate", ">=0.20", "requirements.txt:4"),
        Unpinned("einops", "", "requirements.txt:5"),
        Unpinned("numpy", "==1.26.*", "requirements.txt:6"),
        Unpinned("flash-attn", "https://example.org/flash_attn-2.5.0.whl", "requirements.txt:8"),
        Unpinned("einops", "", "import einops in configuration_foo.py, modeling_foo.py"),
        Unpinned("flash-attn", "", "import flash_attn in configuration_foo.py, modeling_foo.py"),
        Unpinned("protobuf", "", "import google.protobuf in configuration_foo.py, modeling_foo.py"),
        Unpinned("tiktoken", "", "import tiktoken in configuration_foo.py, modeling_foo.py"),
    ]
    assert [where for where, _ in scan.skipped] == ["requirements.txt:9", "requirements.txt:10", "requirements.txt:13"]
    assert scan.unmapped_imports == [("mystery_pkg", "configuration_foo.py, modeling_foo.py")]


def test_remote_code_imports_reports_unparsable_files():
    modules, errors = remote_code_imports({"a.py": b"import torch\n", "b.py": b"def (:\n"})
    assert modules == {"torch"}
    assert [path for path, _ in errors] == ["b.py"]


def test_bad_transformers_version_is_skipped():
    scan = collect_dependencies(config={"transformers_version": "4.36.0.dev0+weird build"})
    assert scan.queries == [] and scan.skipped[0][0] == "config.json transformers_version"


def test_findings_and_related_from_the_standin(osv_standin):
    scan = collect_dependencies(requirements_txt="torch==2.7.1\nnumpy==1.26.4\n",
                                config={"transformers_version": "4.36.0"})
    with OsvClient(base_url=osv_standin.url, backoff=0) as osv:
        result = osv.querybatch(scan.queries)
    assert result.ok
    findings, related = vulnerability_findings(scan, result.vulns)
    assert [(f.code, f.severity, f.path, f.after) for f in findings] == [
        ("dependencies.known_vulnerability", Severity.HIGH, "requirements.txt", {"name": "torch", "version": "2.7.1"}),
        ("dependencies.known_vulnerability", Severity.HIGH, "config.json",
         {"name": "transformers", "version": "4.36.0"}),
    ]
    assert findings[0].summary.startswith("torch 2.7.1 has 15 known vulnerabilities: ")
    assert len(findings[1].evidence["ids"]) == 27
    assert len(related) == 42 and related == sorted(related)
    # into a risk advisory with the related ids; the record validates
    c, parents = linear(3)
    record = checked(build_revision_advisory(
        kind="risk", repo_id="org/model", revision=c[2], parent=c[1], revision_date=None, findings=findings,
        endpoint=ENDPOINT, tracker_url=None, estimate_delta=None, related=related,
        affected_commits=affected_commits(parents, advisory_events("risk", c[2])), now=T1))
    assert record["related"] == related
    assert record["database_specific"]["categories"] == ["dependencies"]


def test_failed_lookups_make_no_findings():
    scan = collect_dependencies(requirements_txt="torch==2.7.1\n")
    assert vulnerability_findings(scan, {}) == ([], [])


def test_unpinned_findings_are_info():
    scan = collect_dependencies(requirements_txt="accelerate>=0.20\n")
    (finding,) = unpinned_findings(scan)
    assert finding.code == "dependencies.unpinned_requirement" and finding.severity is Severity.INFO
    assert finding.summary == "accelerate is not pinned (>=0.20): its vulnerabilities cannot be checked"
