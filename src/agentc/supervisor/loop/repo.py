"""The loop's git side: a bare mirror under the state root, and a hardened clone per launch.

The mirror (``<state>/mirror.git``) is fetched from the project's repository before each claim;
a review fetches the submission's candidate ref into ``refs/agentc-review/<launch>`` there for
the time of the review (outside ``refs/heads/``, which a fetch with ``--prune`` mirrors: one
launch's fetch never removes another's review ref). Launches run side by side and share the
mirror: git writes to it (a fetch, a ref removed, its own repacking, never left to run in the
background) with the mirror's lock held exclusively, and a clone or a read of the instruction
files holds it shared, so no repack removes a pack file they copy (:func:`locked`).
Each launch's clone is made from the mirror with ``--local --no-hardlinks`` (git copies the
object files: no hard links into the mirror), hooks off (``core.hooksPath=/dev/null`` during
the clone and in the clone's config), the commit identity preset, ``origin`` pointing at the
project's repository for reads and a push URL that cannot be reached (publishing goes through
the agent CLI). The repository's instruction files are read from the mirror at the cloned
revision, never from the clone.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from agentc.core.errors import SupervisorError
from agentc.files import locks
from agentc.files.git import Out, git_env, run_git
from agentc.files.procs import SYSTEM_PATH
from agentc.supervisor.contracts import INSTRUCTION_FILES

GIT_TIMEOUT = 300
NO_PUSH = "agentc-no-push://publish-through-agent-coordinator"
MAX_BLOB = 1 << 20
SAFE_ENV = {**git_env(), "PATH": SYSTEM_PATH}  # the loop runs as root: a fixed PATH


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git (hooks off) with ``SAFE_ENV``; its output, or SupervisorError naming the
    subcommand and git's complaint."""
    return _run_git(args, cwd, _complaint, text=True).stdout.strip()


def git_bytes(*args: str, cwd: Path | None = None) -> bytes:
    """Like :func:`git`, git's output as it is (bytes)."""
    out: bytes = _run_git(args, cwd, _complaint_bytes).stdout
    return out


def _complaint_bytes(stderr: bytes) -> str:
    return _complaint(stderr.decode("utf-8", errors="replace"))


def _run_git(
    args: tuple[str, ...],
    cwd: Path | None,
    detail: Callable[[Out], str],
    *,
    check: bool = True,
    text: bool = False,
) -> subprocess.CompletedProcess[Out]:
    argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "protocol.file.allow=always", *args]
    return run_git(
        argv, cwd, SAFE_ENV, GIT_TIMEOUT, SupervisorError, detail, check=check, text=text
    )


def _complaint(stderr: str) -> str:
    return " ".join(stderr.split())[:300]


@contextlib.contextmanager
def locked(mirror: Path, *, shared: bool = False) -> Iterator[None]:
    """The mirror's lock (``<mirror>.lock`` beside it), exclusive to write, ``shared`` to copy
    or read."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with locks.locked(mirror.with_name(mirror.name + ".lock"), shared=shared):
        yield


# A write to the mirror repacks in the foreground, under the lock, if it repacks at all.
IN_FRONT = ("-c", "gc.autoDetach=false", "-c", "maintenance.autoDetach=false")


def update_mirror(mirror: Path, url: str, branch: str) -> str:
    """Create or fetch the bare mirror; returns the branch head's full sha."""
    with locked(mirror):
        if not (mirror / "HEAD").exists():
            git("clone", "--quiet", "--bare", "--no-hardlinks", "--", url, str(mirror))
        else:
            git("-C", str(mirror), "remote", "set-url", "origin", url)
        git(
            *IN_FRONT,
            "-C",
            str(mirror),
            "fetch",
            "--quiet",
            "--prune",
            "origin",
            "+refs/heads/*:refs/heads/*",
        )
        return git("-C", str(mirror), "rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}")


REVIEW_BRANCH = "refs/agentc-review/"


def fetch_candidate(mirror: Path, ref: str, launch_id: str, revision: str) -> str:
    """Fetch a submission's candidate ref from the mirror's origin (the project's repository)
    into ``refs/agentc-review/<launch>``; it must hold ``revision``. Returns that ref."""
    branch = REVIEW_BRANCH + launch_id
    where = ("-C", str(mirror))
    with locked(mirror):
        try:
            git(*IN_FRONT, *where, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                "origin", f"+{ref}:{branch}")  # fmt: skip
        except SupervisorError as exc:
            detail = str(exc).split(" failed: ", 1)[-1]
            raise SupervisorError(f"cannot fetch the candidate ref {ref}: {detail}") from None
        found = git(*where, "rev-parse", "--verify", f"{branch}^{{commit}}")
    if found != revision:
        raise SupervisorError(
            f"the candidate ref moved: {ref} holds {found}, the submission names {revision}"
        )
    return branch


def merged_tree(mirror: Path, ours: str, theirs: str) -> str:
    """The tree of ``git merge-tree --write-tree <ours> <theirs>`` in the bare mirror (no
    attributes): a clean merge's, or one with conflict markers."""
    done = _run_git(
        ("-C", str(mirror), "merge-tree", "--write-tree", ours, theirs),
        None,
        _complaint,
        check=False,
        text=True,
    )
    if done.returncode not in (0, 1):
        raise SupervisorError(f"git merge-tree failed: {_complaint(done.stderr)}")
    return done.stdout.split("\n", 1)[0].strip()


def start_from(checkout: Path, revision: str) -> None:
    """Move a prepared worktree's branch to ``revision`` (a candidate descending from the
    worktree's registered base, fetched into the mirror the clone was made from)."""
    git("-C", str(checkout), "reset", "--quiet", "--hard", revision)


def delete_review_branch(mirror: Path, launch_id: str) -> None:
    """Remove a review's mirror ref (absent already: nothing to do)."""
    if (mirror / "HEAD").exists():
        with locked(mirror):
            git("-C", str(mirror), "update-ref", "-d", REVIEW_BRANCH + launch_id)


def clone(
    mirror: Path, revision: str, dest: Path, *, origin_url: str, name: str, email: str
) -> None:
    """Clone ``revision`` of the mirror into the empty directory ``dest`` (hardened)."""
    # A local clone with --no-hardlinks copies the mirror's object files (no pack negotiation,
    # no recompression: file:// took 13 s for 50 MB of incompressible data) and links none.
    with locked(mirror, shared=True):
        git("clone", "--quiet", "--local", "--no-hardlinks", "--no-checkout", "--",
            str(mirror), str(dest))  # fmt: skip
    for key, value in (
        ("core.hooksPath", "/dev/null"),
        ("user.name", name),
        ("user.email", email),
        ("remote.origin.url", origin_url),
        ("remote.origin.pushurl", NO_PUSH),
    ):
        git("-C", str(dest), "config", key, value)
    git("-C", str(dest), "checkout", "--quiet", "--detach", revision)
    exclude = dest / ".git/info/exclude"
    exclude.parent.mkdir(exist_ok=True)
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write("/agentc-checkout/\n")


def instruction_files(mirror: Path, revision: str) -> dict[str, bytes]:
    """``AGENTS.md`` and ``CONTRIBUTING.md`` at ``revision``, read from the mirror (size-bounded
    blobs; a missing or oversized one is left out)."""

    def cat_file(*args: str) -> subprocess.CompletedProcess[bytes]:
        return _run_git(("-C", str(mirror), "cat-file", *args), None, bytes.decode, check=False)

    found: dict[str, bytes] = {}
    with locked(mirror, shared=True):
        for name in INSTRUCTION_FILES:
            spec = f"{revision}:{name}"
            size = cat_file("-s", spec)
            if size.returncode != 0 or int(size.stdout.strip() or 0) > MAX_BLOB:
                continue
            blob = cat_file("blob", spec)
            if blob.returncode == 0:
                found[name] = blob.stdout
    return found
