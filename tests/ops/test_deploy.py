"""deploy/: no container engine, cluster or systemd here, so the files are parsed and checked."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tracker.adapters.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"


def manifests() -> dict[str, dict]:
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out[f"{doc['kind']}/{doc.get('metadata', {}).get('name', path.stem)}"] = doc
    return out


def test_every_yaml_file_loads():
    files = sorted(DEPLOY.rglob("*.yaml"))
    assert {p.relative_to(DEPLOY).as_posix() for p in files} == {
        "compose.yaml", "kubernetes/configmap.yaml", "kubernetes/deployment.yaml", "kubernetes/kustomization.yaml",
        "kubernetes/migrate-job.yaml", "kubernetes/secret.example.yaml", "kubernetes/service.yaml"}
    for path in files:
        assert list(yaml.safe_load_all(path.read_text())), path


def test_the_deployment_runs_several_non_root_replicas_with_probes_on_healthz_and_readyz():
    found = manifests()
    assert set(found) == {"ConfigMap/upstream-tracker", "Deployment/upstream-tracker", "Job/upstream-tracker-migrate",
                          "Secret/upstream-tracker", "Service/upstream-tracker", "Kustomization/kustomization"}
    deployment = found["Deployment/upstream-tracker"]
    spec = deployment["spec"]
    assert spec["replicas"] >= 2
    pod = spec["template"]["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
    assert container["args"] == ["tracker", "run", "--host", "0.0.0.0", "--port", str(port)]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    # The database URL and the tokens come from the Secret; the config from the ConfigMap.
    assert container["envFrom"] == [{"secretRef": {"name": "upstream-tracker"}}]
    secret = found["Secret/upstream-tracker"]
    assert set(secret["stringData"]) == {"TRACKER_DATABASE_URL", "HF_TOKEN", "TRACKER_WEBHOOK_SECRET"}
    assert secret["stringData"]["TRACKER_DATABASE_URL"].startswith("postgresql+psycopg://")
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[str(Path(env["TRACKER_CONFIG"]).parent)] == "config"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "upstream-tracker"
    assert env["TRACKER_LOG_FORMAT"] == "json"
    assert pod["terminationGracePeriodSeconds"] >= 60
    service = found["Service/upstream-tracker"]
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    job = found["Job/upstream-tracker-migrate"]["spec"]["template"]["spec"]
    assert job["containers"][0]["command"] == ["tracker", "init"]
    assert job["securityContext"]["runAsNonRoot"] is True
    assert found["Kustomization/kustomization"]["resources"] == ["configmap.yaml", "deployment.yaml", "service.yaml"]


def test_the_configs_load(tmp_path):
    configmap = manifests()["ConfigMap/upstream-tracker"]
    (tmp_path / "k8s.toml").write_text(configmap["data"]["tracker.toml"])
    for path in (DEPLOY / "tracker.toml", tmp_path / "k8s.toml"):
        settings = load_settings(path, env={})
        assert (settings.poll.every, settings.api.read_requires_token, settings.watch) == (3600.0, False, ())


def test_the_dockerfile_installs_without_e_and_runs_as_a_user():
    text = (DEPLOY / "Dockerfile").read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith(("#", " "))]
    pip_lines = [line for line in text.splitlines() if "pip install" in line or "pip wheel" in line]
    assert pip_lines and not any(re.search(r"\s(-e|--editable)\b", line) for line in pip_lines)
    users = [line.split()[1] for line in instructions if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    last_from = max(i for i, line in enumerate(instructions) if line.startswith("FROM "))
    assert any(line.startswith("USER ") for line in instructions[last_from:])
    assert "COPY setup.py" in text or "COPY pyproject.toml setup.py" in text  # setup.py ships the migrations
    assert 'CMD ["tracker", "run", "--host", "0.0.0.0", "--port", "8080"]' in text
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M)
    allowed = (ROOT / ".dockerignore").read_text().splitlines()
    for sources in copied:
        for source in sources.split():
            assert f"!{source.rstrip('/')}" in [a.rstrip("/") for a in allowed], source


def test_the_compose_file_runs_postgres_then_init_then_the_tracker():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"db", "init", "tracker"}
    assert services["db"]["image"].startswith("postgres:")
    assert services["init"]["command"] == ["tracker", "init"]
    assert services["tracker"]["depends_on"] == {"db": {"condition": "service_healthy"},
                                                 "init": {"condition": "service_completed_successfully"}}
    for name in ("init", "tracker"):
        assert services[name]["environment"]["TRACKER_DATABASE_URL"].startswith("postgresql+psycopg://tracker:")
    assert services["init"]["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert services["tracker"]["read_only"] is True and services["tracker"]["cap_drop"] == ["ALL"]


def test_the_systemd_unit_has_the_expected_keys():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # systemd keys are case-sensitive
    unit.read_string((DEPLOY / "tracker.service").read_text())
    assert set(unit.sections()) == {"Unit", "Service", "Install"}
    service = unit["Service"]
    for key in ("User", "ExecStartPre", "ExecStart", "EnvironmentFile", "Restart", "KillSignal", "TimeoutStopSec",
                "NoNewPrivileges", "ProtectSystem", "StateDirectory"):
        assert key in service, key
    assert service["User"] not in ("root", "0")
    assert service["ExecStart"].endswith("/bin/tracker run")
    assert service["ExecStartPre"].endswith("/bin/tracker init")
    assert service["KillSignal"] == "SIGTERM"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert "network-online.target" in unit["Unit"]["After"]
    assert "pip install -e" not in (DEPLOY / "tracker.service").read_text()


@pytest.mark.slow
def test_a_wheel_ships_the_migrations_and_its_installed_layout_migrates(tmp_path):
    """A non-editable install finds tracker/migrations inside the package, not the source tree's."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("tracker", "migrations"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("upstream_tracker-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    versions = sorted(p.name for p in (ROOT / "migrations" / "versions").glob("0*.py"))
    assert sorted(n.split("/")[-1] for n in names if n.startswith("tracker/migrations/versions/")) == versions
    assert "tracker/migrations/env.py" in names and "tracker/migrations/script.py.mako" in names
    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    probe = ("import tracker, tracker.adapters.store.db as db\n"
             "from tracker.adapters.store import open_store\n"
             "print(tracker.__file__); print(db.migrations_dir())\n"
             f"open_store('sqlite:///{tmp_path}/t.sqlite3').close()\n"
             f"print(db.schema_status(db.make_engine('sqlite:///{tmp_path}/t.sqlite3')))\n")
    ran = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(installed)})
    assert ran.returncode == 0, ran.stderr
    module, folder, status = ran.stdout.splitlines()
    assert module == f"{installed}/tracker/__init__.py"
    assert folder == f"{installed}/tracker/migrations"
    head = versions[-1].split("_")[0]
    assert status == f"('{head}', '{head}')"
