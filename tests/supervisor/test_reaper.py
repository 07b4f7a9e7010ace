"""The child subreaper's walk: only our own tree, nothing of it left, nothing else touched.

Each reaping test runs in a process of its own (it marks itself the child subreaper and reaps
everything below it, which must not include the test runner's other children).
"""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest

from agentc.sandbox import reaper
from tests.supervisor.kit import script_report

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
    import json, os, subprocess, sys, time
    from agentc.sandbox import reaper

    reaper._CHILDREN_FILES = sys.argv[1] == "walk"
    reaper.set_child_subreaper()
    # Another launch of the same process: its own group, with an orphan re-parented to us.
    other = subprocess.Popen(["sh", "-c", "(sleep 300 &) ; exec sleep 300"], process_group=0)
    while len(reaper.descendants(os.getpid())) < 2:
        time.sleep(0.01)
    storm = subprocess.Popen(["sh", "-c", sys.argv[2]], process_group=0)
    while len(reaper.descendants(storm.pid)) < 20:  # the storm is under way
        time.sleep(0.01)
    report = reaper.reap_leftovers(reaper.Scope(storm.pid, storm.pid), grace=0.0, deadline=30.0)
    # Whatever the reaper used, the judge is a scan of every /proc entry.
    left = reaper._scan(os.getpid())
    others = sorted(p for p, proc in left.items() if proc.pgrp == other.pid)
    strays = reaper.reap_strays(keep=[], deadline=30.0)
    print(json.dumps({"left": sorted(set(left) - set(others)), "others": len(others),
                      "others_state": sorted(left[p].state for p in others),
                      "killed": sum(report.killed.values()), "survivors": report.survivors,
                      "strays": sum(strays.killed.values()),
                      "after": sorted(reaper._scan(os.getpid()))}))
    """
)


@pytest.mark.parametrize("how", ["walk", "scan"])
def test_a_tree_that_forks_while_it_is_reaped_leaves_nothing(how: str) -> None:
    """The launch's scope (its group) is reaped whole, however it forks and orphans its
    processes; another launch's group, orphan included, is left running; the strays the
    subreaper holds after that are killed and reaped by :func:`reaper.reap_strays`."""
    report = script_report(REAP, how, STORM)
    assert report["left"] == [] and report["survivors"] == []
    assert report["killed"] > 0
    assert report["others"] == 2 and report["others_state"] == ["S", "S"]
    assert report["strays"] == 2 and report["after"] == []


def test_the_walk_and_the_full_scan_see_the_same_tree() -> None:
    tree = subprocess.Popen(["sh", "-c", "sleep 60 & (sh -c 'sleep 60 & wait') & wait"])
    try:

        def sleeps() -> int:
            return sum(proc.comm == "sleep" for proc in reaper._scan(tree.pid).values())

        for _ in range(10_000):  # both sleeps started: the tree is settled
            if sleeps() == 2:
                break
        walked, scanned = reaper._walk(tree.pid), reaper._scan(tree.pid)
        assert {p: x._replace(state="") for p, x in walked.items()} == {
            p: x._replace(state="") for p, x in scanned.items()
        }
        assert {proc.comm for proc in walked.values()} == {"sh", "sleep"}
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
