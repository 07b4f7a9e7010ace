"""Real launches through the model gateway: relay -> gateway -> scripted provider, offline.

Each test runs ``agentc-supervisor launch`` (real bwrap) with the real harness binaries, or the
mock harness as a probe. The gateway runs on the host with its control socket; the launch
issues its held sentinel there, relays a loopback port inside its namespace to the gateway,
configures the harness with both, and revokes the sentinel when it ends.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from agentc.sandbox.limits import LaunchLimits, Limits, remove_left
from agentc.testing.script import parse_script
from tests.supervisor.gateway_launch_kit import (
    INNER,
    KEY_HEAD,
    KEY_TAIL,
    MODEL,
    REAL_KEY,
    Env,
    MakeEnv,
    claude_settings,
    git_init,
    make_env,
    program,
    refused_after,
    result_line,
    sentinel_in,
    stderr_of,
)
from tests.supervisor.kit import terminal

pytestmark = pytest.mark.root
assert make_env  # the fixture, used by name

# ------------------------------------------------------------------ real harnesses


def test_claude_writes_and_commits_in_its_clone_metered_exactly(make_env: MakeEnv) -> None:
    usage = [
        {"input_tokens": 1200, "cache_creation_input_tokens": 5000, "output_tokens": 40},
        {"input_tokens": 30, "cache_read_input_tokens": 5000, "output_tokens": 25},
        {"input_tokens": 12, "cache_read_input_tokens": 5200, "output_tokens": 7},
    ]
    script = {
        "turns": [
            {"tool_calls": [{"tool": "write", "path": "{clone}/hello.txt", "content": "hi\n"}],
             "usage": usage[0]},
            {"tool_calls": [{"tool": "run", "command": "git add hello.txt && "
                             "git commit -qm 'add hello'"}], "usage": usage[1]},
            {"text": "Committed.", "usage": usage[2]},
        ]
    }  # fmt: skip
    with make_env({}, {"claude": program("claude")}) as env:
        claude_settings(env.kit)
        run, clone = env.kit.new_run("Write hello.txt and commit it.")
        git_init(clone)
        env.provider.turns = parse_script(
            json.loads(json.dumps(script).replace("{clone}", str(clone)))
        ).expanded()
        session = str(uuid.uuid4())
        result = env.kit.launch(
            run, clone, "--harness=claude", f"--session-id={session}", f"--model={MODEL}"
        )
        assert result.returncode == 0, stderr_of(run, result)
        assert (clone / "hello.txt").read_text() == "hi\n"
        log = subprocess.run(
            ["git", "-C", str(clone), "log", "--format=%s", "--name-only"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert log.split() == ["add", "hello", "hello.txt"]
        events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
        assert events[-1]["type"] == "result" and events[-1]["result"] == "Committed."
        assert len(env.provider.main_requests()) == 3
        # The provider saw only the real key; the harness had only its sentinel.
        assert {r.headers.get("x-api-key") for r in env.provider.requests} == {REAL_KEY}
        reported = env.provider.reported_total()
        rows = env.ledger(session)
        assert rows and all(r["attempt"] == session and r["generation"] == 1 for r in rows)
        assert sum(r["input_tokens"] for r in rows) == reported.input_tokens
        assert sum(r["cache_write_tokens"] for r in rows) == reported.cache_creation_input_tokens
        assert sum(r["cache_read_tokens"] for r in rows) == reported.cache_read_input_tokens
        assert sum(r["output_tokens"] for r in rows) == reported.output_tokens
        assert reported.cache_read_input_tokens == 10200
        end = terminal(run)
        assert (end["reason"], end["exit_code"], end["cap"]) == ("exited", 0, None)
        started = json.loads((run / ".state-started").read_text())
        assert started["model_access"].startswith(f"gateway http://{INNER}")
        status = env.gateway.gateway.registry.status(session)
        assert [s["state"] for s in status["sentinels"]] == ["revoked"]


@pytest.mark.slow  # Codex itself takes several seconds to start and finish
def test_codex_runs_a_tool_turn_through_the_gateway(make_env: MakeEnv) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"tool": "run", "command": "echo from-codex > codex.txt"}]},
            {"text": "Wrote codex.txt."},
        ]
    }
    with make_env(script, {"codex": program("codex")}) as env:
        result, run, clone, session = env.launch("Write codex.txt.", "codex", "--model=gpt-5")
        assert result.returncode == 0, stderr_of(run, result)
        assert (clone / "codex.txt").read_text() == "from-codex\n"
        assert len(env.provider.main_requests()) == 2
        assert {r.headers.get("authorization") for r in env.provider.requests} == {
            f"Bearer {REAL_KEY}"
        }
        config = (run / "state/codex-home/config.toml").read_text()
        assert f'base_url = "http://{INNER}/v1"' in config and REAL_KEY not in config
        rows = env.ledger(session)
        assert len(rows) == 2 and {r["upstream"] for r in rows} == {"codex"}
        assert sum(r["output_tokens"] for r in rows) == env.provider.reported_total().output_tokens
        assert terminal(run)["cap"] is None


@pytest.mark.slow  # Pi takes several seconds in a launch
def test_pi_runs_a_tool_turn_through_the_gateway(make_env: MakeEnv) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"tool": "run", "command": "echo from-pi > pi.txt"}]},
            {"text": "Wrote pi.txt."},
        ]
    }
    with make_env(script, {"pi": program("pi")}) as env:
        result, run, clone, session = env.launch("Write pi.txt.", "pi", f"--model={MODEL}")
        assert result.returncode == 0, stderr_of(run, result)
        assert (clone / "pi.txt").read_text() == "from-pi\n"
        assert len(env.provider.main_requests()) == 2
        models = json.loads((run / "state/home/.pi/agent/models.json").read_text())
        assert models["providers"]["agentc"]["baseUrl"] == f"http://{INNER}"
        rows = env.ledger(session)
        assert len(rows) == 2 and {r["upstream"] for r in rows} == {"claude"}


# ------------------------------------------------------------------ credentials and sentinels

PROBE = r"""
set -u
key="$KEY_HEAD$KEY_TAIL"
RUN=$(dirname "$(dirname "$HOME")")
env > "$HOME/env.txt"
hits=$TMPDIR/hits
: > "$hits"
env | grep -F -- "$key" >> "$hits"
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
  grep -aF -- "$key" "$f" >/dev/null 2>&1 && echo "$f" >> "$hits"
done
grep -rlsF -- "$key" "$HOME" "$RUN" "$PWD" "$TMPDIR" /tmp /var/tmp /dev/shm /run /etc \
  "$CRED_DIR" /root 2>/dev/null >> "$hits"
test -s "$hits" && { cat "$hits"; exit 21; }
test -e "$CONTROL" && exit 22
test -e "$CRED_DIR/claude.key" && exit 23
case "$ANTHROPIC_API_KEY" in agc-sentinel-*) ;; *) exit 24;; esac
test "$ANTHROPIC_BASE_URL" = "http://INNER" || exit 25
code=$(curl -s -o "$HOME/answer.json" -w '%{http_code}' -H "x-api-key: $ANTHROPIC_API_KEY" \
  -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' \
  -d '{"model":"claude-sonnet-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' \
  "$ANTHROPIC_BASE_URL/v1/messages")
test "$code" = 200 || exit 26
curl -s --max-time 3 -o /dev/null "http://$GATEWAY_HOST/" && exit 27
echo probed > "$HOME/done"
"""


def _probe(env: Env) -> str:
    cred_dir = Path(env.config.upstreams["claude"].credential_file).parent
    return (
        f"KEY_HEAD={KEY_HEAD!s}\nKEY_TAIL={KEY_TAIL}\nCONTROL={env.config.control_socket}\n"
        f"CRED_DIR={cred_dir}\nGATEWAY_HOST={env.gateway.address}\n" + PROBE.replace("INNER", INNER)
    )


def test_no_real_credential_inside_and_the_sentinel_dies_with_the_launch(
    make_env: MakeEnv,
) -> None:
    with make_env({"turns": []}, {}) as env:  # the mock harness (a shell) is the probe
        credential = Path(env.config.upstreams["claude"].credential_file)
        assert REAL_KEY in credential.read_text()  # the stand-in exists on the host
        assert env.config.control_socket.exists()
        binding = ("--attempt=a7", "--generation=3", "--task=t9")
        result, run, _clone, session = env.launch(_probe(env), "claude", *binding)
        assert result.returncode == 0, stderr_of(run, result)
        home = run / "state/home"
        assert (home / "done").read_text() == "probed\n"
        # The call inside went through and reached the provider with the real key.
        assert json.loads((home / "answer.json").read_text())["type"] == "message"
        assert [r.headers.get("x-api-key") for r in env.provider.requests] == [REAL_KEY]
        (row,) = env.ledger(session)
        assert (row["attempt"], row["generation"], row["task"]) == ("a7", 3, "t9")
        sentinel = sentinel_in(home / "env.txt")
        answer = refused_after(env, sentinel)
        assert answer.status_code == 401
        assert "revoked" in answer.json()["error"]["message"]
        assert len(env.provider.requests) == 1  # nothing forwarded after the end


AGENTNS_CALL = r"""
env > "$HOME/env.txt"
code=$(curl -s -o "$HOME/answer.json" -w '%{http_code}' -H "x-api-key: $ANTHROPIC_API_KEY" \
  -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' \
  -d '{"model":"claude-sonnet-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' \
  "$ANTHROPIC_BASE_URL/v1/messages")
test "$code" = 200 || exit 26
"""


def test_the_ledger_row_and_the_log_line_name_the_agent_session(make_env: MakeEnv) -> None:
    with make_env({"turns": []}, {}) as env:  # the mock harness makes one model call
        result, run, _clone, session = env.launch(AGENTNS_CALL, "claude")
        assert result.returncode == 0, stderr_of(run, result)
        seen = dict(
            line.split("=", 1)
            for line in (run / "state/home/env.txt").read_text().splitlines()
            if "=" in line
        )
        sid, mode = seen["AGENTNS_SESSION_ID"], seen["AGENTNS_MODE"]
        assert len(sid) == 32 and mode in ("synth-fallback", "prctl")
        end = terminal(run)
        assert (end["agentns_session_id"], end["agentns_mode"]) == (sid, mode)
        (row,) = env.ledger(session)
        assert (row["agentns_session_id"], row["agentns_mode"]) == (sid, mode)
        logged = [json.loads(x) for x in env.log.read_text().splitlines()]
        (line,) = [x for x in logged if x["session"] == session]
        assert (line["agentns_session_id"], line["agentns_mode"]) == (sid, mode)
        assert line["outcome"] == "ok"


def test_a_killed_launch_loses_its_sentinel(make_env: MakeEnv) -> None:
    script = "env > $HOME/env.tmp && mv $HOME/env.tmp $HOME/env.txt\nexec sleep 600\n"
    with make_env({"turns": []}, {}) as env:
        run, clone = env.kit.new_run(script)
        launch_id = str(uuid.uuid4())
        argv = env.kit.argv(run, clone, "--harness=claude", "--session-id", launch_id)
        env_vars = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        proc = subprocess.Popen(argv, env=env_vars, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while not (run / "state/home/env.txt").exists():
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.05)
            sentinel = sentinel_in(run / "state/home/env.txt")
            proc.send_signal(signal.SIGKILL)  # no finally runs in the launch
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()
            # What the supervisor does for a launch that died: end its cgroups (the killed
            # launch could not remove them).
            left = LaunchLimits(Limits(), f"agentc-{launch_id}")
            left.adopt()
            had = bool(left.groups)
            remove_left(Limits(), left.name)
        assert had or left.backend == "rlimit"  # the kill left them behind
        left.adopt()
        assert left.groups == []
        deadline = time.monotonic() + 10
        while True:  # the gateway notices the closed control connection
            answer = refused_after(env, sentinel)
            if answer.status_code == 401 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert answer.status_code == 401
        assert "control connection closed" in answer.json()["error"]["message"]


# ------------------------------------------------------------------ caps


def test_a_cap_reached_mid_run_ends_claude_cleanly_and_the_record_names_it(
    make_env: MakeEnv,
) -> None:
    expensive = {"input_tokens": 100_000, "output_tokens": 1000}  # $0.21 at claude-sonnet-5
    script = {
        "turns": [
            {"tool_calls": [{"tool": "run", "command": "echo one > one.txt"}], "usage": expensive},
            {"tool_calls": [{"tool": "run", "command": "echo two > two.txt"}]},
            {"text": "never"},
        ]
    }
    with make_env(script, {"claude": program("claude")}, launch_usd=0.05) as env:
        claude_settings(env.kit)
        result, run, clone, session = env.launch("Do two steps.", "claude", f"--model={MODEL}")
        stderr = stderr_of(run, result)
        assert "Traceback" not in result.stderr
        end = terminal(run)
        assert end["reason"] in ("exited", "failed") and end["signal"] is None, stderr
        assert end["cap"] == "launch"
        assert result_line(result)["cap"] == "launch"
        assert (clone / "one.txt").exists() and not (clone / "two.txt").exists()
        # Only the first main call reached the provider; the second was refused at the gateway.
        assert len(env.provider.main_requests()) == 1
        refused = [r for r in env.ledger(session) if r.get("refused_cap")]
        assert refused and {r["refused_cap"] for r in refused} == {"launch"}
        events = (run / "events.jsonl").read_text()
        assert "launch cost cap is reached" in events
