"""The real harness binaries complete tool-using turns against the scripted provider, offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentc.testing import harnesses
from agentc.testing.provider import ScriptedProvider
from agentc.testing.script import parse_script


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "clone"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.name", "agentc test")
    _git(path, "config", "user.email", "agent@agentc.invalid")
    _git(path, "commit", "-q", "--allow-empty", "-m", "base")
    return path


def _needs(name: str) -> None:
    if not harnesses.available(name):
        pytest.skip(f"{name} is not installed (scripts/setup --dev)")


def _tool_results(body: dict[str, object]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for message in body.get("messages", []):  # type: ignore[attr-defined]
        content = message.get("content")
        if isinstance(content, list):
            out += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    return out


def test_claude_writes_a_file_and_commits(tmp_path: Path, repo: Path) -> None:
    _needs("claude")
    target = repo / "hello.txt"
    script = parse_script(
        {
            "turns": [
                {"tool_calls": [{"tool": "write", "path": str(target), "content": "hello\n"}]},
                {
                    "tool_calls": [
                        {
                            "tool": "run",
                            "command": "git add hello.txt && git commit -q -m 'add hello'",
                        }
                    ]
                },
                {"text": "Committed hello.txt."},
            ]
        }
    )
    with ScriptedProvider(script) as provider:
        env = harnesses.claude_env(tmp_path / "home", provider.url, "sk-test-dummy")
        result = harnesses.run(harnesses.claude_argv("Add hello.txt and commit it."), env, repo)
    assert result.returncode == 0, result.stderr
    final = result.of_type("result")[-1]
    assert final["is_error"] is False
    assert final["result"] == "Committed hello.txt."
    assert target.read_text() == "hello\n"
    assert _git(repo, "log", "-1", "--format=%s").strip() == "add hello"
    assert _git(repo, "status", "--porcelain") == ""
    main = provider.main_requests()
    assert len(main) == 3
    assert all(r.path == "/v1/messages" and r.query == "beta=true" for r in main)
    assert all(r.headers["x-api-key"] == "sk-test-dummy" for r in main)
    # The tool results came back: the write succeeded and the commit ran without error.
    assert [r.get("is_error", False) for r in _tool_results(main[2].body)] == [False, False]


def test_codex_runs_a_command(tmp_path: Path, repo: Path) -> None:
    _needs("codex")
    script = parse_script(
        {
            "turns": [
                {"tool_calls": [{"tool": "run", "command": "echo codex-was-here > marker.txt"}]},
                {"tool_calls": [{"tool": "write", "path": str(repo / "w.txt"), "content": "x y"}]},
                {"text": "Done."},
            ]
        }
    )
    with ScriptedProvider(script) as provider:
        env = harnesses.codex_env(tmp_path / "home", provider.url, "sk-test-dummy")
        result = harnesses.run(harnesses.codex_argv("Leave a marker."), env, repo)
    assert result.returncode == 0, result.stderr
    assert (repo / "marker.txt").read_text() == "codex-was-here\n"
    assert (repo / "w.txt").read_text() == "x y"
    assert result.of_type("turn.completed"), result.stdout
    messages = [
        e["item"]["text"]
        for e in result.of_type("item.completed")
        if e["item"]["type"] == "agent_message"
    ]
    assert messages[-1] == "Done."
    main = provider.main_requests()
    assert len(main) == 3
    assert all(r.path == "/v1/responses" for r in main)
    assert main[0].headers["authorization"] == "Bearer sk-test-dummy"
    outputs = [i for i in main[1].body["input"] if i.get("type") == "function_call_output"]
    assert len(outputs) == 1


def test_pi_runs_a_command(tmp_path: Path, repo: Path) -> None:
    _needs("pi")
    script = parse_script(
        {
            "turns": [
                {"tool_calls": [{"tool": "run", "command": "echo pi-was-here > marker.txt"}]},
                {"text": "Done."},
            ]
        }
    )
    with ScriptedProvider(script) as provider:
        env = harnesses.pi_env(tmp_path / "home", provider.url, "sk-test-dummy")
        result = harnesses.run(harnesses.pi_argv("Leave a marker."), env, repo)
    assert result.returncode == 0, result.stderr
    assert (repo / "marker.txt").read_text() == "pi-was-here\n"
    ends = result.of_type("agent_end")
    assert ends, result.stdout
    main = provider.main_requests()
    assert len(main) == 2
    assert _tool_results(main[1].body)[0].get("is_error", False) is False
    assert json.dumps(main[0].body["tools"]).count('"bash"') >= 1
