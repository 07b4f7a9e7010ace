"""Bad input: each gets a clear message and the documented exit code, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from agentc.client.config import Options, normalize_origin, resolve
from agentc.client.errors import (
    MutationPending,
    SetupRequired,
    error_report,
    exit_code,
    status_exit_code,
)
from agentc.client.transport import Transport, check_path
from agentc.core.errors import ConfigError, CoordinatorError
from tests.client.kit import Workspace, workspace

PID = "p-1"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    # Port 9 (discard) on loopback: nothing listens, so any request fails fast.
    return workspace(tmp_path, "http://127.0.0.1:9", PID, "t" * 40)


def _fails(out: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout
    for needle in needles:
        assert needle in out.stderr, out.stderr


def test_malformed_binding_toml(ws: Workspace) -> None:
    (ws.repo / ".agent-coordinator.toml").write_text('service_url = "http://127.0.0.1:9\n')
    _fails(ws.run("status"), 2, "not valid TOML", ".agent-coordinator.toml")


def test_binding_with_unknown_field_or_token(ws: Workspace) -> None:
    binding = ws.repo / ".agent-coordinator.toml"
    binding.write_text(f'service_url = "http://127.0.0.1:9"\nproject_id = "{PID}"\nx = 1\n')
    _fails(ws.run("status"), 2, "unknown field 'x'")
    binding.write_text(f'service_url = "http://127.0.0.1:9"\nproject_id = "{PID}"\ntoken = "s"\n')
    _fails(ws.run("status"), 2, "tokens never go in the repository binding")
    binding.write_text('service_url = "http://127.0.0.1:9"\n')
    _fails(ws.run("status"), 2, "project_id is required")


def test_binding_found_upwards_or_named(ws: Workspace, tmp_path: Path) -> None:
    deep = ws.repo / "a" / "b"
    deep.mkdir(parents=True)
    out = ws.run("status", "--json", cwd=deep)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["project_id"] == PID
    other = tmp_path / "other.toml"
    other.write_text('service_url = "http://127.0.0.1:9"\nproject_id = "named"\n')
    out = ws.run("status", "--json", env={"AGENT_COORDINATOR_REPO_CONFIG": str(other)})
    assert json.loads(out.stdout)["project_id"] == "named"  # the variable wins
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    _fails(ws.run("status", cwd=nowhere), 3, "no .agent-coordinator.toml found")


def test_credentials_file_with_a_loose_mode(ws: Workspace) -> None:
    creds = ws.state_dir / "credentials.toml"
    creds.chmod(0o644)
    _fails(ws.run("next"), 3, "mode 0644", "must be 0600")
    creds.chmod(0o600)
    creds.write_text("[[credentials]]\norigin = 3\n")
    _fails(ws.run("next"), 2, "credentials")


def test_missing_credential_names_the_file(ws: Workspace) -> None:
    (ws.state_dir / "credentials.toml").unlink()
    _fails(ws.run("next"), 3, "no credential for http://127.0.0.1:9", "AGENT_COORDINATOR_TOKEN")


def test_unknown_verbs_and_flags(ws: Workspace) -> None:
    _fails(ws.run("frobnicate"), 2, "No such command")
    _fails(ws.run("claim", "--bogus"), 2, "No such option")
    _fails(ws.run("tasks", "list", "--limit", "0"), 2, "--limit")
    _fails(ws.run("tasks", "create"), 2, "--input")


def test_http_origin_off_loopback(ws: Workspace) -> None:
    (ws.repo / ".agent-coordinator.toml").write_text(
        f'service_url = "http://coordinator.example"\nproject_id = "{PID}"\n'
    )
    _fails(ws.run("status"), 2, "plain http is refused for coordinator.example")


def test_http_loopback_needs_the_opt_in(ws: Workspace) -> None:
    out = ws.run("status", env={"AGENT_COORDINATOR_ALLOW_INSECURE_LOOPBACK": "false"})
    _fails(out, 3, "--allow-insecure-loopback")
    out = ws.run(
        "--allow-insecure-loopback",
        "status",
        env={"AGENT_COORDINATOR_ALLOW_INSECURE_LOOPBACK": "false"},
    )
    assert out.returncode == 0, out.stderr


def test_input_file_that_is_not_json(ws: Workspace) -> None:
    bad = ws.file("task.json", "{not json")
    _fails(ws.run("tasks", "create", "--input", bad), 2, "is not JSON")
    _fails(ws.run("tasks", "create", "--input", "-"), 2, "is not JSON")  # empty stdin
    listed = ws.file("list.json", "[1, 2]")
    _fails(ws.run("tasks", "create", "--input", listed), 2, "must be a JSON object")
    _fails(ws.run("tasks", "create", "--input", str(ws.root / "missing.json")), 2, "cannot read")
    assert ws.ok("status")["pending"] is None  # nothing was journaled


def test_relative_state_dir_and_bad_session_name(ws: Workspace) -> None:
    _fails(ws.run("--state-dir", "rel/dir", "status"), 2, "absolute")
    _fails(ws.run("--session", "../x", "status"), 2, "session name")


def test_request_paths_are_confined(ws: Workspace) -> None:
    _fails(ws.run("request", "--method", "GET", "--path", "/admin"), 2, "only /api/v1/")
    _fails(ws.run("request", "--method", "GET", "--path", "/api/v1/../x"), 2, "dot segments")
    _fails(ws.run("request", "--method", "GET", "--path", "http://evil/api/v1/x"), 2)
    _fails(ws.run("request", "--method", "TRACE", "--path", "/api/v1/info"), 2, "method")


def test_unreachable_coordinator_is_exit_7_and_blocks_writes(ws: Workspace) -> None:
    out = ws.run("tasks", "create", "--json", "--input", ws.file("t.json", {"title": "t"}))
    assert out.returncode == 7
    assert json.loads(out.stdout)["error"]["code"] == "transport_failed"
    pending = ws.ok("status")["pending"]
    assert pending["path"] == f"/api/v1/projects/{PID}/tasks"
    _fails(ws.run("claim"), 7, "mutation_pending", "retry")
    _fails(ws.run("request", "--method", "POST", "--path", "/api/v1/x"), 7, "retry")
    state = json.loads((ws.state_dir / "sessions" / "default.json").read_text())
    assert state["pending"]["body"] == {"title": "t"}
    assert os.stat(ws.state_dir / "sessions").st_mode & 0o777 == 0o700
    assert os.stat(ws.state_dir / "sessions" / "default.json").st_mode & 0o777 == 0o600


def test_commands_needing_a_held_attempt_say_so(ws: Workspace) -> None:
    _fails(ws.run("claim"), 3, "no agent session", "connect")
    _fails(ws.run("renew"), 2, "no attempt is held", "claim")
    _fails(ws.run("reviews", "decide", "--input", ws.file("d.json", {})), 2, "reviews claim")


def test_origin_normalization() -> None:
    assert normalize_origin("HTTPS://Example.COM:443/", allow_insecure_loopback=False,
                            what="x") == "https://example.com"  # fmt: skip
    assert normalize_origin("http://[::1]:8080", allow_insecure_loopback=True,
                            what="x") == "http://[::1]:8080"  # fmt: skip
    for bad in ("ftp://x", "https://u:p@x", "https://x/path", "https://x?q=1", "nope"):
        with pytest.raises(ConfigError):
            normalize_origin(bad, allow_insecure_loopback=True, what="x")
    with pytest.raises(SetupRequired):
        normalize_origin("http://localhost", allow_insecure_loopback=False, what="x")


def test_token_variable_must_match_the_origin(tmp_path: Path) -> None:
    binding = tmp_path / "b.toml"
    binding.write_text('service_url = "https://c.example"\nproject_id = "p"\n')
    env = {"AGENT_COORDINATOR_TOKEN": "tok", "AGENT_COORDINATOR_STATE_DIR": str(tmp_path)}
    assert resolve(Options(repo_config=str(binding)), env, tmp_path).token == "tok"
    env["AGENT_COORDINATOR_ORIGIN"] = "https://other.example"
    with pytest.raises(SetupRequired):
        resolve(Options(repo_config=str(binding)), env, tmp_path)


def test_project_name_selects_the_credentials_directory(tmp_path: Path) -> None:
    binding = tmp_path / "b.toml"
    binding.write_text(
        'service_url = "https://c.example"\nproject_id = "p"\nproject_name = "web"\n'
    )
    env = {"AGENT_COORDINATOR_STATE_DIR": str(tmp_path / "s")}
    settings = resolve(Options(repo_config=str(binding)), env, tmp_path)
    assert settings.state_dir == tmp_path / "s" / "web" / "config"
    assert settings.token is None


def test_exit_code_table() -> None:
    assert status_exit_code(401, "authentication_required") == 3
    assert status_exit_code(403, "session_required") == 3
    assert status_exit_code(403, "operation_not_permitted") == 4
    assert status_exit_code(409, "claim_conflict") == 5
    assert status_exit_code(422, "evidence_mismatch") == 6
    assert status_exit_code(422, "invalid_input") == 2
    assert status_exit_code(404, "record_not_found") == 2
    assert status_exit_code(503, "temporarily_unavailable") == 7
    assert exit_code(CoordinatorError("lease_expired", "m", status=409)) == 5
    assert exit_code(ConfigError("m")) == 2


def test_one_error_report_for_both_front_ends() -> None:
    assert error_report(MutationPending("run retry")) == {
        "code": "mutation_pending", "message": "run retry", "details": {}, "exit_code": 7,
    }  # fmt: skip
    refusal = CoordinatorError("claim_conflict", "taken", status=409, details={"task_id": "t"})
    assert error_report(refusal) == {
        "code": "claim_conflict", "message": "taken", "details": {"task_id": "t"}, "exit_code": 5,
    }  # fmt: skip
    assert error_report(SetupRequired("no token"))["code"] == "setup_required"
    assert error_report(RuntimeError("boom"))["code"] == "internal_error"
    assert exit_code(RuntimeError("boom")) == 1


def _answer(status: int, body: object, headers: dict[str, str] | None = None) -> Transport:
    def handler(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body, headers=headers)

    return Transport("https://c.example", "t", httpx.MockTransport(handler))


def test_answers_are_classified() -> None:
    from agentc.client.errors import TransportFailure

    with _answer(302, {}, {"location": "https://elsewhere"}) as t, pytest.raises(TransportFailure):
        t.send("GET", "/api/v1/info")
    busy = {"error": {"code": "temporarily_unavailable", "message": "retry"}}
    with _answer(503, busy) as t, pytest.raises(TransportFailure):
        t.send("POST", "/api/v1/x", {}, key="k")
    envelope = {"error": {"code": "claim_conflict", "message": "taken", "details": {"a": 1}}}
    with _answer(409, envelope) as t, pytest.raises(CoordinatorError) as err:
        t.send("POST", "/api/v1/x", {}, key="k")
    assert (err.value.code, err.value.status, err.value.details) == (
        "claim_conflict",
        409,
        {"a": 1},
    )
    with _answer(201, {"data": {"x": 1}}, {"Idempotency-Replayed": "true"}) as t:
        answer = t.send("POST", "/api/v1/x", {}, key="k")
    assert answer.data == {"x": 1} and answer.replayed
    with pytest.raises(ConfigError):
        check_path("/api/v2/x")
