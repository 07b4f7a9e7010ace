"""The loop posts agent output with its own credential (a setup's log tail in a handoff, a
reviewer's verdict, a model name in a cost row); when the coordinator refuses one for a secret
(docs/api.md, secret_detected) the loop goes on: the handoff is sent again with the output left
out, the verdict is released as a failed review saying why, the cost row is quarantined."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from agentc.gateway.ledger import Ledger
from tests.core import kit
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import ledger_call, make_loop_kit
from tests.supervisor.loop.review_kit import (
    make_review_kit,
    mirror_branches,
    review_activity,
    submit,
)

pytestmark = pytest.mark.root

# Leaves a mark in the cache if it ever runs.
MARKING_AGENT = """#!/bin/sh
cat > /dev/null
touch "$(cat .cache-path 2>/dev/null || echo /nonexistent)/agent-ran"
"""


def test_a_handoff_quoting_the_launchs_token_is_sent_again_without_it(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """The project's setup (the repository's code) prints the launch's coordinator credential
    base64-encoded and fails; the release quoting its output is refused, and the attempt is
    released with a note instead, in the same poll."""
    loop = make_loop_kit(short_tmp, server, admin, MARKING_AGENT)
    script = (
        'grep -rh token "$(dirname "$TMPDIR")/state/coordinator" | base64 -w0; '
        "echo; echo 'setup failed' >&2; exit 3"
    )
    loop.extra = f"command = {json.dumps(['sh', '-c', script])}\n"
    loop.write_config()
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [final] = loop.records("finished")
    assert final["outcome"] == "released", final
    kept = loop.state / "loop/unsubmitted" / final["launch_id"] / "setup.log"
    leaked = kept.read_text().split()[0]  # the setup did print the credential, encoded
    decoded = subprocess.run(
        ["base64", "-d"], input=leaked, capture_output=True, text=True, check=True
    ).stdout
    token = decoded.split('token = "')[1].split('"')[0]  # the launch's attempt credential
    role = (loop.state / "impl/coordinator/credentials.toml").read_text()
    assert len(token) == 64 and token not in role  # (the role's never enters a launch)
    handoff = loop.attempt(final["attempt"])["attempt"]["handoff"]
    assert "the handoff quoted the launch's output, and the coordinator refused it" in handoff
    assert "an agent credential of this coordinator (base64(text))" in handoff, handoff
    assert leaked not in handoff and token not in handoff
    # (The loop's own log on its host quotes the setup's output, as the kept setup.log does.)
    assert loop.show(task["id"])["work_status"] == "ready"
    assert loop.leftovers() == []


def test_a_verdict_quoting_a_secret_is_released_as_a_failed_review(
    server: LiveServer, admin: httpx.Client, short_tmp: Path, account: str
) -> None:
    """The candidate's test prints a key; the honest reviewer quotes the test's output in its
    verdict, which the coordinator refuses: the review is released as a failed one naming the
    field and the kind, and counts as a strike."""
    loop = make_review_kit(short_tmp, server, admin, account)
    secret = kit.FORMATS["a GitHub token"]()
    made = submit(loop, f'echo "deploy with {secret}" >&2\nexit 1\n')
    task, submission = made["task"]["id"], made["submission"]["id"]
    result = loop.once()
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "carries a GitHub token (plain), which the coordinator refuses" in result.stderr
    assert secret not in result.stderr
    activity = review_activity(loop, task)
    assert activity["state"] == "queued" and activity["generation"] == 1
    detail = admin.get(f"/api/v1/projects/{loop.project}/tasks/{task}").json()["data"]
    [released] = [a for a in detail["attempts"] if a.get("activity_id")]
    assert released["state"] == "released"
    assert "carries a GitHub token (plain), which the coordinator refuses" in released["handoff"]
    assert secret not in json.dumps(detail)
    strikes = json.loads((loop.state / "loop/review-strikes.json").read_text())
    assert strikes[submission]["failures"] == 1
    assert loop.records() == [] and loop.leftovers() == [] and mirror_branches(loop) == []


def test_a_release_summary_quoting_a_secret_is_sent_again_without_it(
    server: LiveServer, admin: httpx.Client, short_tmp: Path, account: str
) -> None:
    """A reviewer whose verdict is invalid and quotes a key (its decision): the loop's release
    summary names the problem quoting it, the coordinator refuses that, and the review is
    released with a note instead."""
    loop = make_review_kit(short_tmp, server, admin, account, mode=None)
    secret = kit.FORMATS["a Stripe live key"]()
    program = loop.state.parent.parent / "reviewer" / "review.py"
    program.parent.mkdir(exist_ok=True)
    verdict: dict[str, object] = {
        "decision": secret,
        "summary": "s",
        "findings": [],
        "criteria_evidence": [],
        "amendment_decision": None,
    }
    program.write_text(
        "#!/usr/bin/python3\nimport sys\nsys.stdin.read()\n"
        f"print({json.dumps(json.dumps(verdict))}, flush=True)\n"
    )
    program.chmod(0o755)
    loop.run.update(reviewer=True, reviewer_harness=f"command:{program}")
    loop.write_config()
    made = submit(loop, 'echo "greeting.txt is there"\n', {"greeting.txt": "hi\n"})
    task = made["task"]["id"]
    result = loop.once()
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    detail = admin.get(f"/api/v1/projects/{loop.project}/tasks/{task}").json()["data"]
    [released] = [a for a in detail["attempts"] if a.get("activity_id")]
    assert released["state"] == "released"
    note = released["handoff"]
    assert "the review's release summary quoted the launch's output" in note, note
    assert "a Stripe live key (plain)" in note
    assert secret not in json.dumps(detail)
    assert review_activity(loop, task)["state"] == "queued"
    assert loop.records() == [] and loop.leftovers() == []


def test_a_cost_row_carrying_a_secret_is_quarantined_and_the_others_reported(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    """A ledger row's model is what the harness asked the gateway for: agent text."""
    loop = make_loop_kit(short_tmp, server, admin, MARKING_AGENT)
    secret = kit.FORMATS["an OpenAI API key"]()
    (loop.state / "gateway").mkdir()
    ledger = Ledger(loop.state / "gateway/ledger.jsonl")
    ledger.append(ledger_call("clean-launch", None, 1, "t1"))
    ledger.append(ledger_call("leaky-launch", None, 1, "t1", model=secret))
    ledger.append(ledger_call("other-launch", None, 1, "t1"))
    out = subprocess.run(
        loop.argv("report-costs"), env=loop.env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "accepted": 2, "duplicates": 0, "rejected": 0, "quarantined": 1, "pending": 0
    }  # fmt: skip
    quarantined = (loop.state / "loop/costs.quarantined").read_text()
    [row] = [json.loads(line) for line in quarantined.splitlines()]
    assert row["kind"] == "secret_detected" and "an OpenAI API key" in row["reason"]
    assert secret not in quarantined and secret not in out.stderr


# Publishes two WIP checkpoints through the push helper, saying on stdout (events) whether each
# went through and on stderr why not; then exits without submitting.
WIP_AGENT = """#!/bin/sh
cat > /dev/null
echo '{"type": "agent", "step": "start"}'
cd agentc-checkout
for n in 1 2; do
  echo "$n" > wip.txt
  git add wip.txt
  git commit --quiet -m "wip $n"
  if agent-coordinator checkpoint --summary "wip $n" --revision "$(git rev-parse HEAD)" \\
      --push-wip; then
    echo "{\\"type\\": \\"agent\\", \\"wip\\": $n, \\"ok\\": true}"
  else
    echo "{\\"type\\": \\"agent\\", \\"wip\\": $n, \\"ok\\": false}"
  fi
done
"""


def test_the_loop_gives_its_helper_the_wip_quota_of_supervisor_toml(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, WIP_AGENT, push_helper={"wip_max_refs": 1})
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    tails = loop.tails()
    assert '"wip": 1, "ok": true' in tails and '"wip": 2, "ok": false' in tails, tails
    assert "its quota (wip_max_refs 1); nothing was pushed" in tails
    refs = subprocess.run(
        ["git", "--git-dir", str(loop.origin), "for-each-ref", "--format=%(refname)",
         f"refs/agent-coordinator/candidates/wip/{task['id']}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(refs) == 1, refs
