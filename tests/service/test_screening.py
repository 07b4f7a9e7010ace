"""Agent text carrying a secret is refused through the real API, on both backends, with the
field, kind and encoding named and nothing of the secret kept (service/screening.py)."""

from __future__ import annotations

import base64
import functools
import logging
import secrets
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agentc.store.schema import metadata
from agentc.store.tx import Tx
from tests.client.kit import admin_project
from tests.core import kit
from tests.service.kit import ApiError, Caller, Service, claim, evidence

CREDENTIAL = "an agent credential of this coordinator"
PROOF = "an agent session proof of this coordinator"
BROWSER = "a browser session of this coordinator"


def _token(caller: Caller) -> str:
    return caller.headers["Authorization"].removeprefix("Bearer ")


def _everything(svc: Service) -> str:
    """Every row of every table, as text: what the database keeps."""

    def dump(tx: Tx) -> str:
        return "\n".join(
            repr(row) for table in metadata.sorted_tables for row in tx.conn.execute(select(table))
        )

    return svc.executor.read(dump)


def _refusal(call: Callable[[], Any]) -> dict[str, Any]:
    with pytest.raises(ApiError) as refused:
        call()
    assert refused.value.status == 422, refused.value.body
    error: dict[str, Any] = refused.value.body["error"]
    return error


class Attempt:
    """A project, a task and an agent holding its attempt."""

    def __init__(self, svc: Service, **policy: Any) -> None:
        self.svc = svc
        self.pid = svc.project(**policy)
        self.task = svc.task(self.pid, kind="general")
        self.agent = svc.agent(self.pid)
        self.attempt = claim(self.agent, self.pid, self.task)["claim"]["attempt"]

    def path(self, suffix: str) -> str:
        return f"/api/v1/projects/{self.pid}/attempts/{self.attempt['id']}/{suffix}"

    def checkpoint(self, key: str | None = None, **fields: Any) -> Any:
        body = {"generation": self.attempt["generation"], "summary": "working", **fields}
        return self.agent.post(self.path("checkpoints"), body, key=key)


@pytest.mark.parametrize("name", sorted(kit.ENCODINGS))
def test_an_agents_own_token_is_refused_in_each_encoding(svc: Service, name: str) -> None:
    """Through the lease lane (a checkpoint); the same key then carries the clean request. The
    request's own token is found as it is; another agent's by its verifier."""
    held = Attempt(svc)
    encode, label = kit.ENCODINGS[name]
    token = _token(held.agent)
    sent = encode(token)
    before = _everything(svc)
    error = _refusal(lambda: held.checkpoint(key="k-1", handoff=f"resume with {sent}"))
    assert error["code"] == "secret_detected"
    assert error["details"] == {"field": "handoff", "kind": CREDENTIAL, "encoding": label}
    assert error["message"].startswith(f"handoff: carries {CREDENTIAL} (")
    assert token not in str(error) and sent not in str(error)
    after = _everything(svc)
    assert after == before  # no checkpoint, receipt or event: nothing of it is kept
    assert token not in after and sent not in after
    # Refusals store no receipt: the same key may carry the fixed request.
    assert held.checkpoint(key="k-1", handoff="resume from the last commit")["attempt"]
    # Another agent's live credential is found by its verifier, in the same encodings.
    other = _token(svc.agent(held.pid))
    error = _refusal(lambda: held.checkpoint(handoff=f"resume with {encode(other)}"))
    assert error["details"] == {"field": "handoff", "kind": CREDENTIAL, "encoding": label}


def test_each_live_secret_is_refused_by_kind(svc: Service) -> None:
    held = Attempt(svc)
    other = svc.agent(held.pid)
    proof = held.agent.headers["X-Coordinator-Session-Proof"]
    cookie = svc.admin.cookies["coordinator_local"]
    for secret, kind in (
        (_token(held.agent), CREDENTIAL),
        (proof, PROOF),
        (_token(other), CREDENTIAL),
        (other.headers["X-Coordinator-Session-Proof"], PROOF),
        (cookie, BROWSER),
    ):
        error = _refusal(functools.partial(held.checkpoint, summary=f"found {secret}"))
        assert (error["details"]["field"], error["details"]["kind"]) == ("summary", kind)


def test_the_requests_own_secrets_are_found_glued_and_in_any_shape(svc: Service) -> None:
    """Its own token glued to hex digits (no longer token-shaped, so no verifier finds it),
    and a session proof the client made in another shape than hex, encoded."""
    held = Attempt(svc)
    token = _token(held.agent)
    error = _refusal(lambda: held.checkpoint(handoff=f"0{token}f"))
    assert error["details"] == {"field": "handoff", "kind": CREDENTIAL, "encoding": "plain"}
    agent = svc.agent(held.pid, session=False)
    proof = "Proof~" + secrets.token_urlsafe(40)
    opened = agent.raw(
        "POST",
        "/api/v1/sessions",
        {"harness": "test"},
        headers={"X-Coordinator-Session-Proof": proof},
    )
    assert opened.status_code == 201, opened.text
    agent.headers["X-Coordinator-Session"] = opened.json()["data"]["session_id"]
    agent.headers["X-Coordinator-Session-Proof"] = proof
    encoded = base64.b64encode(f"proof: {proof}".encode()).decode()
    body = {"title": "t", "description": encoded, "acceptance_criteria": ["x"]}
    error = _refusal(lambda: agent.post(f"/api/v1/projects/{held.pid}/tasks", body))
    assert error["details"] == {"field": "description", "kind": PROOF, "encoding": "base64(text)"}
    assert proof not in _everything(svc) and encoded not in _everything(svc)


def test_dead_sessions_and_other_hex_strings_pass(svc: Service) -> None:
    """A closed session's proof, an ended browser session and any other 64-hex string (a
    SHA-256 commit id) are no live secret; a revoked credential is still refused (a launch's
    is revoked when the launch ends, before the loop sends on what it printed)."""
    held = Attempt(svc)
    gone = svc.agent(held.pid)
    token, proof = _token(gone), gone.headers["X-Coordinator-Session-Proof"]
    person = svc.person(held.pid)
    cookie = person.cookies["coordinator_local"]
    person.post("/api/v1/auth/logout")
    svc.admin.post(f"/api/v1/admin/credentials/{gone.issued['credential_id']}/revoke")
    text = f"{proof} {cookie} {kit.token()}"
    assert held.checkpoint(summary=text, revision=kit.token())["attempt"]
    error = _refusal(lambda: held.checkpoint(summary=f"old notes: {token}"))
    assert error["details"]["field"] == "summary" and token not in str(error)


@pytest.mark.parametrize("kind", sorted(kit.FORMATS))
def test_each_secret_format_is_refused(svc: Service, kind: str) -> None:
    held = Attempt(svc)
    secret = kit.FORMATS[kind]()
    error = _refusal(lambda: held.checkpoint(current_action=f"using {secret}"))
    assert error["details"] == {"field": "current_action", "kind": kind, "encoding": "plain"}
    assert secret not in str(error) and secret not in _everything(svc)
    encoded = base64.b64encode(secret.encode()).decode()
    error = _refusal(lambda: held.checkpoint(next_step=encoded))
    assert error["details"]["encoding"] == "base64(text)"


def test_every_agent_mutation_is_screened(svc: Service) -> None:
    """Task creation, session opening, telemetry, release, submission evidence, review
    findings and the Idempotency-Key: each refusal names its field."""
    held = Attempt(svc, review_mode="agent")
    agent, pid, gen = held.agent, held.pid, held.attempt["generation"]
    b64 = base64.b64encode(_token(agent).encode()).decode()
    cases: list[tuple[Callable[[], Any], str]] = [
        (
            lambda: agent.post(
                f"/api/v1/projects/{pid}/tasks",
                {"title": "t", "description": b64, "acceptance_criteria": ["x"]},
            ),
            "description",
        ),
        (
            lambda: agent.post("/api/v1/sessions", {"harness": "h", "capabilities": [b64]}),
            "capabilities.0",
        ),
        (
            lambda: agent.post(
                f"/api/v1/projects/{pid}/telemetry/cost-rows",
                {"host": "h", "rows": [{"model": "m", "notes": {"tail": b64}}]},
            ),
            "rows.0.notes.tail",
        ),
        (lambda: agent.post(held.path("release"), {"generation": gen, "handoff": b64}), "handoff"),
        (
            lambda: agent.post(
                held.path("submissions"),
                {
                    "generation": gen,
                    "kind": "general",
                    "summary": "done",
                    "acceptance_evidence": [{"criterion": "it works", "evidence": b64}],
                },
            ),
            "acceptance_evidence.0.evidence",
        ),
        (lambda: held.checkpoint(key=f"retry-{b64}"), "Idempotency-Key"),
    ]
    for call, field in cases:
        error = _refusal(call)
        assert (error["code"], error["details"]["field"]) == ("secret_detected", field), error
    sub = agent.post(
        held.path("submissions"),
        {"generation": gen, "kind": "general", "summary": "done",
         "acceptance_evidence": evidence(["it works"])},
    )  # fmt: skip
    reviewer = svc.agent(pid)
    activity = sub["activities"][0]["id"]
    review = f"/api/v1/projects/{pid}/workflow-activities/{activity}"
    rc = reviewer.post(f"{review}/claim", {"expected_submission_id": sub["submission"]["id"]})
    verdict = {
        "generation": rc["attempt"]["generation"],
        "submission_id": sub["submission"]["id"],
        "decision": "changes_requested",
        "summary": "see the findings",
        "findings": [{"severity": "required", "remedy": f"stop printing {_token(reviewer)}"}],
    }
    error = _refusal(lambda: reviewer.post(f"{review}/review", verdict))
    assert error["details"]["field"] == "findings.0.remedy"
    error = _refusal(
        lambda: reviewer.post(
            f"{review}/release", {"generation": rc["attempt"]["generation"], "summary": b64}
        )
    )
    assert error["details"]["field"] == "summary"


def test_a_key_of_free_form_json_is_named_only_when_it_is_a_plain_name(svc: Service) -> None:
    held = Attempt(svc)
    host = svc.agent(held.pid, credential_class="supervised", session=False)
    path = f"/api/v1/projects/{held.pid}/telemetry/cost-rows"
    token = _token(held.agent)
    for row, field in (
        ({token: "x"}, "rows.0 (a key)"),
        ({"odd key!": token}, "rows.0.*"),
        ({"model": {"name": token}}, "rows.0.model.name"),
    ):
        error = _refusal(functools.partial(host.post, path, {"host": "h", "rows": [row]}))
        assert error["details"]["field"] == field
        assert token not in str(error)


def test_an_unknown_field_named_with_a_secret_is_refused_without_it(svc: Service) -> None:
    """Validation comes before the screen; its refusal names an odd key as ``*``."""
    held = Attempt(svc)
    token = _token(held.agent)
    error = _refusal(lambda: held.checkpoint(**{token: "x"}))
    assert error["code"] == "invalid_input"
    assert error["message"] == "*: unknown field"
    assert token not in str(error)
    error = _refusal(lambda: held.checkpoint(odd_but_plain="x"))
    assert error["message"] == "odd_but_plain: unknown field"


def test_people_are_not_screened(svc: Service) -> None:
    """A person may quote anything (an operator pasting a key into a task is theirs to do)."""
    pid = svc.project()
    secret = kit.FORMATS["a GitHub token"]()
    token = _token(svc.agent(pid))
    task = svc.task(pid, description=f"rotate {secret} and {token}")
    assert task["id"]


def test_too_many_token_shaped_strings_are_refused(svc: Service) -> None:
    """Their verifiers are looked up in one query with a bounded list: past 256 strings (each
    checked as written and reversed) the request is refused, naming where the count ran out."""
    held = Attempt(svc)
    path = f"/api/v1/projects/{held.pid}/telemetry/cost-rows"

    def report(count: int) -> Any:
        rows = [{"model": "m", "revision": kit.token()} for _ in range(count)]
        return held.agent.post(path, {"host": "h", "rows": rows})

    error = _refusal(lambda: report(300))
    assert error["code"] == "invalid_input"
    assert error["details"] == {"field": "rows.256.revision"}
    assert "more than 256 token-shaped strings" in error["message"]
    out = report(200)  # screened and looked up in one query: through to the operation
    assert out["accepted"] + out["duplicates"] + len(out["rejected"]) == 200


def test_nothing_of_a_refused_secret_is_logged(
    svc: Service, caplog: pytest.LogCaptureFixture
) -> None:
    held = Attempt(svc)
    token = _token(held.agent)
    sent = base64.b64encode(token.encode()).decode()
    with caplog.at_level(logging.DEBUG):
        _refusal(lambda: held.checkpoint(handoff=sent))
    assert token not in caplog.text and sent not in caplog.text


def test_a_real_server_refuses_and_logs_nothing_of_it(live: Any) -> None:
    """`agent-coordinator-server serve` in a subprocess: a checkpoint (the lease lane) and a
    task carrying the agent's token base64-encoded are refused; the server's log holds nothing
    of either."""
    admin = live.admin_client()
    pid = admin_project(admin)
    token = live.issue_token("leaky", pid)
    sent = base64.b64encode(token.encode()).decode()
    with httpx.Client(base_url=live.url, timeout=30) as agent:
        agent.headers["Authorization"] = f"Bearer {token}"
        opened = _post(agent, "/api/v1/sessions", {"harness": "test"}).json()["data"]
        agent.headers["X-Coordinator-Session"] = opened["session_id"]
        agent.headers["X-Coordinator-Session-Proof"] = opened["proof"]
        task = _post(admin, f"/api/v1/projects/{pid}/tasks", {"title": "t",
                     "acceptance_criteria": ["x"]}).json()["data"]["task"]  # fmt: skip
        got = _post(
            agent,
            f"/api/v1/projects/{pid}/claims",
            {"task_id": task["id"], "expected_task_revision": task["revision"]},
        ).json()["data"]["claim"]["attempt"]
        path = f"/api/v1/projects/{pid}/attempts/{got['id']}/checkpoints"
        refused = _post(agent, path, {"generation": 1, "summary": "s", "handoff": sent})
        assert refused.status_code == 422
        assert refused.json()["error"]["details"]["encoding"] == "base64(text)"
        body = {"title": "leak", "description": sent, "acceptance_criteria": ["x"]}
        refused = _post(agent, f"/api/v1/projects/{pid}/tasks", body)
        assert refused.json()["error"]["details"]["field"] == "description"
    admin.close()
    live.stop()
    logged = live.log.read_text()
    assert "listening on" in logged  # this is the server's output
    assert token not in logged and sent not in logged


def _post(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    return client.post(path, json=body, headers={"Idempotency-Key": str(uuid.uuid4())})
