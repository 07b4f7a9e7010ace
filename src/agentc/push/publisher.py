"""What the helper does with one valid request: decide, verify, scan and push.

A candidate ref is created once and never moved: a second candidate request of another
revision is refused, the same revision again is answered ok. A WIP ref names its revision, so
each is created once. Both are pushed create-only (``--force-with-lease=<ref>:``, an empty
expected value: the ref must not exist) and read back from the remote afterwards. The helper
records what it published under ``refs/agentc-push/published/`` in its private repository, so a
candidate deleted on the remote is not replaced by another revision either.

WIP refs have a quota per launch (:class:`WipQuota`: a number of refs and a total size of the
new objects they publish); past it a WIP request is refused and nothing is pushed. The
candidate is never counted, nor refused for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentc.push.protocol import MISSING_BASE, WIP_MAX_MIB, WIP_MAX_REFS, Request, ok_answer
from agentc.push.refs import candidate_ref, wip_ref
from agentc.push.repo import PRIVATE, PrivateRepo, Refusal
from agentc.push.scan import Scanner

PUBLISHED_CANDIDATE = f"{PRIVATE}/published/candidate"
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


@dataclass(frozen=True)
class Target:
    ref: str
    record: str


def _shown(path: str) -> str:
    return _UNPRINTABLE.sub("?", path)


@dataclass
class WipQuota:
    """What one launch's WIP refs may publish: ``max_refs`` refs, and ``max_mib`` MiB of new
    objects (their uncompressed sizes) in all; what this helper published so far."""

    max_refs: int = WIP_MAX_REFS
    max_mib: int = WIP_MAX_MIB
    refs: int = 0
    size: int = 0

    def room(self) -> None:
        """Refuse a WIP request when the launch has published its last WIP ref."""
        if self.refs >= self.max_refs:
            raise Refusal(
                f"this launch has published {self.refs} WIP refs, its quota (wip_max_refs "
                f"{self.max_refs}); nothing was pushed: checkpoint without --push-wip, or "
                "submit the candidate"
            )

    def admit(self, size: int) -> None:
        """Refuse a WIP of ``size`` new bytes that would pass the quota's total."""
        if self.size + size > self.max_mib << 20:
            raise Refusal(
                f"this WIP checkpoint adds {_mib(size)} MiB of new objects, past this launch's "
                f"quota (wip_max_mib {self.max_mib}; {_mib(self.size)} MiB published); nothing "
                "was pushed: checkpoint without --push-wip, or submit the candidate"
            )

    def count(self, size: int) -> None:
        self.refs += 1
        self.size += size


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f}"


@dataclass(frozen=True)
class Publisher:
    """Publishes the requests of one launch (``task``, ``launch``) through ``repo``."""

    repo: PrivateRepo
    task: str
    launch: str
    scanner: Scanner
    quota: WipQuota = field(default_factory=WipQuota)

    def target(self, request: Request) -> Target:
        if request.op == "candidate":
            return Target(candidate_ref(self.task, self.launch), PUBLISHED_CANDIDATE)
        return Target(
            wip_ref(self.task, self.launch, request.revision),
            f"{PRIVATE}/published/wip/{request.revision}",
        )

    def precheck(self, request: Request) -> dict[str, object] | None:
        """An answer that needs no bundle (already published, or refused), else None."""
        self.repo.ensure("sha1" if len(request.revision) == 40 else "sha256")
        target = self.target(request)
        recorded = self.repo.ref(target.record)
        if recorded is not None and recorded != request.revision:
            raise Refusal(
                f"this launch's candidate is already {recorded}; a candidate is published once "
                "and never moved (publish work in progress with op 'wip')"
            )
        on_remote = self.repo.remote_ref(target.ref)
        if on_remote == request.revision:
            self._record(target, request.revision)
            return ok_answer(target.ref, request.revision)
        if on_remote is not None:
            raise Refusal(f"{target.ref} already holds {on_remote} and is never moved")
        return None

    def publish(self, request: Request, receive: Callable[[], Path]) -> dict[str, object]:
        """Verify, scan and push ``request``; ``receive`` reads the bundle into a file."""
        early = self.precheck(request)
        if early is not None:
            return early
        wip = request.op == "wip"
        if wip:
            self.quota.room()
        bundle = receive()
        try:
            self.repo.fetch_remote()
            self.repo.fetch_bundle(bundle, request.revision, MISSING_BASE)
        finally:
            bundle.unlink(missing_ok=True)
        size = self.scan(request.revision)
        if wip:
            self.quota.admit(size)
        target = self.target(request)
        reason = self.repo.push_create(request.revision, target.ref)
        on_remote = self.repo.remote_ref(target.ref)
        if on_remote != request.revision:
            if on_remote is not None:
                raise Refusal(f"{target.ref} already holds {on_remote} and is never moved")
            raise Refusal(f"pushing {target.ref} failed: {reason or 'the ref did not appear'}")
        self._record(target, request.revision)
        if wip:
            self.quota.count(size)
        return ok_answer(target.ref, request.revision)

    def _record(self, target: Target, revision: str) -> None:
        if self.repo.ref(target.record) is None:
            self.repo.set_ref(target.record, revision)

    def scan(self, revision: str) -> int:
        """Refuse when a new object or path name carries a known token or a secret format;
        else the new objects' total size in bytes.

        The refusal names the path and the commit, never the secret; a path that is itself the
        secret is not shown.
        """
        objects = self.repo.new_objects(revision)
        for sha, path in objects:
            found = self.scanner.scan(path.encode(errors="surrogateescape"))
            if found:
                commit = self.repo.commit_with(sha, revision) or revision
                raise Refusal(f"refused: a file name in commit {commit} carries {found}")
        paths = dict(objects)
        scanned = self.repo.scan_objects([sha for sha, _ in objects], self.scanner)
        if scanned.hit is None:
            return scanned.size
        sha, kind, found = scanned.hit
        if kind == "commit":
            raise Refusal(f"refused: commit {sha} (message or author) carries {found}")
        commit = self.repo.commit_with(sha, revision) or revision
        where = _shown(paths.get(sha, "")) or f"object {sha}"
        raise Refusal(f"refused: {where} in commit {commit} carries {found}")
