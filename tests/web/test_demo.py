"""`tracker demo`: started as a newcomer would, in a subprocess; its pages answer; Ctrl-C stops it cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from tests.waiting import wait_for
from tests.web.conftest import free_port
from tracker.surfaces.web.demo import REPO


def test_tracker_demo_serves_the_pages_over_the_scripted_history_and_stops_on_ctrl_c():
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "demo", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said: list[str] = []
    threading.Thread(target=lambda: [said.append(line.rstrip("\n")) for line in proc.stdout], daemon=True).start()
    try:
        # The demo plays its history first: a condition to wait for (bounded), not a time to beat.
        wait_for(lambda: proc.poll() is not None or any(line.startswith("Open ") for line in said), timeout=600)
        assert proc.poll() is None, said
        assert any(line.startswith("Open ") for line in said), said
        shown = said[:[line.startswith("Open ") for line in said].index(True) + 1]  # up to the invitation
        url = f"http://127.0.0.1:{port}"
        assert shown[-1] == f"Open {url}/  (the repo: {url}/repos/{REPO}; its feed: {url}/feeds/{REPO}.atom)"
        assert shown[1:6] == [f"Playing the history of {REPO} (4 revisions), polling after each:",
                             f"  {REPO}: baseline, 1 new revision(s), 1 analysed",
                             f"  {REPO}: new, 1 new revision(s), 1 analysed",
                             f"  {REPO}: new, 1 new revision(s), 1 analysed",
                             f"  {REPO}: new, 1 new revision(s), 1 analysed"]
        alerts = [line.split(" x_HFUT-")[0] for line in shown if line.startswith("alert")]
        # the template change (update), then the longer context's risk (the pickle) and update, in outbox order
        # (weights re-uploaded in place make the last one critical)
        assert alerts == ["alert (signature verified): advisory.created [high]",
                          "alert (signature verified): advisory.created [moderate]",
                          "alert (signature verified): advisory.created [critical]"]
        index = httpx.get(f"{url}/", timeout=60)
        assert index.status_code == 200
        assert f'<a class="repo" href="/repos/{REPO}">{REPO}</a>' in index.text
        repo = httpx.get(f"{url}/repos/{REPO}", timeout=60)
        assert repo.status_code == 200
        assert repo.text.count('<li class="revision"') == 4
        feed = httpx.get(f"{url}/feeds/{REPO}.atom", timeout=60)
        assert feed.status_code == 200 and feed.text.count("<entry>") == 3
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert rc == 0
    database = Path(said[0].split("tracker database ")[1])
    assert not database.parent.exists()  # the temporary directory is removed


def test_tracker_demo_without_the_stand_in_says_how_to_install_it(tmp_path):
    # Hide hubstandin behind a module that fails to import, as after `pip install -e .` alone.
    (tmp_path / "hubstandin").mkdir()
    (tmp_path / "hubstandin" / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")},
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "tracker", "demo", "--port", "0"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == ("error: the demo needs the local Hub stand-in: pip install -e ./standin "
                             "(from a checkout of upstream-tracker)\n")


def test_tracker_demo_on_a_port_in_use_says_so_in_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "tracker", "demo", "--port", str(port)], capture_output=True,
                                text=True, timeout=60)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"error: cannot serve on 127.0.0.1:{port} (Address already in use): pass --port\n"


def test_tracker_demo_keep_says_how_to_reuse_what_it_kept_and_serves_it_again(tmp_path):
    kept = tmp_path / "kept"
    script = ("import sys; from pathlib import Path; from tracker.surfaces.web.demo import run_demo; "
              "run_demo(port=0, keep=Path(sys.argv[1]), serve=False)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    runs = [subprocess.run([sys.executable, "-c", script, str(kept)], env=env, capture_output=True, text=True,
                           timeout=600) for _ in range(2)]
    assert [(r.returncode, r.stderr) for r in runs] == [(0, ""), (0, "")], runs
    first, again = (r.stdout.splitlines() for r in runs)
    reuse = (f"kept in {kept}: the stand-in's repos ({kept / 'hub'}) and the database ({kept / 'tracker.sqlite3'}). "
             f"`tracker demo --keep {kept}` serves them again; or run `python -m hubstandin --root {kept / 'hub'}` "
             f"and point the tracker at both: TRACKER_DATABASE_URL=sqlite:///{kept / 'tracker.sqlite3'} "
             "HF_ENDPOINT=http://127.0.0.1:8765 tracker serve")
    assert first[1] == f"Playing the history of {REPO} (4 revisions), polling after each:" and first[-1] == reuse
    assert again[1:] == [f"Reusing the demo kept in {kept}: its history was played before", reuse]
