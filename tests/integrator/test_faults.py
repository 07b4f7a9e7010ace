"""Faults: `kill -9` between the push and the record, and between the checks and the push; the
target moving during the checks. Each ends with the candidate landed exactly once, recorded
exactly once, and nothing lost."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.kit import git
from tests.integrator.kit import PASS, Setup, clean_env, make_setup
from tests.kit.live import LiveServer

WAIT = 120.0


def _hook(s: Setup, name: str, marker: Path) -> Path:
    """A hook of the remote that says it started, then blocks (the test kills it)."""
    hook = s.origin / "hooks" / name
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 600\n")
    hook.chmod(0o755)
    return hook


Start = Callable[[Setup], "subprocess.Popen[str]"]


@pytest.fixture
def start() -> Iterator[Start]:
    """Starts ``run --once`` in a session of its own; whatever a failing test leaves running is
    killed and its pipes closed at teardown."""
    procs: list[subprocess.Popen[str]] = []

    def start_(s: Setup) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            s.argv("run", "--once"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
            start_new_session=True,
        )
        procs.append(proc)
        return proc

    yield start_
    for proc in procs:
        if proc.poll() is None:
            _kill(proc)
        else:
            proc.communicate()


def _wait_for(predicate: object, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():  # type: ignore[operator]
        if proc.poll() is not None:
            raise AssertionError(f"the integrator exited early: {proc.communicate()}")
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _kill(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _journal(s: Setup, activity_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (s.work_dir / "journal" / f"{activity_id}.json").read_text()
    )
    return data


def _recover(s: Setup) -> None:
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_kill_between_push_and_record(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, start: Start
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    first = s.approved({"a.txt": "a\n"})
    sub = s.approved({"b.txt": "b\n"})  # rebased: its landed revision is new
    out = s.integrator("run", "--once")  # both land; the second is rebased onto the first
    assert out.returncode == 0, out.stderr
    assert s.task(first["task"]["id"])["work_status"] == "done"
    assert s.task(sub["task"]["id"])["work_status"] == "done"

    # A fresh pair, killed after the remote took the push and before the coordinator heard.
    third = s.approved({"c.txt": "c\n"})
    marker = tmp_path / "post-receive-started"
    hook = _hook(s, "post-receive", marker)
    before = s.tip()
    proc = start(s)
    _wait_for(marker.exists, proc)
    pushed = s.tip()
    assert pushed != before  # the ref moved before post-receive ran
    _kill(proc)
    activity = s.landing(third["task"]["id"])
    assert activity["state"] == "queued"
    assert _journal(s, activity["id"])["step"] == "pushing"
    hook.unlink()

    _recover(s)
    assert s.tip() == pushed  # nothing pushed twice
    assert git(s.origin, "rev-list", "--count", f"{before}..{pushed}") == "1"
    assert s.landing(third["task"]["id"])["landed_revision"] == pushed
    assert s.task(third["task"]["id"])["work_status"] == "done"
    assert len(s.landings()) == 3
    assert _journal(s, activity["id"])["step"] == "recorded"

    # A crash after the record but before the journal said so: the record replays, once.
    path = s.work_dir / "journal" / f"{activity['id']}.json"
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "step": "pushing"}))
    _recover(s)
    assert s.tip() == pushed and len(s.landings()) == 3
    assert _journal(s, activity["id"])["step"] == "recorded"


Killed = tuple[Setup, str, list[dict[str, Any]], list[dict[str, Any]]]


def _kill_a_batch_in(hook_name: str, root: Path, server: LiveServer, admin: httpx.Client,
                     start: Start) -> Killed:  # fmt: skip
    """A batch of two killed while the remote's ``hook_name`` hook runs: the setup, the target
    before, the members' submissions and their journal entries (both at ``pushing``, each
    naming its own link: the first on the old target, the second on the first)."""
    s = make_setup(root, server.url, admin)
    s.write_config(PASS, landing_batch=2)
    subs = [s.approved({f"f{i}.txt": f"{i}\n"}) for i in range(2)]
    marker = root / f"{hook_name}-started"
    hook = _hook(s, hook_name, marker)
    before = s.tip()
    proc = start(s)
    _wait_for(marker.exists, proc)
    _kill(proc)
    hook.unlink()
    acts = [s.landing(sub["task"]["id"]) for sub in subs]
    assert [a["state"] for a in acts] == ["queued", "queued"] and s.landings() == []
    journals = [_journal(s, a["id"]) for a in acts]
    assert [j["step"] for j in journals] == ["pushing", "pushing"]
    assert journals[0]["target_before"] == before
    assert journals[1]["target_before"] == journals[0]["result_revision"]
    return s, before, subs, journals


def _each_landed_once(s: Setup, subs: list[dict[str, Any]], journals: list[dict[str, Any]]) -> None:
    """Each member landed as its journal entry sealed it, on its own link, recorded once."""
    for sub, journal in zip(subs, journals, strict=True):
        landing = s.landing(sub["task"]["id"])
        assert landing["landed_revision"] == journal["result_revision"]
        assert s.task(sub["task"]["id"])["work_status"] == "done"
        landed, on = str(journal["result_revision"]), str(journal["target_before"])
        s.lands_exactly(landed, on, sub["submission"])
        assert _journal(s, landing["id"])["step"] == "recorded"
    assert len(s.landings()) == len(subs)


def test_kill_after_a_batch_push_records_each_change_once(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, start: Start
):
    s, before, subs, journals = _kill_a_batch_in("post-receive", tmp_path, server, admin, start)
    pushed = s.tip()
    assert pushed == journals[1]["result_revision"]  # the ref moved before post-receive ran

    _recover(s)
    assert s.tip() == pushed  # nothing pushed twice
    assert git(s.origin, "rev-list", "--count", f"{before}..{pushed}") == "2"
    _each_landed_once(s, subs, journals)
    _recover(s)  # a second recovery changes nothing
    assert s.tip() == pushed and len(s.landings()) == 2


def test_kill_before_a_batch_push_lands_each_link_without_new_checks(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, start: Start
):
    s, before, subs, journals = _kill_a_batch_in("pre-receive", tmp_path, server, admin, start)
    assert s.tip() == before  # the push never happened
    [log] = (s.work_dir / "logs").rglob("unit.log")
    checked_at = log.stat().st_mtime_ns

    _recover(s)
    # The checked links land as they were sealed, each recorded once, no check run again.
    assert s.tip() == journals[1]["result_revision"]
    _each_landed_once(s, subs, journals)
    assert [p.stat().st_mtime_ns for p in (s.work_dir / "logs").rglob("unit.log")] == [checked_at]


def test_kill_between_checks_and_push(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, start: Start
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    sub = s.approved({"a.txt": "a\n"})
    marker = tmp_path / "pre-receive-started"
    hook = _hook(s, "pre-receive", marker)
    before = s.tip()
    proc = start(s)
    _wait_for(marker.exists, proc)
    _kill(proc)
    assert s.tip() == before  # the push never happened
    activity = s.landing(sub["task"]["id"])
    assert activity["state"] == "queued" and s.landings() == []
    journal = _journal(s, activity["id"])
    assert journal["step"] == "pushing" and journal["target_before"] == before
    hook.unlink()
    [log] = (s.work_dir / "logs").rglob("unit.log")
    checked_at = log.stat().st_mtime_ns

    _recover(s)
    tip = s.tip()
    s.lands_exactly(tip, before, sub["submission"])
    assert tip == journal["result_revision"]  # the checked commit itself
    assert s.landing(sub["task"]["id"])["landed_revision"] == tip
    assert len(s.landings()) == 1
    # Checked on this very target before the crash: pushed without running the checks again.
    assert log.stat().st_mtime_ns == checked_at
    assert [r["event"] for r in s.reports()] == ["landed"]


GATE = {"gated": ["/bin/sh", "-c", "touch started; while [ ! -e go ]; do sleep 0.05; done"]}


def _move_during_the_checks(s: Setup, proc: subprocess.Popen[str]) -> str:
    """Once the first gated check started, another writer moves the target; then every gated
    check is let go until the integrator ends. The moved target."""
    runs = s.work_dir / "runs"

    def started() -> list[Path]:
        # The integrator removes finished trees while this walks them: os.walk skips a folder
        # that is gone (rglob would raise), and .git is never where the gate writes.
        found = []
        for folder, subfolders, names in os.walk(runs):
            subfolders[:] = [name for name in subfolders if name != ".git"]
            if "started" in names and "go" not in names:
                found.append(Path(folder))
        return found

    _wait_for(lambda: bool(started()), proc)
    moved = s.push_to_target({"theirs.txt": "theirs\n"}, "someone else lands first")
    deadline = time.monotonic() + WAIT
    while proc.poll() is None:
        for tree in started():
            (tree / "go").touch()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    return moved


def test_the_target_moves_during_the_checks(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, start: Start
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(GATE)
    sub = s.approved({"mine.txt": "mine\n"})
    moved = _move_during_the_checks(s, start(s))

    tip = s.tip()
    assert git(s.origin, "rev-parse", f"{tip}^") == moved  # rebased onto the moved target
    assert set(git(s.origin, "ls-tree", "--name-only", tip).split()) == {
        "README",
        "mine.txt",
        "theirs.txt",
    }
    assert s.landing(sub["task"]["id"])["landed_revision"] == tip
    assert len(s.landings()) == 1
    events = [r["event"] for r in s.reports()]
    assert events == ["target_moved", "landed"]


def test_the_target_moves_during_a_batch_check_and_queue_order_is_kept(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, start: Start
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(GATE, landing_batch=2)
    subs = [s.approved({f"f{i}.txt": f"{i}\n"}) for i in range(3)]
    moved = _move_during_the_checks(s, start(s))

    # The batch's push failed; its members went on one at a time before the next chunk: the
    # target holds the move, then each change in queue order, each recorded once.
    chain = git(s.origin, "rev-list", "--reverse", "--first-parent", f"{moved}..main").split()
    parent = moved
    for commit, sub in zip(chain, subs, strict=True):
        s.lands_exactly(commit, parent, sub["submission"])
        assert s.landing(sub["task"]["id"])["landed_revision"] == commit
        parent = commit
    assert len(chain) == 3 and len(s.landings()) == 3
    events = [r["event"] for r in s.reports()]
    assert events[:3] == ["batch_green", "target_moved", "target_moved"]
    assert events[3:] == ["landed"] * 3


def test_the_remote_alone_recovers_a_landing_by_its_trailer(
    server: LiveServer, admin: httpx.Client, tmp_path: Path, start: Start
):
    """Killed between push and record, and the whole work directory (journal included) lost:
    the target's first-parent history holds a commit naming the activity (Agentc-Activity), so
    that landing is checked and recorded, never pushed again."""
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    before = s.tip()
    sub = s.approved({"a.txt": "a\n"})
    marker = tmp_path / "post-receive-started"
    hook = _hook(s, "post-receive", marker)
    proc = start(s)
    _wait_for(marker.exists, proc)
    _kill(proc)
    hook.unlink()
    landed = s.tip()
    assert landed != before and s.landings() == []
    activity = s.landing(sub["task"]["id"])
    assert s.trailers(landed)["Agentc-Activity"] == activity["id"]
    shutil.rmtree(s.work_dir)
    # Someone else lands on top meanwhile: the landing is found behind the new tip.
    on_top = s.push_to_target({"later.txt": "later\n"}, "a later change")

    _recover(s)
    assert s.tip() == on_top
    assert s.landing(sub["task"]["id"])["landed_revision"] == landed
    assert s.landing(sub["task"]["id"])["target_revision"] == before
    assert s.task(sub["task"]["id"])["work_status"] == "done"
    assert len(s.landings()) == 1
    assert [r["event"] for r in s.reports()] == ["landed"]


def test_a_remote_that_refuses_the_push_lands_later_without_new_checks(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    sub = s.approved({"a.txt": "a\n"})
    hook = s.origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho branch is frozen >&2\nexit 1\n")
    hook.chmod(0o755)
    before = s.tip()
    _recover(s)
    assert s.tip() == before and s.landings() == []
    [report] = s.reports()
    assert report["event"] == "error" and "the remote refused the push" in report["reason"]
    assert "branch is frozen" in report["reason"]
    activity = s.landing(sub["task"]["id"])
    assert _journal(s, activity["id"])["step"] == "checked"
    [log] = (s.work_dir / "logs").rglob("unit.log")
    checked_at = log.stat().st_mtime_ns
    hook.unlink()

    _recover(s)
    s.lands_exactly(s.tip(), before, sub["submission"])
    assert len(s.landings()) == 1
    assert log.stat().st_mtime_ns == checked_at


def test_an_older_git_is_refused_naming_the_version(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
) -> None:
    """Landings are built with `git merge-tree --write-tree` (git 2.38): with an older git the
    poll fails once, saying so, and nothing is tried."""
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    fake = tmp_path / "old-git"
    fake.mkdir()
    real = shutil.which("git")
    assert real is not None
    (fake / "git").write_text(
        '#!/bin/sh\nfor a; do [ "$a" = version ] && { echo "git version 2.30.2"; exit 0; }; done\n'
        f'exec {real} "$@"\n'
    )
    (fake / "git").chmod(0o755)
    env = {**clean_env(), "PATH": f"{fake}:{clean_env()['PATH']}"}
    out = subprocess.run(s.argv("run", "--once"), capture_output=True, text=True, env=env)
    assert out.returncode == 1, out.stderr
    assert "needs git 2.38 or newer (merge-tree --write-tree); this is 2.30" in out.stderr
    assert "Traceback" not in out.stderr
