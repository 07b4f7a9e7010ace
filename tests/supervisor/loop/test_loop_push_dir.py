"""Where a launch's candidate push helper lives: always under the state root (issue 25).

For a long state path the loop once fell back to ``/tmp/agentc-push-<uid>-<digest of the
state path>``, a name any local account could compute and create first, which stopped every
implementer launch. Another account squats that path here (and plants a file in it); the
launch still publishes its candidate through a helper under ``<state>/push``, whose socket
path is longer than ``sun_path`` allows, and the squatter's directory is left as it was.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import subprocess
from pathlib import Path

import httpx

from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import SUBMITTING_AGENT, make_loop_kit


def test_a_squatted_shared_push_directory_stops_no_launch(
    server: LiveServer, admin: httpx.Client, short_tmp: Path, account: str
) -> None:
    root = short_tmp / ("state-kept-deep-" + "x" * 80)
    root.mkdir()
    loop = make_loop_kit(root, server, admin, SUBMITTING_AGENT)
    state = Path(os.path.realpath(loop.state))
    longest = state / "push" / ("x" * 12) / "sock" / "s"
    assert len(os.fsencode(str(longest))) > 108  # the old code's fallback, and beyond sun_path
    digest = hashlib.sha256(os.fsencode(str(state))).hexdigest()[:16]
    old = Path("/tmp") / f"agentc-push-{os.getuid()}-{digest}"
    entry = pwd.getpwnam(account)
    as_squatter = [
        "setpriv",
        f"--reuid={entry.pw_uid}",
        f"--regid={entry.pw_gid}",
        "--clear-groups",
    ]
    subprocess.run([*as_squatter, "mkdir", "-m", "0777", str(old)], check=True)
    subprocess.run([*as_squatter, "touch", str(old / "planted")], check=True)
    try:
        task = loop.task()
        result = loop.once()
        assert result.returncode == 0, result.stderr
        assert "exit_code: 0" in result.stderr, result.stderr + loop.tails()
        assert loop.show(task["id"])["work_status"] == "waiting_review"
        [final] = loop.records("finished")
        ref = f"refs/agent-coordinator/candidates/{task['id']}/{final['launch_id']}"
        assert loop.submission(task["id"])["candidate_ref"] == ref
        shown = subprocess.run(
            ["git", "-C", str(loop.origin), "rev-parse", "--verify", ref],
            capture_output=True,
            text=True,
        )
        assert shown.returncode == 0, shown.stderr
        # The helper lived under the state root and is gone; the squatter's directory is as
        # the squatter left it (owner, mode, content): the loop never used or swept it.
        assert [p.name for p in (state / "push").iterdir() if not p.name.startswith(".")] == []
        info = old.lstat()
        assert (info.st_uid, info.st_mode & 0o7777) == (entry.pw_uid, 0o777)
        assert [p.name for p in old.iterdir()] == ["planted"]
    finally:
        subprocess.run(["rm", "-rf", str(old)], check=True)
