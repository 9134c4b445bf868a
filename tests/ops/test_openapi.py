"""schemathesis against the app's own OpenAPI document, in process: no request makes it answer 5xx.

Every operation the document describes (OSV queries, feeds, the Hub hook, repos, readiness, metrics, the
authenticated writes) gets generated requests, valid and not; the writes carry a valid token so their
bodies are exercised too. Bounded (``MAX_EXAMPLES`` per operation) so it stays fast.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance, status_code_conformance

from tests.core.conftest import config_json
from tracker.surfaces.api import create_app

MAX_EXAMPLES = 12
# The routes of tracker/surfaces/api_repos.py, api_ops.py and api_writes.py must also answer as documented (status codes, bodies).
OURS = {"/v1/repos", "/v1/repos/{owner}/{name}/revisions", "/v1/repos/{owner}/{name}/diff",
        "/v1/repos/{owner}/{name}/estimate", "/readyz", "/metrics", "/v1/watch", "/v1/watch/{owner}/{name}",
        "/v1/subscriptions", "/v1/subscriptions/{subscription_id}"}
FULL = [not_a_server_error, response_schema_conformance, status_code_conformance]
REPO = "acme/chat-model"


@pytest.fixture
def app_and_token(hub_standin, settings, make):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 2}'})
    tracker = make(settings, hub={"max_retries": 0})
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": 3}'})
    tracker.poll()
    token = tracker.store.tokens.create("schemathesis", now=tracker.clock())
    return create_app(tracker, webhook_secret="s3cret"), token


def exercise(operation, checks, token: str) -> None:
    """Generated requests to one operation, each answer checked."""

    @given(case=operation.as_strategy())
    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case):
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        case.validate_response(response, checks=checks)

    check()


def test_no_request_makes_the_api_fail(app_and_token):
    """Each operation in turn (schemathesis' own pytest loader does not run on pytest 9: it reads a private
    attribute pytest no longer has), every failure collected so one run names them all."""
    app, token = app_and_token
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        try:
            exercise(operation, FULL if operation.path in OURS else [not_a_server_error], token)
        except (Exception, BaseExceptionGroup) as exc:  # collected, reported below
            failures.append(f"{operation.label}: {exc}")
    assert operations >= 15
    assert failures == []


def test_the_document_describes_every_route(app_and_token):
    paths = app_and_token[0].openapi()["paths"]
    for path in ("/v1/repos", "/v1/repos/{owner}/{name}/revisions", "/v1/repos/{owner}/{name}/diff",
                 "/v1/repos/{owner}/{name}/estimate", "/healthz", "/readyz", "/metrics", "/v1/watch",
                 "/v1/watch/{owner}/{name}", "/v1/subscriptions", "/v1/subscriptions/{subscription_id}",
                 "/v1/query", "/v1/querybatch", "/v1/vulns/{vuln_id}", "/hooks/hub"):
        assert path in paths, path
    assert paths["/v1/watch"]["post"]["security"] == [{"token": []}]
    assert set(paths["/v1/watch"]["post"]["responses"]) >= {"201", "400", "401"}
    assert paths["/v1/repos/{owner}/{name}/diff"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
