"""The helper's private bare repository and every git command the helper runs.

Git runs through :func:`agentc.files.git.run_git` with its fixed environment
(:func:`agentc.files.git.git_env`), with hooks
off (``core.hooksPath=/dev/null``), the ``ext::`` transport and credential helpers off, and
every object fetched from a client's bundle checked (``fetch.fsckObjects``). The private
repository's own refs live under ``refs/agentc-push/``: ``remote/`` (the remote's branches and
tags, what the remote already has), ``incoming/`` (fetched bundles) and ``published/`` (what
this helper has published).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agentc.core.errors import AgentcError
from agentc.files.git import run_git
from agentc.push.scan import Scanner

PRIVATE = "refs/agentc-push"
GIT_TIMEOUT = 600.0
_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "credential.helper=",
)
_CHUNK = 1024 * 1024


class Refusal(AgentcError):
    """A request the helper refuses; the message is the answer's error."""


@dataclass
class Scanned:
    """What a scan of new objects found: the first ``(object id, object type, finding)``, and
    the objects' total size in bytes (uncompressed; up to the finding)."""

    hit: tuple[str, str, str] | None = None
    size: int = 0


# What git adds after any failure to reach a remote: it names no cause (ssh's line before it
# does, e.g. "Host key verification failed.").
_GIT_BOILERPLATE = (
    "fatal: Could not read from remote repository.",
    "Please make sure you have the correct access rights",
    "and the repository exists.",
)


def _reason(stderr: bytes) -> str:
    """Why git failed: its last line that says something."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines()]
    lines = [line for line in lines if line]
    useful = [line for line in lines if not line.startswith(_GIT_BOILERPLATE)]
    return (useful or lines or ["no message"])[-1]


def _chunks(out: IO[bytes], size: int, sha: str) -> Iterator[bytes]:
    """The next ``size`` bytes of ``out`` (one object of ``git cat-file --batch``)."""
    left = size
    while left > 0:
        data = out.read(min(left, _CHUNK))
        if not data:
            raise Refusal(f"cannot read object {sha} of the candidate")
        left -= len(data)
        yield data


class PrivateRepo:
    """The helper's bare repository at ``path``, publishing to ``remote``."""

    def __init__(self, path: Path, remote: str, env: dict[str, str]) -> None:
        self.path = path
        self.remote = remote
        self.env = env

    def git(
        self, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT
    ) -> subprocess.CompletedProcess[bytes]:
        argv = ["git", f"--git-dir={self.path}", *_CONFIG, *args]
        return run_git(argv, self.path, self.env, timeout, Refusal, _reason, check=check)

    def ensure(self, object_format: str) -> None:
        """Create the bare repository on first use; refuse a revision of another hash."""
        if not (self.path / "HEAD").exists():
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.git("init", "--quiet", "--bare", f"--object-format={object_format}", ".")
            self.git("config", "core.hooksPath", "/dev/null")
        found = self.git("rev-parse", "--show-object-format").stdout.decode().strip()
        if found != object_format:
            raise Refusal(f"the revision is a {object_format} id but the repository uses {found}")

    def ref(self, ref: str) -> str | None:
        done = self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return done.stdout.decode().strip() if done.returncode == 0 else None

    def set_ref(self, ref: str, revision: str) -> None:
        self.git("update-ref", ref, revision)

    def remote_ref(self, ref: str) -> str | None:
        """What ``ref`` holds on the remote, or None when it does not exist there."""
        done = self.git("ls-remote", "--refs", "--end-of-options", self.remote, ref, check=False)
        if done.returncode != 0:
            raise Refusal(f"cannot read the remote: {_reason(done.stderr)}")
        for line in done.stdout.decode(errors="replace").splitlines():
            sha, _, name = line.partition("\t")
            if name == ref:
                return sha
        return None

    def fetch_remote(self) -> None:
        """Bring the remote's branches and tags in: what the remote already has."""
        done = self.git(
            "fetch",
            "--quiet",
            "--no-tags",
            "--prune",
            "--no-write-fetch-head",
            "--end-of-options",
            self.remote,
            f"+refs/heads/*:{PRIVATE}/remote/heads/*",
            f"+refs/tags/*:{PRIVATE}/remote/tags/*",
            check=False,
        )
        if done.returncode != 0:
            raise Refusal(f"cannot fetch from the remote: {_reason(done.stderr)}")

    def fetch_bundle(self, bundle: Path, revision: str, missing_base: str) -> None:
        """Fetch ``revision`` from the verified bundle; it must be a commit."""
        verify = self.git("bundle", "verify", str(bundle), check=False)
        if verify.returncode != 0:
            if b"lacks these prerequisite" in verify.stderr:
                raise Refusal(f"{missing_base}; send a full bundle")
            raise Refusal(f"not a valid git bundle: {_reason(verify.stderr)}")
        heads = self.git("bundle", "list-heads", str(bundle)).stdout.decode(errors="replace")
        if revision not in {line.split(" ", 1)[0] for line in heads.splitlines()}:
            raise Refusal(f"the bundle does not carry {revision} as a head")
        incoming = f"{PRIVATE}/incoming/{revision}"
        fetched = self.git(
            "-c",
            "fetch.fsckObjects=true",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            str(bundle),
            f"+{revision}:{incoming}",
            check=False,
        )
        if fetched.returncode != 0:
            raise Refusal(f"fetching the bundle failed: {_reason(fetched.stderr)}")
        kind = self.git("cat-file", "-t", revision, check=False).stdout.decode().strip()
        if kind != "commit" or self.ref(incoming) != revision:
            raise Refusal(f"{revision} is not a commit in the bundle")

    def new_objects(self, revision: str) -> list[tuple[str, str]]:
        """``(object id, path)`` of every object ``revision`` reaches that the remote lacks.

        Objects this helper published before are left out too: they were scanned then.
        Commits have an empty path.
        """
        done = self.git(
            "rev-list",
            "--objects",
            revision,
            "--not",
            f"--glob={PRIVATE}/remote/*",
            f"--glob={PRIVATE}/published/*",
        )
        objects = []
        for line in done.stdout.decode(errors="surrogateescape").splitlines():
            sha, _, path = line.partition(" ")
            objects.append((sha, path))
        return objects

    def scan_objects(self, shas: list[str], scanner: Scanner) -> Scanned:
        """Scan the objects ``shas`` (trees are read, not scanned: their names are scanned as
        paths); stops at the first finding."""
        proc = subprocess.Popen(
            ["git", f"--git-dir={self.path}", *_CONFIG, "cat-file", "--batch"],
            cwd=self.path,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        out = proc.stdout
        scanned = Scanned()
        try:
            for sha in shas:
                proc.stdin.write(f"{sha}\n".encode())
                proc.stdin.flush()
                header = out.readline().decode(errors="replace").split()
                if len(header) != 3:
                    raise Refusal(f"cannot read object {sha} of the candidate")
                kind, size = header[1], int(header[2])
                scanned.size += size
                if kind == "tree":
                    for _ in _chunks(out, size, sha):
                        pass
                else:
                    found = scanner.scan_stream(_chunks(out, size, sha))
                    if found:
                        scanned.hit = (sha, kind, found)
                        return scanned
                out.read(1)
            return scanned
        finally:
            proc.kill()
            proc.wait()
            proc.stdin.close()
            out.close()

    def commit_with(self, obj: str, revision: str) -> str | None:
        """The oldest new commit of ``revision`` that adds object ``obj``."""
        done = self.git(
            "log",
            "--format=%H",
            "-t",
            f"--find-object={obj}",
            revision,
            "--not",
            f"--glob={PRIVATE}/remote/*",
            f"--glob={PRIVATE}/published/*",
            check=False,
        )
        commits = done.stdout.decode().split()
        return commits[-1] if commits else None

    def push_create(self, revision: str, ref: str) -> str | None:
        """Create ``ref`` on the remote at ``revision`` only if it does not exist; None when
        pushed, else git's reason."""
        done = self.git(
            "push",
            "--quiet",
            "--no-verify",
            f"--force-with-lease={ref}:",
            "--end-of-options",
            self.remote,
            f"{revision}:{ref}",
            check=False,
        )
        return None if done.returncode == 0 else _reason(done.stderr)
