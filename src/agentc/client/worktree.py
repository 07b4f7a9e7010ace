"""The local git side: an attempt's worktree, and publishing a candidate ref.

`add` makes the attempt's checkout a git worktree of the clone on branch `agentc/<session>` at
a base revision resolved to its full sha. `push_candidate` publishes the candidate commit to a
create-only ref under `refs/agent-coordinator/candidates/` and reads it back before the
submission names it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from agentc.client.errors import LocalConflict
from agentc.core.errors import ConfigError
from agentc.files.git import run_git

SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
GIT_TIMEOUT = 120


def git(cwd: str | Path, *args: str) -> str:
    """Run git in `cwd`, in the agent's own environment; its stderr becomes the error message."""
    if shutil.which("git") is None:
        raise ConfigError("git is not installed or not on PATH")
    argv = ["git", "-C", str(cwd), *args]
    done = run_git(argv, None, None, GIT_TIMEOUT, LocalConflict, str.strip, text=True)
    return done.stdout.strip()


def rev_parse(cwd: str | Path, rev: str) -> str:
    if not Path(cwd).is_dir():
        raise ConfigError(f"{cwd} is not a directory")
    sha = git(cwd, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}")
    if not SHA.match(sha):
        raise LocalConflict(f"git rev-parse {rev} gave {sha!r}, not a full sha")
    return sha


def add(source: str, path: str, branch: str, base: str) -> dict[str, Any]:
    """`git worktree add -b <branch> <path> <base>` in the clone at `source`."""
    src = Path(source)
    if not src.is_dir():
        raise ConfigError(f"--source {source} is not a directory")
    top = git(src, "rev-parse", "--show-toplevel")
    sha = rev_parse(top, base)
    target = Path(path)
    if target.exists() and any(target.iterdir()):
        raise LocalConflict(f"{target} exists and is not empty")
    exists = subprocess.run(
        ["git", "-C", top, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}"],
        check=False,
        timeout=GIT_TIMEOUT,
    )
    if exists.returncode == 0:
        raise LocalConflict(
            f"branch {branch} already exists in {top}; a session prepares one worktree"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    git(top, "worktree", "add", "-b", branch, str(target), sha)
    return {"path": str(target.resolve()), "branch": branch, "base_revision": sha, "source": top}


def push_candidate(checkout: str, remote: str, revision: str, ref: str) -> None:
    """Create `ref` on `remote` at `revision` (never move an existing one), then verify it."""
    if not SHA.match(revision):
        raise ConfigError(f"candidate_revision {revision!r} is not a full sha")
    if remote.startswith("-"):
        raise ConfigError(f"remote {remote!r} is not a remote name or URL")
    current = git(checkout, "ls-remote", "--end-of-options", remote, ref).split()
    if current and current[0] == revision:
        return  # already published (a retry after the push)
    if current:
        raise LocalConflict(
            f"{ref} already exists on {remote} at {current[0]}; refs are never moved"
        )
    git(checkout, "push", "--quiet", f"--force-with-lease={ref}:", remote, f"{revision}:{ref}")
    back = git(checkout, "ls-remote", "--end-of-options", remote, ref).split()
    if not back or back[0] != revision:
        raise LocalConflict(f"{remote} does not show {ref} at {revision} after the push")
