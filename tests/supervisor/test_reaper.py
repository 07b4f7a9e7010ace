"""The child subreaper's walk: only our own tree, nothing of it left, nothing else touched.

Each reaping test runs in a process of its own (it marks itself the child subreaper and reaps
everything below it, which must not include the test runner's other children).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from agentc.sandbox import reaper

# A shell that keeps double-forking (each `sleep` is orphaned at once, so it is re-parented to
# the subreaper while the reaper runs) and a nested tree that keeps forking below it.
STORM = r"""
i=0
while [ $i -lt 100 ]; do
    ( sleep 300 & )
    sh -c 'sleep 300 & sleep 300 & wait' &
    i=$((i + 1))
done
wait
"""

REAP = textwrap.dedent(
    """
    import json, subprocess, sys, time
    from agentc.sandbox import reaper

    reaper._CHILDREN_FILES = sys.argv[1] == "walk"
    reaper.set_child_subreaper()
    storm = subprocess.Popen(["sh", "-c", sys.argv[2]])
    while len(reaper.descendants(storm.pid)) < 20:  # the storm is under way
        time.sleep(0.01)
    report = reaper.reap_leftovers(grace=0.0, deadline=30.0)
    # Whatever the reaper used, the judge is a scan of every /proc entry.
    left = reaper._scan(__import__("os").getpid())
    print(json.dumps({"left": sorted(left), "killed": sum(report.killed.values()),
                      "survivors": report.survivors}))
    """
)


@pytest.mark.parametrize("how", ["walk", "scan"])
def test_a_tree_that_forks_while_it_is_reaped_leaves_nothing(how: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", REAP, how, STORM],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["left"] == [] and report["survivors"] == []
    assert report["killed"] > 0


def test_the_walk_and_the_full_scan_see_the_same_tree() -> None:
    tree = subprocess.Popen(["sh", "-c", "sleep 60 & (sh -c 'sleep 60 & wait') & wait"])
    try:

        def sleeps() -> int:
            return sum(comm == "sleep" for comm, _state in reaper._scan(tree.pid).values())

        for _ in range(10_000):  # both sleeps started: the tree is settled
            if sleeps() == 2:
                break
        walked, scanned = reaper._walk(tree.pid), reaper._scan(tree.pid)
        assert {p: comm for p, (comm, _s) in walked.items()} == {
            p: comm for p, (comm, _s) in scanned.items()
        }
        assert {comm for comm, _state in walked.values()} == {"sh", "sleep"}
        assert sleeps() == 2
    finally:
        for pid in reaper._scan(tree.pid):
            os.kill(pid, 9)
        tree.kill()
        tree.wait()


def test_a_listed_pid_whose_parent_differs_is_not_taken_for_ours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child that exited and whose pid was reused by an unrelated process (here: init, whose
    parent is 0) is skipped, so the reaper never signals it."""
    me = os.getpid()
    real = reaper._children
    monkeypatch.setattr(reaper, "_children", lambda pid: [1] if pid == me else real(pid))
    assert 1 not in reaper._walk(me)
