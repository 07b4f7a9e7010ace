"""The remote's candidate and WIP refs: the real integrator removes WIP refs of ended tasks and,
after the retention period, the candidate refs it used (compare-and-swap, reported), and leaves
everything else alone; the sweep's decisions as pure functions."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentc.client.errors import BadAnswer
from agentc.client.reads import TaskDetail, Workflow, shaped
from agentc.integrator.repo import Repo
from agentc.integrator.sweep import DAY_MS, Ended, Published, ended, parse, removals
from agentc.push.refs import CANDIDATES
from tests.client.kit import git, workflow_view
from tests.integrator.kit import PASS, Setup, clean_env, commit, make_setup
from tests.kit.live import LiveServer

SHA = "a" * 40


def _refs(s: Setup) -> dict[str, str]:
    out = git(s.origin, "for-each-ref", "--format=%(refname) %(objectname)", "refs/")
    return dict(line.split(" ") for line in out.splitlines())


def _run(s: Setup) -> None:
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def _wip(s: Setup, task_id: str, launch: str = "launch-1") -> str:
    """A WIP ref as the push helper makes it, of the target's tip."""
    tip = s.tip()
    ref = f"{CANDIDATES}/wip/{task_id}/{launch}/{tip}"
    git(s.origin, "update-ref", ref, tip)
    return ref


def _cancel(s: Setup, task_id: str) -> None:
    task = s.task(task_id)
    resp = s.admin.post(
        f"/api/v1/projects/{s.project_id}/tasks/{task_id}/cancel",
        json={"expected_revision": task["revision"], "reason": "not needed"},
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert resp.status_code == 200, resp.text


def _removed(s: Setup) -> dict[str, Any]:
    return {r["ref"]: r for r in s.reports() if r["event"] == "ref_removed"}


def test_refs_of_ended_tasks_go_others_stay(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    landed = s.approved({"a.txt": "a\n"})
    landed_id = landed["task"]["id"]
    landed_ref = landed["submission"]["candidate_ref"]
    assert landed_ref == f"{CANDIDATES}/{landed_id}/{landed_ref.rsplit('/', 1)[1]}"
    landed_wip = _wip(s, landed_id)
    canceled = s.submit({"b.txt": "b\n"})  # changes requested, then canceled: never used
    canceled_id = canceled["task"]["id"]
    s.decide(canceled, "changes_requested")
    canceled_wip = _wip(s, canceled_id)
    _cancel(s, canceled_id)
    open_ = s.submit({"c.txt": "c\n"})  # waiting for review: not ended
    open_wip = _wip(s, open_["task"]["id"])
    tip = s.tip()
    strangers = {  # not the helper's shapes, not a task of this project, not the prefix
        f"{CANDIDATES}/just-one": tip,
        f"{CANDIDATES}/a/b/c": tip,
        f"{CANDIDATES}/wip/{landed_id}/launch-1/not-a-sha": tip,
        f"{CANDIDATES}/{uuid.uuid4()}/launch-9": tip,
        f"{CANDIDATES}/wip/{uuid.uuid4()}/launch-9/{tip}": tip,
        f"{CANDIDATES}/_{landed_id}/x": tip,
        f"refs/heads/wip/{landed_id}": tip,
        f"refs/agent-coordinator/other/{landed_id}/x": tip,
    }
    for ref, sha in strangers.items():
        git(s.origin, "update-ref", ref, sha)
    before = _refs(s)

    _run(s)
    assert s.task(landed_id)["work_status"] == "done"
    after = _refs(s)
    gone = set(before) - set(after)
    assert gone == {landed_wip, canceled_wip, canceled["submission"]["candidate_ref"]}
    assert landed_ref in after and open_wip in after  # evidence kept; an open task's WIP kept
    assert all(after[ref] == sha for ref, sha in strangers.items())
    removed = _removed(s)
    assert set(removed) == gone
    assert removed[landed_wip]["reason"] == "a WIP ref of an ended task"
    assert removed[landed_wip]["task_id"] == landed_id
    assert removed[landed_wip]["revision"] == before[landed_wip]
    assert removed[canceled["submission"]["candidate_ref"]]["reason"] == (
        "a candidate ref of an ended task the integrator never used"
    )

    # Past the retention period the used candidate ref goes too; 0 keeps it forever.
    s.write_config(PASS, candidate_retention_days=0)
    _run(s)
    assert landed_ref in _refs(s)
    s.write_config(PASS, candidate_retention_days=1e-9)
    _run(s)
    final = _refs(s)
    assert landed_ref not in final and open_wip in final
    assert _removed(s)[landed_ref]["reason"] == "a candidate ref kept 1e-09 days after its task"
    assert all(final[ref] == sha for ref, sha in strangers.items())


def test_a_sent_back_candidate_is_evidence(server: LiveServer, admin: httpx.Client, tmp_path: Path):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config({"unit": ["/bin/sh", "-c", "test ! -e broken"]})
    bad = s.approved({"broken": "x\n"})
    _run(s)  # sent back
    assert s.task(bad["task"]["id"])["work_status"] == "ready"
    _cancel(s, bad["task"]["id"])
    _run(s)
    assert bad["submission"]["candidate_ref"] in _refs(s)  # used: kept for the retention


def test_the_deletes_are_compare_and_swap(tmp_path: Path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "--quiet", "--bare", str(remote))
    work = tmp_path / "work"
    git(tmp_path, "init", "--quiet", str(work))
    git(work, "config", "user.name", "a")
    git(work, "config", "user.email", "a@a.invalid")
    one = commit(work, {}, "1")
    two = commit(work, {}, "2")
    refs = {f"{CANDIDATES}/t/a": one, f"{CANDIDATES}/t/b": two}
    for ref, sha in refs.items():
        git(work, "push", "--quiet", str(remote), f"{sha}:{ref}")
    repo = Repo(tmp_path / "private", str(remote), "main", ("i", "i@i"))
    repo.ensure()
    # The second moved since it was listed: it stays; the first goes.
    deleted, failed = repo.delete_remote_refs({f"{CANDIDATES}/t/a": one, f"{CANDIDATES}/t/b": one})
    assert deleted == {f"{CANDIDATES}/t/a"}
    assert "stale info" in failed
    assert repo.ls_remote(f"{CANDIDATES}/*") == {f"{CANDIDATES}/t/b": two}


# -- the decisions -------------------------------------------------------------------------------


def test_parse_keeps_only_the_two_shapes():
    refs = {
        f"{CANDIDATES}/t1/l1": SHA,
        f"{CANDIDATES}/wip/t1/l1/{SHA}": SHA,
        f"{CANDIDATES}/wip/t1/l1/{'b' * 64}": SHA,
        f"{CANDIDATES}/wip/l9": SHA,  # a candidate of a task named "wip": left to the task
        f"{CANDIDATES}/wip/t1/l1": SHA,
        f"{CANDIDATES}/t1": SHA,
        f"{CANDIDATES}/t1/l1/x": SHA,
        f"{CANDIDATES}/-t/l1": SHA,
        f"{CANDIDATES}/t1/l1.lock": SHA,
        f"{CANDIDATES}/t2/l1": "not-a-sha",
        "refs/heads/main": SHA,
    }
    found = parse(refs)
    assert {p.ref for p in found} == {
        f"{CANDIDATES}/t1/l1",
        f"{CANDIDATES}/wip/t1/l1/{SHA}",
        f"{CANDIDATES}/wip/t1/l1/{'b' * 64}",
        f"{CANDIDATES}/wip/l9",
    }
    assert {p.ref: p.task_id for p in found}[f"{CANDIDATES}/wip/l9"] == "wip"


def _task(workflow: Workflow | None = None, **fields: Any) -> TaskDetail:
    task = {
        "id": "t",
        "lifecycle": "done",
        "updated_at": "2026-01-01T00:00:00.000Z",
        "workflow": workflow or workflow_view(),
    }
    return shaped(TaskDetail, {**task, **fields}, "task")


def test_ended_reads_only_an_ended_task():
    assert ended(_task(lifecycle="open")) is None
    assert ended(_task(updated_at="yesterday")) is None
    assert ended(_task(updated_at="2026-01-01T00:00:00")) is None  # no zone
    with pytest.raises(BadAnswer, match="workflow"):  # not readable: never swept
        shaped(TaskDetail, {"id": "t", "lifecycle": "done", "updated_at": "", "workflow": 1}, "t")
    flow = workflow_view(
        [
            {"id": "s1", "candidate_ref": "r1"},
            {"id": "s2", "candidate_ref": "r2"},
            {"id": "s3", "candidate_ref": "r3"},
            {"id": "s4"},
        ],
        activities=[
            {"kind": "integration", "state": "completed", "submission_id": "s1"},
            {"kind": "integration", "state": "canceled", "submission_id": "s2", "sent_back": {}},
            {
                "kind": "integration",
                "state": "canceled",
                "submission_id": "s2",
                "sent_back": {"a": 1},
            },
            {"kind": "agent_review", "state": "completed", "submission_id": "s3"},
        ],
    )
    state = ended(_task(lifecycle="canceled", workflow=flow))
    assert state is not None
    assert state.used == {"r1", "r2"} and state.unused == {"r3"}
    assert state.ended_ms == 1767225600000


def test_removals():
    refs = [
        Published("w", SHA, "t", wip=True),
        Published("used", SHA, "t", wip=False),
        Published("unused", SHA, "t", wip=False),
        Published("unknown", SHA, "t", wip=False),
    ]
    task = Ended(1000, frozenset({"used"}), frozenset({"unused"}))
    assert [p.ref for p, _ in removals(refs, task, 1000 + 2 * DAY_MS, 3)] == ["w", "unused"]
    late = [p.ref for p, _ in removals(refs, task, 1000 + 3 * DAY_MS, 3)]
    assert late == ["w", "used", "unused", "unknown"]
    forever = [p.ref for p, _ in removals(refs, task, 10**15, 0)]
    assert forever == ["w", "unused"]


@given(st.dictionaries(st.text(max_size=80), st.text(max_size=70), max_size=20))
def test_parse_names_nothing_outside_the_prefix(refs: dict[str, str]):
    for item in parse(refs):
        assert item.ref.startswith(CANDIDATES + "/") and item.ref in refs
        assert ".." not in item.ref and not item.ref.endswith(".lock")


def test_the_loop_sweeps_at_most_every_ref_sweep_minutes(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS, ref_sweep_minutes=60)
    done = s.approved({"a.txt": "a\n"})
    _run(s)
    task_id = done["task"]["id"]
    first = _wip(s, task_id, "launch-1")
    proc = subprocess.Popen(
        s.argv("run"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env()
    )
    try:
        _until(lambda: first in _removed(s), proc)  # the loop's first poll sweeps
        second = _wip(s, task_id, "launch-2")
        later = s.approved({"b.txt": "b\n"})  # landed by a later poll of the same loop
        _until(lambda: s.task(later["task"]["id"])["work_status"] == "done", proc)
        assert second in _refs(s)  # that poll did not sweep again
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    _run(s)  # a new process sweeps at its first poll
    assert second not in _refs(s)


def _until(predicate: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not predicate():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
