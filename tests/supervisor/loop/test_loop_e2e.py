"""The loop end to end in personal mode: a real coordinator, real git, real bwrap, and a
``command:`` agent that edits, commits and submits through the agent CLI inside its launch."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.client.kit import admin_get
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import SUBMITTING_AGENT, LoopKit, claude_stand_in, make_loop_kit


def test_a_ready_task_is_claimed_launched_and_submitted(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, SUBMITTING_AGENT)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr
    shown = loop.show(task["id"])
    assert shown["work_status"] == "waiting_review", shown
    beat = json.loads((loop.state / "loop/heartbeat.json").read_text())
    assert beat["iteration"] == 1 and "Launched" in beat["outcome"] and "launch" not in beat
    [final] = loop.records("finished")
    assert final["task"] == task["id"] and final["pid"] and final["released"] is True
    assert final["outcome"] == "left as it is (submitted)"
    assert loop.records() == [] and loop.leftovers() == []
    # The commit was published through the launch's candidate push helper, which is gone.
    refs = subprocess.run(
        ["git", "-C", str(loop.origin), "for-each-ref", "--format=%(refname) %(objectname)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    [candidate] = [r for r in refs if r.startswith("refs/agent-coordinator/candidates/")]
    ref, revision = candidate.split()
    assert ref == f"refs/agent-coordinator/candidates/{task['id']}/{final['launch_id']}"
    submission = loop.submission(task["id"])
    assert submission["candidate_ref"] == ref and submission["candidate_revision"] == revision
    # The loop recorded the submission's patch (decision D45) from the two revisions.
    patch = admin_get(
        loop.admin,
        f"/api/v1/projects/{loop.project}/attempts/{submission['attempt_id']}/artifacts/patch",
    )
    assert patch["submission_id"] == submission["id"]
    assert patch["candidate_revision"] == revision
    assert patch["base_revision"] == submission["base_revision"]
    assert patch["files"] == [
        {"path": "greeting.txt", "old_path": None, "status": "added", "added": 1, "removed": 0}
    ]
    raw = subprocess.run(
        ["git", "-C", str(loop.origin), "diff-tree", "-r", "-z", "--no-renames"]
        + [submission["base_revision"], revision],
        capture_output=True,
        check=True,
    ).stdout
    assert patch["reviewed_diff"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert "+hi" in patch["patch"]
    assert "recorded the patch (1 files)" in result.stderr, result.stderr
    # and the run: a command: agent writes no stream agentc reads, so no steps, but its ending
    steps = _steps(loop, submission["attempt_id"])
    assert (steps["ending"], steps["harness"], steps["steps"]) == ("submitted", "command", [])
    assert steps["usd"] is None and steps["started_at_ms"] > 0
    # with the launch and the SHA-256 of the prompt it read (a landing's provenance names them)
    assert steps["launch_id"] == final["launch_id"]
    assert submission["handoff"] == f"prompt sha256 {steps['prompt_sha256']}"
    push_dir = loop.state / "push"
    assert [p.name for p in push_dir.iterdir() if not p.name.startswith(".")] == []


def _steps(loop: LoopKit, attempt_id: str) -> dict[str, Any]:
    path = f"/api/v1/projects/{loop.project}/attempts/{attempt_id}/artifacts/steps"
    steps: dict[str, Any] = admin_get(loop.admin, path)
    return steps


def _claude_loop(short_tmp: Path, server: LiveServer, admin: httpx.Client, script: str) -> LoopKit:
    claude = claude_stand_in(short_tmp, script)
    loop = make_loop_kit(
        short_tmp, server, admin, SUBMITTING_AGENT, token_in_env=True,
        harness_paths={"claude": str(claude)},
    )  # fmt: skip
    loop.write_config(harness="claude")
    return loop


def _events(*events: dict[str, Any]) -> str:
    """Shell lines printing ``events`` as Claude's stream-json does."""
    lines = "\n".join(json.dumps(e) for e in events)
    return f"cat <<'EVENTS'\n{lines}\nEVENTS\n"


def _tool(ref: str, name: str, command: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": ref, "name": name, "input": {"command": command}}
    return {"type": "assistant", "message": {"id": ref, "content": [block]}}


def _result(ref: str, error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": ref, "content": "ok", "is_error": error}
    return {"type": "user", "message": {"content": [block]}}


INIT = {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet-5"}
RESULT = {
    "type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.1234,
    "usage": {"input_tokens": 100, "cache_creation_input_tokens": 20,
              "cache_read_input_tokens": 300, "output_tokens": 40},
    "result": "done", "session_id": "s1",
}  # fmt: skip
# Claude Code as the loop runs it (stream-json on stdout): it tells its steps, then does them.
STEPPING_CLAUDE = (
    '#!/bin/sh\n[ "$1" = auth ] && exit 0\n'
    + _events(
        INIT,
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "content": [{"type": "text", "text": "I will add <b>the greeting</b>."}],
            },
        },
        _tool("t1", "Bash", "git commit -m greeting"),
        _result("t1"),
        _tool("t2", "Bash", "false"),
        _result("t2", error=True),
    )  # fmt: skip
    + SUBMITTING_AGENT.split("\n", 1)[1]
    .replace('echo \'{"type": "agent", "step": "start"}\'\n', "")
    .replace('echo \'{"type": "agent", "step": "submitted"}\'\n', "")
    + _events(RESULT)
)


def test_the_loop_records_what_the_agent_did(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """Claude's stream read by its parser: the steps, the cost and tokens, the duration and
    the ending are recorded with the loop's credential when the attempt is settled."""
    loop = _claude_loop(short_tmp, server, admin, STEPPING_CLAUDE)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0 and "exit_code: 0" in result.stderr, result.stderr
    submission = loop.submission(task["id"])
    steps = _steps(loop, submission["attempt_id"])
    assert (steps["ending"], steps["harness"], steps["model"]) == (
        "submitted", "claude", "claude-sonnet-5"
    )  # fmt: skip
    assert steps["why"] == "the agent submitted its work; the launch exited with code 0"
    assert [(s["kind"], s["name"], s["detail"], s.get("ok")) for s in steps["steps"]] == [
        ("model", "message", "I will add <b>the greeting</b>.", None),
        ("tool", "Bash", "git commit -m greeting", True),
        ("tool", "Bash", "false", False),
    ]
    assert steps["usd"] == 0.1234 and steps["usd_estimated"] is False
    assert (steps["input_tokens"], steps["cached_input_tokens"], steps["output_tokens"]) == (
        120, 300, 40
    )  # fmt: skip
    assert steps["started_at_ms"] > 0 and steps["duration_ms"] >= 0 and steps["note"] == ""
    assert "recorded 3 steps (submitted)" in result.stderr, result.stderr
    events = admin.get(f"/api/v1/projects/{loop.project}/events").json()["data"]["items"]
    [recorded] = [e for e in events if e["kind"] == "artifact.recorded" and
                  e["data"].get("artifact") == "steps"]  # fmt: skip
    assert (recorded["data"]["ending"], recorded["data"]["steps"]) == ("submitted", 3)


AWS_KEY = "AKIA" + "Z3P7QX9K2LMN4VB8"  # made at run time: no file of the repository carries a key
# Runs a command quoting a key, is refused by the vendor's rate limit and exits without work.
LIMITED_CLAUDE = (
    '#!/bin/sh\n[ "$1" = auth ] && exit 0\ncat > /dev/null\n'
    + _events(
        INIT,
        _tool("t1", "Bash", f"aws configure set aws_access_key_id {AWS_KEY}"),
        {"type": "rate_limit_event", "rate_limit_info": {"status": "rejected"}},
        {
            "type": "result",
            "subtype": "error",
            "is_error": True,
            "api_error_status": 429,
            "total_cost_usd": 0.01,
            "usage": {},
        },
    )  # fmt: skip
    + "exit 1\n"
)


def test_steps_with_a_secret_are_left_out_and_a_limit_hit_recorded(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = _claude_loop(short_tmp, server, admin, LIMITED_CLAUDE)
    loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    [final] = loop.records("finished")
    steps = _steps(loop, final["attempt"])
    assert steps["ending"] == "limit_hit" and steps["steps"] is None and steps["model"] is None
    assert (
        "the vendor's rate limit stopped the agent; the launch exited with code 1" in (steps["why"])
    )
    assert "an AWS access key" in steps["note"] and AWS_KEY not in json.dumps(steps)
    assert steps["usd"] == 0.01
    assert "without its steps" in result.stderr and AWS_KEY not in result.stderr


# A stream whose step names and details carry NUL (PostgreSQL text holds none): the loop
# renews and records the run all the same, the NUL shown as U+FFFD.
NUL_CLAUDE = STEPPING_CLAUDE.replace("git commit -m greeting", "echo a\\u0000b").replace(
    '"name": "Bash"', '"name": "Ba\\u0000sh"', 1
)


def test_agent_text_with_nul_does_not_lose_the_run_record(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    assert "\\u0000" in NUL_CLAUDE
    loop = _claude_loop(short_tmp, server, admin, NUL_CLAUDE)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0 and "exit_code: 0" in result.stderr, result.stderr
    steps = _steps(loop, loop.submission(task["id"])["attempt_id"])
    assert steps["ending"] == "submitted" and steps["note"] == "", steps
    assert ("tool", "Ba\ufffdsh", "echo a\ufffdb") in [
        (s["kind"], s["name"], s["detail"]) for s in steps["steps"]
    ]
