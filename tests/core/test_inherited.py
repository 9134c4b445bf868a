"""Inherited fixes along the model tree, end to end against the stand-in with real polls.

A base fixes ``eos_token_id``; a derivative that copied the old value gets an inherited advisory
until it takes the fix, one that already had the new value gets none, whichever repo is polled first.
"""

from __future__ import annotations

import json

import pytest

from tests.core.conftest import config_json
from tracker.adapters.hub import HubClient
from tracker.app import make_tracker
from tracker.core.advisory import advisory_id, inherited_id, validate
from tracker.core.advisory.record import to_osv
from tracker.core.model import AdvisoryKind, RepoId

BASE = RepoId("acme/base-instruct")
COPY = RepoId("acme/base-instruct-ft")  # copied the base's generation config before the fix
GOOD = RepoId("acme/base-instruct-good")  # already has the fixed value
OLD_EOS, NEW_EOS = 128001, [128001, 128009]


def card(base: str | list[str] | None = None, extra: str = "") -> bytes:
    front = "license: apache-2.0\n" + (f"base_model: {json.dumps(base)}\n" if base is not None else "")
    return f"---\n{front}---\n# Model\n{extra}".encode()


def gen(eos, **more) -> bytes:
    return json.dumps({"bos_token_id": 128000, "eos_token_id": eos, **more}, indent=2).encode()


@pytest.fixture
def repos(hub_standin):
    hub = hub_standin
    for repo in (BASE, COPY, GOOD):
        hub.create_repo(repo)
    r0 = hub.commit(BASE, {"config.json": config_json(), "generation_config.json": gen(OLD_EOS),
                           "README.md": card()}, message="initial")
    c0 = hub.commit(COPY, {"config.json": config_json(), "generation_config.json": gen(OLD_EOS, temperature=0.6),
                           "README.md": card(BASE)}, message="fine-tune")
    g0 = hub.commit(GOOD, {"config.json": config_json(), "generation_config.json": gen(NEW_EOS),
                           "README.md": card([BASE, "acme/other-model"])}, message="fine-tune")
    return hub, r0, c0, g0


@pytest.fixture
def on_db(settings, sleeps, db_url):
    """A Tracker over the stand-in on SQLite and on PostgreSQL (schema created as `tracker init` does)."""
    settings = settings.changed(database={"url": db_url})
    hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout, max_retries=settings.hub.max_retries,
                    max_wait=settings.hub.max_wait, sleep=sleeps)
    return make_tracker(settings, hub=hub, auto_upgrade=True)


def fix_base(hub) -> str:
    return hub.commit(BASE, {"generation_config.json": gen(NEW_EOS)}, message="fix eos")


def by_id(tracker, repo):
    return {a.id: a for a in tracker.store.advisories.find(repo_pk=tracker.repo(repo).pk)}


def check_inherited(tracker, *, r0: str, r1: str, c0: str):
    """The advisory COPY gets for the base's fix at r1, as seen at COPY's revision c0."""
    base_adv = advisory_id(BASE, r1, "update")
    assert set(by_id(tracker, BASE)) == {base_adv}
    expected = inherited_id(COPY, base_adv)
    advisories = by_id(tracker, COPY)
    assert set(advisories) == {expected}
    assert by_id(tracker, GOOD) == {}
    row = advisories[expected]
    record = to_osv(row.record)
    validate(record)
    assert (row.kind, row.revision_sha, row.severity, row.fixed_sha) == (AdvisoryKind.INHERITED, c0, "high", None)
    assert record["summary"] == f"base acme/base-instruct fixed eos_token_id at {r1[:12]}; this repo still has 128001"
    assert record["upstream"] == [base_adv]
    assert record["affected"][0]["package"]["name"].endswith("/acme/base-instruct-ft")
    assert record["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}]
    assert record["affected"][0]["versions"] == [c0]
    ds = record["database_specific"]
    assert (ds["kind"], ds["severity"], ds["categories"], ds["repo_id"], ds["revision"]) == (
        "inherited", "HIGH", ["generation"], COPY, c0)
    assert {k: ds["base"][k] for k in ("repo_id", "revision", "compared_with", "advisory_id")} == {
        "repo_id": BASE, "revision": r1, "compared_with": r0, "advisory_id": base_adv}
    assert [f["code"] for f in ds["base"]["findings"]] == ["generation.eos_token_id_changed"]
    assert [{k: v for k, v in i.items() if not k.endswith("_digest")} for i in ds["items"]] == [
        {"path": "generation_config.json", "key": "eos_token_id", "base_before": OLD_EOS, "base_after": NEW_EOS,
         "value": OLD_EOS}]
    assert f"fixed this at revision [`{r1[:12]}`]" in record["details"]
    # The commit index answers for the derivative's revision.
    assert tracker.query(COPY, c0).vulns[0].id == expected
    return expected


def test_base_fix_gives_the_copy_an_inherited_advisory_closed_when_it_takes_the_fix(repos, on_db):
    hub, r0, c0, g0 = repos
    tracker = on_db
    for repo in (BASE, COPY, GOOD):
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.store.outbox.add_subscription(target=str(COPY), kind="webhook", url="https://alerts.example.org/hf",
                                   secret="whsec_dGVzdA==", min_severity="info", categories=["generation"],
                                   now=tracker.clock())
    tracker.poll()
    # The cards' base_model (a string, a list: its first) is recorded as the relation.
    assert [tracker.repo(r).base_repo_id for r in (BASE, COPY, GOOD)] == [None, BASE, BASE]
    assert tracker.store.advisories.find() == []

    r1 = fix_base(hub)
    tracker.poll([BASE])  # the base's report carries the derivative's advisory
    expected = check_inherited(tracker, r0=r0, r1=r1, c0=c0)
    assert [(d.event_type, d.advisory_id, d.repo_id, d.severity) for d in tracker.store.outbox.list_deliveries()] == [
        ("advisory.created", expected, COPY, "high")]

    # A revision that does not take the fix is affected too; one that takes it closes the advisory.
    c1 = hub.commit(COPY, {"README.md": card(BASE, "Better words.\n")}, message="docs")
    tracker.poll([COPY])
    assert to_osv(by_id(tracker, COPY)[expected].record)["affected"][0]["versions"] == sorted([c0, c1])
    assert by_id(tracker, COPY)[expected].fixed_sha is None
    c2 = hub.commit(COPY, {"generation_config.json": gen(NEW_EOS, temperature=0.6)}, message="take the eos fix")
    tracker.poll([COPY])
    row = by_id(tracker, COPY)[expected]
    validate(to_osv(row.record))
    assert row.fixed_sha == c2
    assert to_osv(row.record)["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}, {"fixed": c2}]
    assert to_osv(row.record)["affected"][0]["versions"] == sorted([c0, c1])
    assert tracker.query(COPY, c2).vulns == []
    own_fix = advisory_id(COPY, c2, "update")  # the derivative's own change, as any repo's
    assert sorted(v.id for v in tracker.query(COPY, c1).vulns) == sorted([expected, own_fix])
    assert [(d.event_type, d.advisory_id) for d in tracker.store.outbox.list_deliveries()] == [
        ("advisory.created", expected), ("advisory.created", own_fix), ("advisory.updated", expected)]
    # Nothing more on later polls, and none for the derivative that had the fix.
    tracker.poll()
    assert set(by_id(tracker, COPY)) == {expected, own_fix} and by_id(tracker, GOOD) == {}


def test_derivative_polled_first_after_the_fix_gets_the_same_advisory(repos, on_db):
    hub, r0, c0, g0 = repos
    tracker = on_db
    tracker.store.repos.add(BASE, now=tracker.clock())
    tracker.poll([BASE])
    r1 = fix_base(hub)
    tracker.poll([BASE])
    for repo in (COPY, GOOD):
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll([COPY, GOOD])  # each derivative's first revision is checked against the base's updates
    expected = check_inherited(tracker, r0=r0, r1=r1, c0=c0)

    c1 = hub.commit(COPY, {"generation_config.json": gen(7, temperature=0.6)}, message="an eos of its own")
    tracker.poll([COPY])
    assert by_id(tracker, COPY)[expected].fixed_sha == c1  # no longer the old value: closed too


def test_a_fix_in_a_file_the_derivative_does_not_carry_gives_nothing(hub_standin, settings, make):
    hub = hub_standin
    hub.create_repo(BASE)
    hub.create_repo(COPY)
    hub.commit(BASE, {"generation_config.json": gen(OLD_EOS), "README.md": card()}, message="initial")
    hub.commit(COPY, {"model.gguf.txt": b"weights", "README.md": card(BASE)}, message="a conversion")
    tracker = make(settings)
    for repo in (BASE, COPY):
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    r1 = fix_base(hub)
    tracker.poll()
    assert set(by_id(tracker, BASE)) == {advisory_id(BASE, r1, "update")}
    assert by_id(tracker, COPY) == {}


def test_a_template_file_is_compared_by_content(hub_standin, settings, make):
    hub = hub_standin
    hub.create_repo(BASE)
    hub.create_repo(COPY)
    old = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
    new = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
    files = {"tokenizer_config.json": b'{"bos_token": "<s>", "eos_token": "<|end|>"}', "chat_template.jinja": old}
    hub.commit(BASE, {**files, "README.md": card()}, message="initial")
    c0 = hub.commit(COPY, {**files, "README.md": card(BASE)}, message="copy")
    tracker = make(settings)
    for repo in (BASE, COPY):
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    r1 = hub.commit(BASE, {"chat_template.jinja": new}, message="close every turn")
    tracker.poll()
    (base_adv,) = by_id(tracker, BASE).values()
    assert base_adv.kind == "update"
    (row,) = by_id(tracker, COPY).values()
    assert row.id == inherited_id(COPY, base_adv.id)
    assert to_osv(row.record)["summary"] == (f"base acme/base-instruct fixed chat_template.jinja at {r1[:12]}; "
                                     "this repo still has the old file")
    assert to_osv(row.record)["affected"][0]["versions"] == [c0]
    assert to_osv(row.record)["database_specific"]["categories"] == ["chat_template"]
    c1 = hub.commit(COPY, {"chat_template.jinja": new}, message="take the template fix")
    tracker.poll([COPY])
    assert by_id(tracker, COPY)[row.id].fixed_sha == c1


def test_the_relation_follows_the_card(hub_standin, settings, make):
    hub = hub_standin
    hub.create_repo(COPY)
    hub.commit(COPY, {"README.md": card(BASE)}, message="initial")
    tracker = make(settings)
    tracker.store.repos.add(COPY, now=tracker.clock())
    tracker.poll()
    assert tracker.repo(COPY).base_repo_id == BASE
    hub.commit(COPY, {"README.md": card("acme/another-base")}, message="rebased")
    tracker.poll()
    assert tracker.repo(COPY).base_repo_id == "acme/another-base"
    hub.commit(COPY, {"README.md": "---\nlicense: mit\n---\n"}, message="no base any more")
    tracker.poll()
    assert tracker.repo(COPY).base_repo_id is None
    hub.commit(COPY, {"README.md": card("not a repo id")}, message="a base that is no repo")
    tracker.poll()
    assert tracker.repo(COPY).base_repo_id is None


# -- tracker watch add --with-base ----------------------------------------------------------------


def listed(cli):
    return {r["repo"] for r in json.loads(cli("watch", "list", "--json").output)}


def test_with_base_watches_the_chain(cli, hub_standin, tmp_path):
    hub = hub_standin
    chain = ["acme/quant", "acme/fine-tune", "acme/base"]
    for repo, base in zip(chain, [*chain[1:], None], strict=True):
        hub.create_repo(repo)
        hub.commit(repo, {"README.md": card(base)}, message="card")
    result = cli("watch", "add", "acme/quant", "--with-base", "--every", "1h")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "watching acme/quant (main, every 1h)",
        "watching acme/fine-tune as the base of acme/quant",
        "watching acme/base as the base of acme/fine-tune",
    ]
    assert listed(cli) == set(chain)
    from tracker.adapters.store import open_store

    store = open_store(f"sqlite:///{tmp_path}/t.sqlite3")
    assert {r.repo_id: r.base_repo_id for r in store.repos.all()} == {
        "acme/quant": "acme/fine-tune", "acme/fine-tune": "acme/base", "acme/base": None}
    assert {r.repo_id: r.every_seconds for r in store.repos.all()} == {r: 3600.0 for r in chain}
    # Again: nothing new, the bases keep their settings.
    result = cli("watch", "add", "acme/quant", "--with-base")
    assert result.stdout.splitlines()[1:] == ["already watching acme/fine-tune as the base of acme/quant",
                                              "already watching acme/base as the base of acme/fine-tune"]


@pytest.mark.parametrize(
    ("cards", "error", "watched"),
    [
        ({"acme/a": "acme/b", "acme/b": "acme/a"},
         "error: acme/b: base_model acme/a makes a cycle (acme/a -> acme/b -> acme/a); not followed",
         {"acme/a", "acme/b"}),
        ({"acme/a": "acme/a"}, "error: acme/a: its card names itself (acme/a) as its base_model; its base is not "
                               "watched", {"acme/a"}),
        ({"acme/a": "llama-3"}, "error: acme/a: its card's base_model is not usable: invalid repo id 'llama-3': "
                                "expected exactly one '/' as in 'owner/name'; its base is not watched", {"acme/a"}),
        ({"acme/a": 7}, "error: acme/a: its card's base_model is a int, not a repo id; its base is not watched",
         {"acme/a"}),
        ({"acme/a": "acme/missing"}, None, {"acme/a"}),
    ],
)
def test_with_base_refuses_cycles_and_invalid_ids(cli, hub_standin, cards, error, watched):
    for repo, base in cards.items():
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"README.md": card(base)}, message="card")
    result = cli("watch", "add", "acme/a", "--with-base")
    assert result.exit_code == 1
    if error is None:
        assert result.stderr.startswith("error: acme/a: base_model acme/missing is not on the Hub (")
        assert result.stderr.endswith("); not watched\n") and result.stderr.count("\n") == 1
    else:
        assert result.stderr == error + "\n"
    assert listed(cli) == watched


def test_with_base_stops_after_four_levels(cli, hub_standin):
    chain = [f"acme/level-{i}" for i in range(7)]
    for repo, base in zip(chain, [*chain[1:], None], strict=True):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"README.md": card(base)}, message="card")
    result = cli("watch", "add", "acme/level-0", "--with-base")
    assert result.exit_code == 0
    assert result.stderr == ("note: acme/level-4 declares base_model acme/level-5: not followed, the chain is "
                             "limited to 4 levels\n")
    assert listed(cli) == set(chain[:5])


def test_with_base_on_a_repo_without_a_card(cli, hub_standin):
    hub_standin.create_repo("acme/bare")
    hub_standin.commit("acme/bare", {"config.json": b"{}"}, message="no card")
    result = cli("watch", "add", "acme/bare", "--with-base")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "watching acme/bare (main, every 2h)\n", "")
