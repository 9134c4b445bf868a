"""The README's API examples, run as written: curl against a live server over the polled demo history.

Only the placeholders (``localhost:8080``, ``acme/model``, ``<40-hex sha>``, ``<sha>`` and the sample
advisory id) are replaced by the live server's address and real values; the flags stay as printed,
so curl sends its default form content type, as a reader's copy-paste would.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.web.conftest import History
from tracker.core.advisory.record import to_osv
from tracker.surfaces.web.demo import REPO

ROOT = Path(__file__).resolve().parents[2]
CURL = shutil.which("curl")


def readme_curls() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip().startswith("curl -s localhost:8080/")]


def as_run(line: str, history: History) -> list[str]:
    port = history.url.rsplit(":", 1)[1]
    values = {"localhost:8080": f"127.0.0.1:{port}", "acme/model": REPO, "<40-hex sha>": history.readme,
              "<sha>": history.readme, "x_HFUT-abcd-efgh-ijkl": history.advisory(history.template, "update")}
    for placeholder, value in values.items():
        line = line.replace(placeholder, value)
    return shlex.split(line)


def test_the_readme_shows_the_four_api_examples():
    assert [re.sub(r" -d .*", "", line) for line in readme_curls()] == [
        "curl -s localhost:8080/v1/query", "curl -s localhost:8080/v1/query", "curl -s localhost:8080/v1/querybatch",
        "curl -s localhost:8080/v1/vulns/x_HFUT-abcd-efgh-ijkl"]


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_each_readme_api_example_answers_as_written(history: History):
    update = history.advisory(history.template, "update")
    record = to_osv(history.tracker.store.advisories.get(update).record)
    answers = []
    for line in readme_curls():
        done = subprocess.run(as_run(line, history), capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, (line, done.stderr)
        answers.append(json.loads(done.stdout))
    by_package, by_commit, batch, vuln = answers
    # The README revision lacks both later fixes (the eos id, then the longer context): both updates
    # affect it; the pickle risk at the last revision does not.
    fixes = sorted([update, history.advisory(history.context, "update")])
    assert sorted(v["id"] for v in by_package["vulns"]) == fixes
    assert sorted(v["id"] for v in by_commit["vulns"]) == fixes
    assert sorted(v["id"] for v in batch["results"][0]["vulns"]) == fixes and len(batch["results"]) == 1
    assert vuln == record


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_a_form_typed_body_that_is_not_json_is_a_clear_400(history: History):
    port = history.url.rsplit(":", 1)[1]
    done = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", f"127.0.0.1:{port}/v1/query", "-d", "commit=abc"],
                          capture_output=True, text=True, timeout=30)
    body, status = done.stdout.rsplit("\n", 1)
    assert (status, json.loads(body)) == ("400", {"code": 3, "message": "the request body is not JSON"})
