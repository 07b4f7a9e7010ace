"""The launch's lease on its sentinel, and the per-harness model configuration (harness_env)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentc.gateway.control import HELD_CLOSED, serve_control
from agentc.gateway.errors import GatewayError, SentinelRefused
from agentc.gateway.lease import Lease, LeaseRequest
from agentc.gateway.sentinels import Grant, SentinelRegistry
from agentc.supervisor.harness import env as harness_env
from agentc.supervisor.harness import pi, registry


@pytest.fixture
def control(tmp_path: Path) -> Iterator[tuple[SentinelRegistry, Path]]:
    with serving(tmp_path / "control.sock") as served:
        yield served


@contextlib.contextmanager
def serving(path: Path) -> Iterator[tuple[SentinelRegistry, Path]]:
    """The control socket at ``path``, served in a thread."""
    registry = SentinelRegistry()
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(serve_control(registry, path))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield registry, path
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


def test_a_control_socket_under_a_long_directory_is_served_and_reached(tmp_path: Path) -> None:
    """``agentc up`` keeps it in its state directory however deep that is (never in a shorter
    shared directory another account could create first): bound and reached through its
    directory, still 0600."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "control.sock"
    assert len(os.fsencode(path)) > 108
    with serving(path) as (registry, _):
        assert os.stat(path).st_mode & 0o777 == 0o600
        lease = Lease(_request(path))
        token = lease.open()
        assert registry.check(token).launch_id == "s1"
        lease.close("done")


def _request(path: Path, **kw: object) -> LeaseRequest:
    fields: dict[str, object] = {"launch_id": "s1", "attempt": "a1", "generation": 2}
    fields.update(kw)
    return LeaseRequest(path, Grant(upstream="claude", **fields))  # type: ignore[arg-type]


def _refusal(registry: SentinelRegistry, token: str) -> str:
    with pytest.raises(SentinelRefused) as caught:
        registry.check(token)
    return caught.value.reason


def test_a_lease_issues_a_bound_sentinel_and_revokes_it_at_close(
    control: tuple[SentinelRegistry, Path],
) -> None:
    registry, path = control
    lease = Lease(_request(path, task="t1", launch_usd=0.5, role_slug="rev"))
    token = lease.open()
    grant = registry.check(token)
    assert (grant.launch_id, grant.attempt, grant.generation) == ("s1", "a1", 2)
    assert (grant.task, grant.launch_usd, grant.role_slug, grant.upstream) == (
        "t1",
        0.5,
        "rev",
        "claude",
    )
    registry.note_cap("s1", "launch", "launch cap reached: $0.5 of $0.5")
    end = lease.close("done here")
    assert end is not None and (end.revoked, end.cap, end.calls) == (1, "launch", 1)
    assert _refusal(registry, token) == "revoked: done here"
    assert lease.close() is None  # closing twice is harmless


def test_a_dropped_connection_revokes_the_held_sentinel(
    control: tuple[SentinelRegistry, Path],
) -> None:
    registry, path = control
    lease = Lease(_request(path))
    token = lease.open()
    sock = lease.connection._sock
    assert sock is not None
    assert os.get_inheritable(sock.fileno()) is False  # never reaches the harness
    sock.close()  # what the kernel does when the launch is SIGKILLed
    lease.connection._sock = None
    for _ in range(500):
        if registry.status("s1")["sentinels"][0]["state"] == "revoked":  # type: ignore[index]
            break
        threading.Event().wait(0.01)
    assert _refusal(registry, token) == f"revoked: {HELD_CLOSED}"


def test_a_plain_control_client_does_not_hold(control: tuple[SentinelRegistry, Path]) -> None:
    registry, path = control
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(path))
        issue = {"op": "issue", "session": "s9", "attempt": "a", "generation": 1}
        sock.sendall(json.dumps({**issue, "upstream": "claude"}).encode() + b"\n")
        token = json.loads(sock.makefile().readline())["sentinel"]
    threading.Event().wait(0.1)
    assert registry.check(token).launch_id == "s9"


def test_lease_errors_name_the_socket(
    tmp_path: Path, control: tuple[SentinelRegistry, Path]
) -> None:
    missing = tmp_path / "nothing.sock"
    with pytest.raises(GatewayError, match=f"{missing}.*model-gateway"):
        Lease(_request(missing)).open()
    _registry, path = control
    with Lease(_request(path, generation=5)) as newer:
        newer.open()
        older = Lease(_request(path, generation=4))
        with pytest.raises(GatewayError, match="older than 5"):
            older.open()
        assert not older.connection.is_open  # a refused issue lets go of its connection


def test_harness_setups(tmp_path: Path) -> None:
    endpoint = harness_env.ModelEndpoint("http://127.0.0.1:18788/", "agc-sentinel-x", "gpt-5")
    assert "agc-sentinel-x" not in repr(endpoint)
    claude = registry.model_setup("claude", endpoint, home=tmp_path, codex_home=tmp_path / "c")
    assert claude.env == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:18788",
        "ANTHROPIC_API_KEY": "agc-sentinel-x",
    }
    codex = registry.model_setup("codex", endpoint, home=tmp_path, codex_home=tmp_path / "c")
    assert codex.env == {"CODEX_HOME": str(tmp_path / "c"), "OPENAI_API_KEY": "agc-sentinel-x"}
    config = tomllib.loads(codex.files[tmp_path / "c/config.toml"])
    assert config["model_provider"] == "agentc" and config["model"] == "gpt-5"
    provider = config["model_providers"]["agentc"]
    assert provider["base_url"] == "http://127.0.0.1:18788/v1"
    assert (provider["env_key"], provider["wire_api"]) == ("OPENAI_API_KEY", "responses")
    assert "agc-sentinel-x" not in codex.files[tmp_path / "c/config.toml"]
    pi_setup = registry.model_setup(
        "pi", harness_env.ModelEndpoint(endpoint.base_url, "k"), home=tmp_path, codex_home=tmp_path
    )
    models = json.loads(pi_setup.files[tmp_path / ".pi/agent/models.json"])["providers"]["agentc"]
    assert (models["baseUrl"], models["apiKey"]) == ("http://127.0.0.1:18788", "k")
    assert models["models"] == [{"id": pi.DEFAULT_MODEL}]
    assert pi_setup.args == ("--provider", "agentc", "--model", pi.DEFAULT_MODEL)
    with pytest.raises(ValueError, match="unknown harness"):
        registry.model_setup("vim", endpoint, home=tmp_path, codex_home=tmp_path)


def test_write_files_is_private_and_exclusive(tmp_path: Path) -> None:
    endpoint = harness_env.ModelEndpoint("http://127.0.0.1:18788", "k")
    setup = pi.setup(endpoint, tmp_path / "home")
    harness_env.write_files(setup, exclusive=True)
    path = tmp_path / "home/.pi/agent/models.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "home/.pi").stat().st_mode & 0o777 == 0o700
    with pytest.raises(FileExistsError):
        harness_env.write_files(setup, exclusive=True)
    harness_env.write_files(setup)  # a test's throwaway home may be rewritten
    path.unlink()
    victim = tmp_path / "victim"
    path.symlink_to(victim)
    with pytest.raises(OSError):
        harness_env.write_files(setup)
    assert not victim.exists()


def test_a_lease_binds_the_launch_agent_session_to_its_sentinel(
    control: tuple[SentinelRegistry, Path],
) -> None:
    registry, path = control
    sid = "0123456789abcdef" * 2
    with Lease(_request(path, agentns_session_id=sid, agentns_mode="prctl")) as lease:
        grant = registry.check(lease.open())
        assert (grant.agentns_session_id, grant.agentns_mode) == (sid, "prctl")
    with Lease(_request(path, launch_id="s2", attempt="a2")) as lease:  # none: none recorded
        grant = registry.check(lease.open())
        assert (grant.agentns_session_id, grant.agentns_mode) == (None, None)
