"""The mutation journal's rules, against a scripted transport (no server, no sockets)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from agentc.client.config import Binding, Settings
from agentc.client.errors import MutationPending, SetupRequired, TransportFailure
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
    settings = Settings(binding, tmp_path / "state", "default", "tok", "test")
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


def test_lost_connect_answer_is_recovered_with_the_journaled_proof(
    agent: Agent, script: Script
) -> None:
    seen: list[dict[str, object]] = []

    def lose(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(agent.store.path.read_text())["pending"])
        return lost(request)

    script.steps = [lose]
    with pytest.raises(TransportFailure):
        agent.connect(new=True)
    first = script.sent[0]
    # The proof goes alone (no session header), made here and on disk before it was sent.
    assert "X-Coordinator-Session" not in first.headers
    proof = first.headers["X-Coordinator-Session-Proof"]
    assert len(proof) == 64 and int(proof, 16) >= 0
    sid = json.loads(first.content)["session_id"]
    assert seen[0]["session_proof"] == proof and seen[0]["body"]["session_id"] == sid  # type: ignore[index]
    assert agent.state().session_id == "s1"  # nothing is stored until the answer comes
    assert agent.status()["pending"]["op"] == "connect"
    assert proof not in json.dumps(agent.status())

    script.steps = [
        answer(
            201,
            {"session_id": sid, "agent": "careful", "harness": "h", "proof_source": "client"},
            **{"Idempotency-Replayed": "true"},
        )
    ]
    out = agent.retry()
    assert out is not None and out.replayed and out.data["session_id"] == sid
    again = script.sent[1]
    assert (again.content, again.headers["Idempotency-Key"]) == (
        first.content,
        first.headers["Idempotency-Key"],
    )
    assert again.headers["X-Coordinator-Session-Proof"] == proof
    assert "X-Coordinator-Session" not in again.headers
    state = agent.state()
    assert (state.session_id, state.proof, state.agent) == (sid, proof, "careful")
    assert state.pending is None
    # The new session is used from now on.
    script.steps = [answer(200, {"items": []})]
    agent.tasks_list()
    assert script.sent[2].headers["X-Coordinator-Session"] == sid
    assert script.sent[2].headers["X-Coordinator-Session-Proof"] == proof


def test_connect_refuses_an_answer_for_another_session(agent: Agent, script: Script) -> None:
    script.steps = [
        answer(201, {"session_id": "other", "proof": "p" * 64, "proof_source": "server"})
    ]
    with pytest.raises(SetupRequired, match="client-made"):
        agent.connect(new=True)
    state = agent.state()
    assert state.pending is None and state.session_id == "s1"


def test_connect_with_a_caller_key_resends_the_journaled_session(
    agent: Agent, script: Script
) -> None:
    """The MCP adapter's same call with the same key resends the same id and proof."""
    agent.key = "connect-key-000000001"
    script.steps = [lost]
    with pytest.raises(TransportFailure):
        agent.connect(harness="h", new=True)
    sid = json.loads(script.sent[0].content)["session_id"]
    script.steps = [answer(201, {"session_id": sid, "agent": "a", "proof_source": "client"})]
    assert agent.connect(harness="h", new=True).data["session_id"] == sid
    assert script.sent[1].content == script.sent[0].content
    assert (
        script.sent[1].headers["X-Coordinator-Session-Proof"]
        == script.sent[0].headers["X-Coordinator-Session-Proof"]
    )
    assert agent.state().session_id == sid


def _held(*attempts: tuple[str, str | None]) -> Handler:
    return answer(
        200,
        {
            "session_id": "s1",
            "held_attempts": [
                {"attempt_id": a, "project_id": "p1", "task_id": "t", "activity_id": act,
                 "generation": 3, "expires_at": "z"}
                for a, act in attempts
            ],
        },
    )  # fmt: skip


def test_held_attempt_comes_from_the_coordinator_when_not_known_locally(
    agent: Agent, script: Script
) -> None:
    script.steps = [_held(("a9", None), ("r1", "act1")), answer(200, {"attempt": {"id": "a9"}})]
    agent.renew()
    assert script.sent[0].url.path == "/api/v1/sessions/s1"
    renewal = script.sent[1]
    assert renewal.url.path == "/api/v1/projects/p1/attempts/a9/renew"
    assert json.loads(renewal.content) == {"generation": 3}
    held = agent.state().attempt
    assert held is not None and (held["id"], held["generation"]) == ("a9", 3)
    script.steps = [answer(201, {"attempt": {"id": "a9"}})]
    agent.checkpoint("s")  # now known locally: no second look-up
    assert script.sent[2].url.path.endswith("/attempts/a9/checkpoints")


def test_no_or_several_held_attempts_on_the_coordinator(agent: Agent, script: Script) -> None:
    script.steps = [_held()]
    with pytest.raises(ConfigError, match="no attempt is held"):
        agent.release("h")
    script.steps = [_held(("a1", None), ("a2", None))]
    with pytest.raises(ConfigError, match="a1, a2.*--attempt"):
        agent.release("h")
    assert agent.state().attempt is None and agent.state().pending is None


def test_one_command_at_a_time(agent: Agent) -> None:
    busy = pytest.raises(TransportFailure, match="busy")
    with agent.store.locked(), busy, agent.store.locked(wait=0.05):
        pass
