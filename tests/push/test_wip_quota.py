"""A launch's WIP quota (``--wip-max-refs``, ``--wip-max-mib``) through the real helper: past
it a WIP request is refused and nothing is pushed; the candidate is never counted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentc.push.protocol import Refused, publish
from tests.push.kit import LAUNCH, TASK, commit, git, remote_ref, start_helper

CANDIDATE = f"refs/agent-coordinator/candidates/{TASK}/{LAUNCH}"
WIP = f"refs/agent-coordinator/candidates/wip/{TASK}/{LAUNCH}"


def _wip_refs(remote: Path) -> list[str]:
    """The revisions of the launch's WIP refs on the remote."""
    listed = git(remote, "for-each-ref", "--format=%(refname)", WIP)
    return sorted(ref.rsplit("/", 1)[1] for ref in listed.split())


def test_past_the_ref_count_a_wip_is_refused_and_nothing_pushed(
    base: Path, remote: Path, checkout: Path
) -> None:
    helper = start_helper(base, remote, "--wip-max-refs=2")
    try:
        revs = [commit(checkout, {"w.txt": f"{n}\n"}) for n in range(3)]
        for rev in revs[:2]:
            assert publish(helper.socket, "wip", rev, checkout, timeout=60)["ref"] == f"{WIP}/{rev}"
        with pytest.raises(Refused) as refused:
            publish(helper.socket, "wip", revs[2], checkout, timeout=60)
        assert "this launch has published 2 WIP refs, its quota (wip_max_refs 2)" in str(
            refused.value
        )
        assert "nothing was pushed" in str(refused.value)
        assert remote_ref(remote, f"{WIP}/{revs[2]}") is None
        assert _wip_refs(remote) == sorted(revs[:2])
        # A WIP already published is answered again; the candidate is not counted.
        assert publish(helper.socket, "wip", revs[1], checkout, timeout=60)["ok"] is True
        assert publish(helper.socket, "candidate", revs[2], checkout, timeout=60)["ok"] is True
        assert remote_ref(remote, CANDIDATE) == revs[2]
    finally:
        helper.stop()


def test_past_the_size_a_wip_is_refused_and_the_candidate_still_lands(
    base: Path, remote: Path, checkout: Path
) -> None:
    helper = start_helper(base, remote, "--wip-max-mib=1")
    try:
        small = commit(checkout, {"notes.txt": "x" * 300_000})
        assert publish(helper.socket, "wip", small, checkout, timeout=60)["ok"] is True
        big = commit(checkout, {"data.bin": os.urandom(800_000)})
        with pytest.raises(Refused) as refused:
            publish(helper.socket, "wip", big, checkout, timeout=60)
        message = str(refused.value)
        assert "this WIP checkpoint adds 0.8 MiB of new objects, past this launch's quota" in (
            message
        )
        assert "(wip_max_mib 1; 0.3 MiB published)" in message
        assert remote_ref(remote, f"{WIP}/{big}") is None
        assert _wip_refs(remote) == [small]
        assert publish(helper.socket, "candidate", big, checkout, timeout=60)["ok"] is True
        assert remote_ref(remote, CANDIDATE) == big
        # Only new objects count: a WIP on top of the published candidate adding little passes.
        more = commit(checkout, {"more.txt": "y" * 1000})
        assert publish(helper.socket, "wip", more, checkout, timeout=60)["ok"] is True
        assert _wip_refs(remote) == sorted([small, more])
    finally:
        helper.stop()


def test_a_quota_of_no_refs_refuses_every_wip(base: Path, remote: Path, checkout: Path) -> None:
    helper = start_helper(base, remote, "--wip-max-refs=0")
    try:
        rev = commit(checkout, {"w.txt": "w\n"})
        with pytest.raises(Refused, match="quota \\(wip_max_refs 0\\)"):
            publish(helper.socket, "wip", rev, checkout, timeout=60)
        assert remote_ref(remote, f"{WIP}/{rev}") is None
        assert publish(helper.socket, "candidate", rev, checkout, timeout=60)["ok"] is True
    finally:
        helper.stop()
