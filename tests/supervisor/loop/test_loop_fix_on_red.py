"""Fix-on-red end to end: the real loop, the real integrator and a real coordinator. A candidate
fails a required check; the integrator sends it back with the check; the loop's next attempt
starts from that candidate (on the same base), its prompt naming the check and its command;
the fixed candidate lands with both commits' change."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.client.kit import git
from tests.integrator.kit import make_setup
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import make_loop_kit

FIXING_AGENT = """#!/bin/sh
set -e
cat > "$TMPDIR/prompt.md"
echo '{"type": "agent", "step": "start"}'
cd agentc-checkout
if [ -f greeting.txt ]; then
  echo fixed > fixed.txt; git add fixed.txt; git commit --quiet -m fix; FROM=candidate
else
  echo hi > greeting.txt; git add greeting.txt; git commit --quiet -m greeting; FROM=target
fi
START=$(grep -c '"starts_from_candidate": {' "$TMPDIR/prompt.md" || true)
NAMED=$(grep -c needs-fixed "$TMPDIR/prompt.md" || true)
COMMAND=$(grep -c 'test -f fixed.txt' "$TMPDIR/prompt.md" || true)
cat > "$TMPDIR/submission.json" <<JSON
{"summary": "from $FROM; start $START; check $NAMED; command $COMMAND",
 "acceptance_evidence": [{"criterion": "greeting exists", "evidence": "greeting.txt"}]}
JSON
agent-coordinator submissions code --checkout "$PWD" --input "$TMPDIR/submission.json" \\
    --json > "$TMPDIR/submitted.json"
echo '{"type": "agent", "step": "submitted"}'
"""
CHECK = ["/bin/sh", "-c", "! test -f greeting.txt || test -f fixed.txt"]


def test_a_red_candidate_is_fixed_by_an_attempt_that_starts_from_it(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, FIXING_AGENT, policy={"review_mode": "none"})
    s = make_setup(short_tmp / "integrator", server.url, admin, on=(loop.project, loop.origin))
    s.write_config({"needs-fixed": CHECK})
    task = loop.task()

    first = loop.once()
    assert first.returncode == 0, first.stderr
    red = loop.submission(task["id"])
    assert red["summary"] == "from target; start 0; check 0; command 0"
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    shown = loop.show(task["id"])
    assert (shown["work_status"], shown["red_rounds"]) == ("ready", 1)

    second = loop.once()
    assert second.returncode == 0, second.stderr
    fixed = loop.submission(task["id"])
    assert fixed["id"] != red["id"]
    # It started from the red candidate, on the same base, and was told the check's command.
    assert fixed["summary"].startswith("from candidate; start ")
    assert "start 0" not in fixed["summary"] and "command 0" not in fixed["summary"]
    assert fixed["base_revision"] == red["base_revision"]
    parent = git(loop.origin, "rev-parse", f"{fixed['candidate_revision']}^")
    assert parent == red["candidate_revision"]

    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    assert loop.show(task["id"])["work_status"] == "done"
    landed = git(loop.origin, "ls-tree", "--name-only", "refs/heads/main").split()
    assert {"greeting.txt", "fixed.txt"} <= set(landed)


REDOING_AGENT = """#!/bin/sh
set -e
cat > "$TMPDIR/prompt.md"
echo '{"type": "agent", "step": "start"}'
cd agentc-checkout
PREVIOUS=$(grep -o '"candidate_revision": "[0-9a-f]*"' "$TMPDIR/prompt.md" \\
    | head -1 | cut -d'"' -f4)
if [ -n "$PREVIOUS" ] && git cat-file -e "$PREVIOUS^{commit}" 2>/dev/null; then
  HELD=yes; echo merged > shared.txt
else
  HELD=no; echo mine > shared.txt
fi
git add shared.txt; git commit --quiet -m shared
cat > "$TMPDIR/submission.json" <<JSON
{"summary": "previous candidate here: $HELD",
 "acceptance_evidence": [{"criterion": "greeting exists", "evidence": "shared.txt"}]}
JSON
agent-coordinator submissions code --checkout "$PWD" --input "$TMPDIR/submission.json" \\
    --json > "$TMPDIR/submitted.json"
"""


def test_a_conflicting_candidate_is_redone_on_the_moved_target(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, REDOING_AGENT, policy={"review_mode": "none"})
    s = make_setup(short_tmp / "integrator", server.url, admin, on=(loop.project, loop.origin))
    s.write_config({"unit": ["/bin/sh", "-c", "test -f README"]})
    task = loop.task()
    assert loop.once().returncode == 0
    first = loop.submission(task["id"])
    assert first["summary"] == "previous candidate here: no"
    moved = s.push_to_target({"shared.txt": "the target's\n"}, "someone else's shared.txt")
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    back = s.landing(task["id"])["sent_back"]
    assert back["reason_code"] == "conflict"
    assert back["reason"].startswith("conflict with the target in shared.txt (changed on the ")
    assert moved[:7] in back["reason"]

    assert loop.once().returncode == 0
    again = loop.submission(task["id"])
    assert again["summary"] == "previous candidate here: yes"  # its commits were at hand
    assert again["base_revision"] == moved  # redone on the moved target
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    assert loop.show(task["id"])["work_status"] == "done"
    assert git(loop.origin, "show", "refs/heads/main:shared.txt") == "merged"
