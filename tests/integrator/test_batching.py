"""Batching (`landing_batch`): queued changes checked together on one combined revision, landed
in queue order, each a commit of its own equal to what its review approved; a red batch is
split so only the culprit goes back; batching off is the one-at-a-time path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.client.kit import git
from tests.integrator.kit import NO_BROKEN, PASS, Setup, make_setup, raw_diff
from tests.integrator.kit import run_once as _run
from tests.kit.live import LiveServer


def _batched(
    server: LiveServer, admin: httpx.Client, root: Path, n: int, **config: Any
) -> tuple[Setup, str, list[dict[str, Any]]]:
    """A project whose integrator batches, ``n`` approved changes (each its own file) in its
    queue; the target before them."""
    s = make_setup(root, server.url, admin)
    checks = config.pop("checks", PASS)
    s.write_config(checks, **config)
    before = s.tip()
    return s, before, [s.approved({f"f{i}.txt": f"{i}\n"}) for i in range(n)]


def _check_runs(s: Setup) -> list[str]:
    """Each check run, by where its log is: ``batches/<combined revision>`` for a batch's run,
    ``candidates/<activity>/<revision>`` for one candidate's, ``targets/<tip>`` for the
    target's."""
    logs = s.work_dir / "logs"
    return sorted(str(p.parent.relative_to(logs)) for p in logs.rglob("unit.log"))


def _chain(s: Setup, before: str) -> list[str]:
    """The target's commits since ``before``, oldest first (each with one parent)."""
    return git(s.origin, "rev-list", "--reverse", "--first-parent", f"{before}..main").split()


def _lands_in_order(s: Setup, before: str, subs: list[dict[str, Any]]) -> list[str]:
    chain = _chain(s, before)
    assert len(chain) == len(subs)
    parent = before
    for commit, sub in zip(chain, subs, strict=True):
        s.lands_exactly(commit, parent, sub["submission"])
        assert s.trailers(commit)["Agentc-Task"] == sub["task"]["id"]
        assert s.trailers(commit)["Agentc-Check"].startswith("unit passed")
        assert s.landing(sub["task"]["id"])["landed_revision"] == commit
        assert s.task(sub["task"]["id"])["work_status"] == "done"
        parent = commit
    return chain


def test_a_green_batch_lands_each_change_in_order_after_one_check(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s, before, subs = _batched(server, admin, tmp_path, 3, landing_batch=3)
    _run(s)

    chain = _lands_in_order(s, before, subs)
    # One check run, on the combined revision: the tree of the last landed commit.
    [run] = _check_runs(s)
    assert run.startswith("batches/")
    combined = run.split("/")[1]
    assert git(s.work_dir / "repo", "rev-parse", f"{combined}^{{tree}}") == s.tree(chain[-1])
    events = [r["event"] for r in s.reports()]
    assert events == ["batch_green", "landed", "landed", "landed"]
    assert len(s.landings()) == 3

    again = s.integrator("run", "--once")  # nothing left: nothing changes
    assert again.returncode == 0 and s.tip() == chain[-1] and len(s.landings()) == 3


def test_a_batch_under_the_merge_policy_is_one_commit_per_change(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s, before, subs = _batched(server, admin, tmp_path, 3, landing_batch=3, merge_policy="merge")
    _run(s)
    chain = _chain(s, before)
    assert len(chain) == 3
    # The first is on its own base: the reviewed change itself (as without batching).
    s.lands_exactly(chain[0], before, subs[0]["submission"])
    # Each next is a merge commit on the one before it, its second parent the reviewed change
    # as one commit on its base.
    for parent, commit, sub in zip(chain[:-1], chain[1:], subs[1:], strict=True):
        base, candidate = (
            sub["submission"]["base_revision"],
            sub["submission"]["candidate_revision"],
        )
        first, reviewed = git(s.origin, "rev-list", "--parents", "-n1", commit).split()[1:]
        assert first == parent
        assert git(s.origin, "rev-parse", f"{reviewed}^") == base
        assert raw_diff(s.origin, parent, commit) == raw_diff(s.origin, base, candidate)
        assert raw_diff(s.origin, base, reviewed) == raw_diff(s.origin, base, candidate)
        assert s.trailers(commit)["Agentc-Submission"] == sub["submission"]["id"]
        assert s.landing(sub["task"]["id"])["landed_revision"] == commit
    assert [r["event"] for r in s.reports()] == ["batch_green", "landed", "landed", "landed"]


def test_a_red_batch_sends_back_the_culprit_alone_and_lands_the_others(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(NO_BROKEN, landing_batch=3)
    before = s.tip()
    first = s.approved({"a.txt": "a\n"})
    bad = s.approved({"broken": "x\n"})
    last = s.approved({"c.txt": "c\n"})
    _run(s)

    _lands_in_order(s, before, [first, last])
    assert s.task(bad["task"]["id"])["work_status"] == "ready"  # sent back to its implementer
    back = s.landing(bad["task"]["id"])["sent_back"]
    assert back["reason_code"] == "check_failed" and back["reason"] == "check unit failed (exit 3)"
    assert "the tree is broken" in back["log_tail"]
    reports = s.reports()
    assert reports[0]["event"] == "batch_red" and reports[0]["target"] == before
    [sent] = [r for r in reports if r["event"] == "sent_back"]
    assert sent["task_id"] == bad["task"]["id"] and "the tree is broken" in sent["tail"]
    assert [r["event"] for r in reports].count("landed") == 2
    assert len(s.landings()) == 2
    # The batch's run, then each member's own (the culprit's on the target as the first
    # landed it): the split is one by one.
    runs = _check_runs(s)
    assert sum(r.startswith("batches/") for r in runs) == 1
    assert sum(r.startswith("candidates/") for r in runs) == 3


def test_a_red_target_under_a_batch_is_nobodys_fault(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s, _, subs = _batched(server, admin, tmp_path, 2, landing_batch=2, checks=NO_BROKEN)
    red = s.push_to_target({"broken": "x\n"}, "break the target")
    _run(s)
    assert s.tip() == red
    events = [r["event"] for r in s.reports()]
    assert events[0] == "batch_red" and events.count("target_red") == 1
    assert "sent_back" not in events
    for sub in subs:
        assert s.task(sub["task"]["id"])["work_status"] == "waiting_integration"
    s.remove_from_target("broken")
    fixed = s.tip()
    _run(s)
    _lands_in_order(s, fixed, subs)


def test_batching_off_checks_each_change_on_its_own(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s, before, subs = _batched(server, admin, tmp_path, 2, landing_batch=1)
    _run(s)
    _lands_in_order(s, before, subs)
    runs = _check_runs(s)
    assert len(runs) == 2 and all(r.startswith("candidates/") for r in runs)
    assert [r["event"] for r in s.reports()] == ["landed", "landed"]
