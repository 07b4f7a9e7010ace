"""The integrator's private repository and every git command it runs.

A non-bare repository under the work directory (``repo/``), made with ``git init`` (never a
clone of the remote, so no hard links into anyone else's objects), with hooks off
(``core.hooksPath=/dev/null``), no system or global configuration, credential helpers and the
``ext::`` transport off, and every fetched object checked (``fetch.fsckObjects``). Its own refs
live under ``refs/integrator/``. The remote is any git URL.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agentc.core.errors import AgentcError
from agentc.push.repo import git_env, run_git

GIT_TIMEOUT = 600.0
OWN = "refs/integrator"
# For pushes: `git -c` reaches a local remote's receive-pack through the environment, and the
# remote's own hooks (its policy) must still run there. Our repository's hooks are off in its
# configuration (ensure) and pushes pass --no-verify.
_PUSH_CONFIG = ("-c", "protocol.ext.allow=never", "-c", "credential.helper=")
_CONFIG = (
    *_PUSH_CONFIG,
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "fetch.fsckObjects=true",
    "-c",
    "gc.auto=0",
)


class GitFailure(AgentcError):
    """A git command failed or timed out (the remote is unreachable, an object is bad...)."""


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:]) if lines else "no message"


@dataclass(frozen=True)
class Integrated:
    """The revision to land, or why the candidate cannot land on this target."""

    revision: str | None
    conflict: str | None = None


class Repo:
    """The private repository at ``path``, integrating into ``branch`` of ``remote``."""

    def __init__(
        self,
        path: Path,
        remote: str,
        branch: str,
        committer: tuple[str, str],
        ssh_key: Path | None = None,
    ) -> None:
        self.path = path
        self.remote = remote
        self.branch = branch
        self.env = {
            **git_env(ssh_key),
            "GIT_COMMITTER_NAME": committer[0],
            "GIT_COMMITTER_EMAIL": committer[1],
        }

    def git(
        self, *args: str, check: bool = True, cwd: Path | None = None, push: bool = False
    ) -> subprocess.CompletedProcess[str]:
        argv = ["git", *(_PUSH_CONFIG if push else _CONFIG), *args]
        return run_git(
            argv,
            cwd or self.path,
            self.env,
            GIT_TIMEOUT,
            GitFailure,
            _last_lines,
            check=check,
            text=True,
        )

    def ensure(self) -> None:
        """Create the repository on first use; leave no half-done rebase behind."""
        if not (self.path / ".git").exists():
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.git("init", "--quiet", "--template=", ".")
            self.git("config", "core.hooksPath", "/dev/null")
        git_dir = self.path / ".git"
        if (git_dir / "rebase-merge").exists() or (git_dir / "rebase-apply").exists():
            self.git("rebase", "--abort", check=False)

    def remote_tip(self) -> str | None:
        """The target branch's revision on the remote now (None: the branch does not exist)."""
        ref = f"refs/heads/{self.branch}"
        done = self.git("ls-remote", "--refs", "--end-of-options", self.remote, ref, check=False)
        if done.returncode != 0:
            raise GitFailure(f"cannot read the remote: {_last_lines(done.stderr)}")
        for line in done.stdout.splitlines():
            sha, _, name = line.partition("\t")
            if name == ref:
                return sha
        return None

    def fetch_target(self) -> str | None:
        """Fetch the target branch; its revision (None when the remote lacks the branch)."""
        if self.remote_tip() is None:
            return None
        self.fetch(f"+refs/heads/{self.branch}:{OWN}/target")
        return self.rev(f"{OWN}/target")

    def fetch(self, refspec: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Fetch one refspec from the remote (no tags, no FETCH_HEAD)."""
        return self.git(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--end-of-options",
            self.remote,
            refspec,
            check=check,
        )

    def fetch_candidate(self, ref: str, name: str) -> str | None:
        """Fetch a candidate ref into ``refs/integrator/candidates/<name>``; None if missing."""
        done = self.fetch(f"+{ref}:{OWN}/candidates/{name}", check=False)
        if done.returncode != 0:
            if "couldn't find remote ref" in done.stderr:
                return None
            raise GitFailure(f"cannot fetch {ref}: {_last_lines(done.stderr)}")
        return self.rev(f"{OWN}/candidates/{name}")

    def rev(self, name: str) -> str | None:
        done = self.git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    def has_commit(self, revision: str) -> bool:
        return self.rev(revision) is not None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        done = self.git("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        if done.returncode not in (0, 1):
            raise GitFailure(f"git merge-base failed: {_last_lines(done.stderr)}")
        return done.returncode == 0

    def integrate(self, policy: str, target: str, candidate: str) -> Integrated:
        """The revision that puts ``candidate`` on ``target`` under ``policy``, or a conflict."""
        if self.is_ancestor(target, candidate):
            return Integrated(candidate)
        if policy == "fast-forward":
            return Integrated(None, "the candidate is not a fast-forward of the target")
        base = self.git("merge-base", target, candidate, check=False).stdout.strip()
        if not base:
            return Integrated(None, "the candidate shares no history with the target")
        self.git("checkout", "--quiet", "--detach", "--force", candidate)
        done = self.git("rebase", "--quiet", "--onto", target, base, check=False)
        if done.returncode != 0:
            self.git("rebase", "--abort", check=False)
            detail = _last_lines(done.stdout + "\n" + done.stderr, 6)
            return Integrated(None, f"the candidate does not rebase cleanly: {detail}")
        head = self.rev("HEAD")
        assert head is not None
        if head == target:
            return Integrated(None, "the candidate changes nothing on the current target")
        return Integrated(head)

    def push_if_unmoved(self, old: str, new: str) -> str | None:
        """Compare-and-swap: move the target from ``old`` to ``new``; None when pushed, else
        git's reason (the target moved, or the remote refused)."""
        ref = f"refs/heads/{self.branch}"
        done = self.git(
            "push",
            "--quiet",
            "--no-verify",
            "--porcelain",
            f"--force-with-lease={ref}:{old}",
            "--end-of-options",
            self.remote,
            f"{new}:{ref}",
            check=False,
            push=True,
        )
        if done.returncode == 0:
            return None
        return _last_lines(done.stdout + "\n" + done.stderr)

    def checkout_tree(self, revision: str, dest: Path) -> None:
        """A fresh, self-contained repository at ``dest`` with exactly ``revision`` checked out
        (its objects fetched, never linked, from the private repository)."""
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(mode=0o700, parents=True)
        self.git("update-ref", f"{OWN}/check", revision)
        self.git("init", "--quiet", "--template=", str(dest), cwd=dest)
        self.git(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            str(self.path),
            f"+{OWN}/check:refs/heads/checked",
            cwd=dest,
        )
        self.git("checkout", "--quiet", "--detach", revision, cwd=dest)
