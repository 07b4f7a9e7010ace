"""The integrator's private repository and every git command it runs.

A bare repository under the work directory (``repo/``), made with ``git init --bare`` (never a
clone of the remote, so no hard links into anyone else's objects), with hooks off
(``core.hooksPath=/dev/null``), no system or global configuration, credential helpers and the
``ext::`` transport off, and every fetched object checked (``fetch.fsckObjects``). Its own refs
live under ``refs/integrator/``. The remote is any git URL.

Nothing is ever checked out in it, and no attributes reach its merges: a bare repository reads
no ``.gitattributes`` from any tree, ``core.attributesFile`` is ``/dev/null`` and
``GIT_ATTR_NOSYSTEM`` is set, so neither the candidate nor the target can pick a merge driver
(``merge=union``) or a filter for the merge that builds a landing (tests/integrator/test_trees.py).
Every commit it makes is authored and committed by the integrator's identity.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentc.core.errors import AgentcError
from agentc.files.git import git_env, run_git

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
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "merge.renames=false",
)
_COMMIT_LINE = re.compile(rb"commit ([0-9a-f]{40}|[0-9a-f]{64})\n")
MAX_COMPARE_BYTES = 8 * 1024 * 1024
MIN_GIT = (2, 38)  # a larger blob changed on both sides is not compared


class GitFailure(AgentcError):
    """A git command failed or timed out (the remote is unreachable, an object is bad...)."""


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:]) if lines else "no message"


def _bytes_detail(stderr: bytes) -> str:
    return _last_lines(stderr.decode("utf-8", errors="replace"))


@dataclass(frozen=True)
class Merged:
    """The tree of a clean merge, or git's account of the conflict."""

    tree: str | None
    conflict: str = ""
    paths: tuple[str, ...] = ()  # the conflicting paths (as git names them, -z is not used)


class Repo:
    """The private repository at ``path``, integrating into ``branch`` of ``remote``."""

    def __init__(
        self,
        path: Path,
        remote: str,
        branch: str,
        identity: tuple[str, str],
        ssh_key: Path | None = None,
        signing_key: Path | None = None,
    ) -> None:
        self.path = path
        self.signing_key = signing_key
        self.git_version: tuple[int, int] | None = None
        self.remote = remote
        self.branch = branch
        name, email = identity
        self.env = {
            **git_env(ssh_key),
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
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

    def git_bytes(self, *args: str) -> bytes:
        """A git command's standard output, undecoded (raw diffs, blobs)."""
        done: subprocess.CompletedProcess[bytes] = run_git(
            ["git", *_CONFIG, *args], self.path, self.env, GIT_TIMEOUT, GitFailure, _bytes_detail
        )
        return done.stdout

    def ensure(self) -> None:
        """Create the bare repository on first use. A work directory of an earlier version
        holds a non-bare one (``repo/.git``, checked out for rebases): it only caches what the
        remote has, so it is replaced."""
        self.check_version()
        if (self.path / ".git").exists():
            shutil.rmtree(self.path)
        if not (self.path / "HEAD").exists():
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.git("init", "--quiet", "--bare", "--template=", ".")
            self.git("config", "core.hooksPath", "/dev/null")

    def check_version(self) -> None:
        """Landings are built with ``git merge-tree --write-tree`` (git 2.38 or newer): an older
        git is refused here, naming the version, rather than failing each candidate."""
        if self.git_version is None:
            said = self.git("version", cwd=Path("/")).stdout.strip()
            found = re.search(r"(\d+)\.(\d+)", said)
            self.git_version = (int(found[1]), int(found[2])) if found else (0, 0)
        if self.git_version < MIN_GIT:
            raise GitFailure(
                f"the integrator needs git {MIN_GIT[0]}.{MIN_GIT[1]} or newer "
                f"(merge-tree --write-tree); this is {self.git_version[0]}.{self.git_version[1]}"
            )

    def ls_remote(self, pattern: str) -> dict[str, str]:
        """The remote's refs matching ``pattern`` (git's tail match; callers check the names
        they get) and their revisions."""
        done = self.git(
            "ls-remote", "--refs", "--end-of-options", self.remote, pattern, check=False
        )
        if done.returncode != 0:
            raise GitFailure(f"cannot read the remote: {_last_lines(done.stderr)}")
        found = {}
        for line in done.stdout.splitlines():
            sha, _, name = line.partition("\t")
            found[name] = sha
        return found

    def remote_tip(self) -> str | None:
        """The target branch's revision on the remote now (None: the branch does not exist)."""
        return self.ls_remote(f"refs/heads/{self.branch}").get(f"refs/heads/{self.branch}")

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

    def delete_remote_refs(self, expected: Mapping[str, str]) -> tuple[set[str], str]:
        """Compare-and-swap deletes: each ref goes only if the remote still holds the expected
        revision. The refs deleted, and git's account of any it did not delete."""
        leases = [f"--force-with-lease={ref}:{sha}" for ref, sha in expected.items()]
        done = self.git(
            "push",
            "--no-verify",
            "--porcelain",
            *leases,
            "--end-of-options",
            self.remote,
            *(f":{ref}" for ref in expected),
            check=False,
            push=True,
        )
        deleted = set()
        for line in done.stdout.splitlines():
            flag, _, rest = line.partition("\t")
            spec = rest.partition("\t")[0]
            if flag == "-" and spec.startswith(":") and spec[1:] in expected:
                deleted.add(spec[1:])
        failed = "" if done.returncode == 0 else _last_lines(done.stdout + "\n" + done.stderr)
        return deleted, failed

    # -- trees: the landing is computed from trees only, never from a working tree ------------

    def tree_of(self, revision: str) -> str:
        return self.git("rev-parse", "--verify", f"{revision}^{{tree}}").stdout.strip()

    def diff_raw(self, old: str, new: str) -> bytes:
        """``git diff-tree -r -z --no-renames <old> <new>``: the change between two trees."""
        return self.git_bytes("diff-tree", "-r", "-z", "--no-renames", old, new)

    def blob(self, oid: str) -> bytes | None:
        """A blob's content, or None when it is larger than ``MAX_COMPARE_BYTES``."""
        return None if self.size(oid) > MAX_COMPARE_BYTES else self.blob_bytes(oid)

    def size(self, oid: str) -> int:
        return int(self.git("cat-file", "-s", oid).stdout.strip())

    def blob_bytes(self, oid: str) -> bytes:
        return self.git_bytes("cat-file", "blob", oid)

    def unified0(self, old: str, new: str) -> bytes:
        """Git's diff of two blobs without context: the lines the new one adds, numbered by
        its hunk headers (no path: no attributes, no textconv)."""
        return self.git_bytes(
            "diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", "--end-of-options",
            old, new,
        )  # fmt: skip

    def commit_texts(self, base: str, candidate: str, limit: int) -> list[tuple[str, bytes]]:
        """The raw text (headers, author, committer, message) of each commit in
        ``base..candidate``, at most ``limit``: ``git log --pretty=raw -z``, a record split by
        a NUL inside a message joined back to its commit."""
        out = self.git_bytes(
            "log", "-z", "--pretty=raw", "--no-color", f"--max-count={limit}",
            f"{base}..{candidate}",
        )  # fmt: skip
        commits: list[tuple[str, bytes]] = []
        for record in out.split(b"\0"):
            head = _COMMIT_LINE.match(record)
            if head:
                commits.append((head[1].decode(), record))
            elif commits:
                sha, text = commits[-1]
                commits[-1] = (sha, text + b"\0" + record)
        return commits

    def patch(self, old: str, new: str) -> bytes:
        """Git's three-line-context diff of two blobs (no path: no attributes, no textconv)."""
        return self.git_bytes(
            "diff",
            "-U3",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--diff-algorithm=myers",
            "--end-of-options",
            old,
            new,
        )

    def commit_tree(
        self, tree: str, parents: list[str], message: str, *, sign: bool = False
    ) -> str:
        """A new commit of ``tree`` with ``parents``, by the integrator's identity; with
        ``sign`` and a signing key, signed with it (``gpg.format = ssh``: ``ssh-keygen -Y
        sign``)."""
        args = [arg for parent in parents for arg in ("-p", parent)]
        signing: list[str] = []
        if sign and self.signing_key is not None:
            signing = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={self.signing_key}"]
            signing += ["-c", "gpg.ssh.program=ssh-keygen", "commit-tree", "-S"]
        else:
            signing = ["commit-tree"]
        return self.git(*signing, *args, "-m", message, tree).stdout.strip()

    def merge_trees(self, ours: str, theirs: str) -> Merged:
        """``git merge-tree --write-tree`` of two commits: in the bare repository, without
        renames, without any attribute (no merge driver, no filter)."""
        done = self.git("merge-tree", "--write-tree", "--name-only", ours, theirs, check=False)
        head, _, rest = done.stdout.partition("\n")
        if done.returncode == 0:
            return Merged(head.strip())
        if done.returncode != 1:
            raise GitFailure(f"git merge-tree failed: {_last_lines(done.stderr)}")
        listed, _, said = rest.partition("\n\n")
        messages = [line for line in said.splitlines() if line.strip()]
        paths = tuple(dict.fromkeys(p for p in listed.splitlines() if p))
        return Merged(None, _last_lines("\n".join(messages), 6), paths)

    def touched(self, base: str, tip: str, paths: tuple[str, ...], limit: int = 10) -> list[str]:
        """The target's commits since ``base`` that changed ``paths`` (short ids, newest
        first): the other side of a conflict."""
        if not paths:
            return []
        out = self.git(
            "log", f"--max-count={limit}", "--format=%h", f"{base}..{tip}", "--", *paths
        ).stdout
        return out.split()

    def find_landing(self, base: str, tip: str, trailers: Mapping[str, str]) -> str | None:
        """The newest commit on the target's first-parent history after ``base`` whose message
        carries every one of ``trailers`` (each exactly once, with that value)."""
        keys = list(trailers)
        fields = "".join(f"%x1f%(trailers:key={key},valueonly,separator=%x2C)" for key in keys)
        out = self.git_bytes(
            "log", "-z", "--first-parent", f"--format=%H{fields}", f"{base}..{tip}"
        )
        want = [trailers[key] for key in keys]
        for record in out.decode("utf-8", errors="replace").split("\0"):
            sha, *values = record.split("\x1f")
            if values == want:
                return sha
        return None

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
