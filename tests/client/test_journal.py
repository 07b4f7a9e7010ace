"""The mutation journal's rules, against a scripted transport (no server, no sockets)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from agentc.client.config import Binding, Settings
from agentc.client.errors import MutationPending, TransportFailure
from agentc.client.ops import Agent
from agentc.client.state import Store
from agentc.core.errors import ConfigError, CoordinatorError

ORIGIN = "https://c.example"
Handler = Callable[[httpx.Request], httpx.Response]


class Script:
    """Answers requests from a list of handlers, recording what was sent."""

    def __init__(self) -> None:
        self.steps: list[Handler] = []
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return self.steps.pop(0)(request)


def lost(request: httpx.Request) -> httpx.Response:
    raise httpx.RemoteProtocolError("Server disconnected without sending a response.")


def answer(status: int, data: object, **headers: str) -> Handler:
    def handler(_request: httpx.Request) -> httpx.Response:
        if status >= 400:
            return httpx.Response(status, json={"error": data}, headers=headers)
        return httpx.Response(status, json={"data": data}, headers=headers)

    return handler


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def agent(tmp_path: Path, script: Script) -> Iterator[Agent]:
    binding = Binding(tmp_path / "b.toml", ORIGIN, "p1", None)
    settings = Settings(ORIGIN, "p1", binding, tmp_path / "state", "default", "tok", "test")
    store = Store(settings.state_dir, "default")
    state = store.load(ORIGIN)
    state.session_id, state.proof = "s1", "proof-" + "x" * 40
    store.save(state)
    with Agent(settings, httpx.MockTransport(script)) as a:
        yield a


def test_lost_answer_then_retry_sends_the_same_bytes_and_key(agent: Agent, script: Script) -> None:
    script.steps = [lost]
    with pytest.raises(TransportFailure):
        agent.claim()
    first = script.sent[0]
    assert first.headers["X-Coordinator-Session"] == "s1"
    with pytest.raises(MutationPending, match="retry"):
        agent.tasks_create({"title": "x"})
    attempt = {"id": "a1", "task_id": "t1", "generation": 1, "expires_at": "z"}
    script.steps = [
        answer(201, {"claim": {"attempt": attempt}}, **{"Idempotency-Replayed": "true"})
    ]
    out = agent.retry()
    assert out is not None and out.replayed
    again = script.sent[1]
    assert (again.method, again.url, again.content) == (first.method, first.url, first.content)
    assert again.headers["Idempotency-Key"] == first.headers["Idempotency-Key"]
    assert again.headers["X-Coordinator-Session-Proof"] == first.headers[
        "X-Coordinator-Session-Proof"]  # fmt: skip
    state = agent.state()
    assert state.pending is None and state.attempt is not None and state.attempt["id"] == "a1"
    assert agent.retry() is None


def test_uncertain_answers_keep_the_request_pending(agent: Agent, script: Script) -> None:
    for step in (
        answer(302, {}, location="https://elsewhere"),
        answer(429, {"code": "rate_limited", "message": "slow down"}),
        answer(503, {"code": "temporarily_unavailable", "message": "busy"}),
    ):
        script.steps = [step]
        with pytest.raises(TransportFailure):
            agent.retry() if agent.state().pending else agent.tasks_create({"title": "x"})
        assert agent.state().pending is not None
    keys = {r.headers["Idempotency-Key"] for r in script.sent}
    assert len(keys) == 1
    script.steps = [answer(422, {"code": "invalid_input", "message": "title: too short"})]
    with pytest.raises(CoordinatorError) as err:
        agent.retry()
    assert err.value.code == "invalid_input"
    assert agent.state().pending is None  # a 4xx refusal is definitive


def test_caller_keys_resend_or_refuse(agent: Agent, script: Script) -> None:
    script.steps = [lost]
    agent.key = "k" * 20
    with pytest.raises(TransportFailure):
        agent.tasks_create({"title": "x"})
    with pytest.raises(ConfigError, match="another request"):
        agent.tasks_create({"title": "y"})  # same key, other body
    script.steps = [answer(201, {"task": {"id": "t1"}})]
    out = agent.tasks_create({"title": "x"})  # same key, same body: the journaled request
    assert out.data == {"task": {"id": "t1"}}
    assert [r.headers["Idempotency-Key"] for r in script.sent] == ["k" * 20] * 2


def test_journal_is_on_disk_before_the_request_leaves(agent: Agent, script: Script) -> None:
    seen: list[object] = []

    def check(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(agent.store.path.read_text())["pending"])
        return answer(201, {"task": {"id": "t"}})(request)

    script.steps = [check]
    agent.tasks_create({"title": "x"})
    pending = seen[0]
    assert isinstance(pending, dict) and pending["body"] == {"title": "x"}
    assert pending["key"] == script.sent[0].headers["Idempotency-Key"]


def test_lost_session_proof_is_reported(agent: Agent, script: Script) -> None:
    script.steps = [lost]
    with pytest.raises(TransportFailure):
        agent.connect(new=True)
    assert "X-Coordinator-Session" not in script.sent[0].headers
    script.steps = [answer(201, {"session_id": "s2", "secret_unavailable": True})]
    with pytest.raises(CoordinatorError) as err:
        agent.retry()
    assert err.value.code == "session_proof_lost"
    assert agent.state().pending is None and agent.state().session_id == "s1"


def test_one_command_at_a_time(agent: Agent) -> None:
    busy = pytest.raises(TransportFailure, match="busy")
    with agent.store.locked(), busy, agent.store.locked(wait=0.05):
        pass
