"""The loop in host mode, for real: root runs ``agentc-supervisor run --once`` against a live
server, throwaway role accounts, the seed's protected layout, real bwrap, and a ``command:``
agent that records who it runs as and what it can read, then commits and submits through the
agent CLI (its candidate through the launch's push helper).

Shown: the agent ran as the implementer account in a run and clone that account owns; the task
reaches review; the role account cannot read the loop's credential files (the binding's
credential, the loop's own client copy and session state, the reviewer's); and, the hostile
row, the implementer's launch cannot read another launch's run directory or the reviewer's
(the state root is masked inside every launch, and the reviewer's tree is closed to the
implementer account outside it as well). The push helper runs as its own account (not root,
not the implementer): its work directory and ssh key are closed to the implementer, and its
socket to any other local account. Plus the refusals: host mode as a non-root user, a role
account that is root, a missing push account, a credential inside a role directory, a push key
others can read.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from agentc.core.errors import SupervisorError
from agentc.core.roles import ROLES
from agentc.files import accounts as host_accounts
from agentc.supervisor.config import PushHelperSettings, SupervisorConfig
from agentc.supervisor.launch import preflight_host
from agentc.supervisor.loop import hostlaunch
from tests.client.kit import issue_token, write_credentials
from tests.supervisor.kit import (
    Account,
)
from tests.supervisor.loop.host_kit import HostLoop, _file
from tests.supervisor.loop.kit import HANGING_AGENT, LoopKit
from tests.supervisor.loop.review_kit import REVIEWER, spend, submit, workflow

pytestmark = pytest.mark.root


def _show(loop: LoopKit, ref: str, name: str) -> str:
    return subprocess.run(
        ["git", "-C", str(loop.origin), "show", f"{ref}:{name}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_host_mode_launches_the_implementer_as_its_account(host: HostLoop) -> None:
    loop = host.loop
    impl = host.accounts["implementer"]
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr + loop.tails()
    shown = loop.show(task["id"])
    assert shown["work_status"] == "waiting_review", shown
    [final] = loop.records("finished")
    assert final["outcome"] == "left as it is (submitted)" and final["released"] is True
    beat = json.loads((loop.state / "loop/heartbeat.json").read_text())
    assert "Launched" in beat["outcome"]
    # The candidate came through the push helper; what the agent recorded is in it.
    ref = loop.submission(task["id"])["candidate_ref"]
    assert ref == f"refs/agent-coordinator/candidates/{task['id']}/{final['launch_id']}"
    assert _show(loop, ref, "uid.txt").strip() == str(impl.uid)  # the implementer account
    assert _show(loop, ref, "owner.txt").strip() == str(impl.uid)  # its own checkout
    # The push helper's socket directory: the implementer's group, setgid 2750 (its owner, the
    # push account, is unmapped inside the launch; the test below checks it from outside).
    assert _show(loop, ref, "push.txt").strip() == f"2750 {impl.gid}"
    probes = _show(loop, ref, "probes.txt").split("\n")
    denied = [line for line in probes if line.startswith("denied ")]
    assert len(denied) == 5 and not [p for p in probes if p.startswith("read ")], probes
    # Hostile row: inside the launch the role's runs show only its own run.
    assert _show(loop, ref, "runs.txt").split() == [final["launch_id"]]
    # Outside any launch, the implementer account still cannot read the loop's credentials
    # and session state, nor the reviewer's tree; the run and clone are gone.
    loop_root = loop.state / "loop"
    for path in (host.credential, host.reviewer_credential, loop_root / "client/credentials.toml"):
        assert path.exists(), path
        assert host.as_role("implementer", "cat", str(path)).returncode != 0, path
    assert host.as_role("implementer", "ls", str(loop_root)).returncode != 0
    assert host.as_role("implementer", "ls", str(host.reviewer_run)).returncode != 0
    assert host.as_role("reviewer", "ls", str(host.other_run)).returncode != 0
    assert [p.name for p in (loop.state / "impl/runs").iterdir()] == ["other-launch"]
    assert list((loop.state / "impl/clones").iterdir()) == []
    assert os.stat(loop_root).st_mode & 0o777 == 0o700 and os.stat(loop_root).st_uid == 0


def test_host_mode_refuses_a_non_root_loop(host: HostLoop) -> None:
    loop, impl = host.loop, host.accounts["implementer"]
    loop.task()
    os.chmod(host.root / "supervisor.toml", 0o644)
    argv = loop.argv("run", "--once")
    prefix = ["setpriv", f"--reuid={impl.uid}", f"--regid={impl.gid}", "--clear-groups"]
    result = subprocess.run(
        [*prefix, *argv], env=loop.env(), capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert result.returncode != 0
    assert "host mode runs agentc-supervisor run as root" in result.stderr, result.stderr
    assert not (loop.state / "loop").exists()  # nothing was written


def test_host_mode_refuses_unfit_accounts_and_a_credential_in_a_role_dir(host: HostLoop) -> None:
    loop = host.loop
    loop.top["implementer_user"] = "root"
    loop.write_config()
    result = loop.once()
    assert result.returncode != 0
    assert "is root (uid or group 0)" in result.stderr, result.stderr
    loop.top["implementer_user"] = host.accounts["implementer"].name
    inside = write_credentials(loop.state / "impl/home/creds", loop.live.url, "t")
    loop.binding["credential_file"] = str(inside)
    loop.write_config()
    result = loop.once()
    assert result.returncode != 0
    assert "run.binding.credential_file" in result.stderr, result.stderr
    assert "which a role account owns" in result.stderr, result.stderr
    shutil.rmtree(loop.state / "impl/home/creds")
    os.chmod(loop.state / "impl/runs", 0o755)  # noqa: S103 - a layout problem on purpose
    loop.binding["credential_file"] = str(host.credential)
    loop.write_config()
    result = loop.once()
    assert result.returncode != 0
    assert "impl/runs has mode 0755, expected 0700" in result.stderr, result.stderr
    assert not (loop.state / "loop").exists()  # nothing was written


def test_host_mode_launches_the_reviewer_as_its_account(host: HostLoop) -> None:
    """A review in host mode: the reviewer launch runs as the reviewer account, its candidate
    sandbox nests under it, and the approval is posted; the implementer is held by its cap."""
    loop, rev = host.loop, host.accounts["reviewer"]
    token = issue_token(loop.admin, f"rev-{uuid.uuid4().hex[:6]}", loop.project, "supervised")
    write_credentials(host.reviewer_credential.parent, loop.live.url, token)
    script = _file(host.root / "agent/review.py", REVIEWER.replace("@MODE@", "honest"), 0, 0,
                   0o755)  # fmt: skip
    loop.run.update(reviewer=True, reviewer_harness=f"command:{script}")
    loop.extra = f'[run.reviewer_binding]\ncredential_file = "{host.reviewer_credential}"\n'
    loop.write_config()
    spend(loop, "impl", 1000.0)
    test_sh = 'test -f greeting.txt && echo "greeting.txt is there as uid $(id -u)"\n'
    made = submit(loop, test_sh, {"greeting.txt": "hi\n"})
    task = made["task"]["id"]
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "Reviewed {task: " in result.stderr and "'approve'" in result.stderr, result.stderr
    assert loop.show(task)["work_status"] == "waiting_integration"
    [decision] = workflow(loop, task)["reviews"]
    assert f"greeting.txt is there as uid {rev.uid}" in decision["summary"], decision
    [final] = loop.records("finished")
    assert final["role"] == "reviewer" and final["outcome"] == "decided: approve"
    assert [p.name for p in (loop.state / "rev/runs").iterdir()] == ["some-review"]
    assert list((loop.state / "rev/clones").iterdir()) == []


def test_host_mode_drains_a_hanging_agent_across_the_account_switch(host: HostLoop) -> None:
    loop = host.loop
    loop.agent.write_text(HANGING_AGENT)
    loop.write_config(events_stale_seconds=1, drain_seconds=1)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "stopped renewing attempt" in result.stderr and "no harness events" in result.stderr
    [final] = loop.records("finished")
    assert final["outcome"] == "released" and final["pid"]
    assert not os.path.exists(f"/proc/{final['pid']}")
    assert loop.show(task["id"])["work_status"] == "ready"
    assert list((loop.state / "impl/clones").iterdir()) == []


def test_host_mode_kill_9_during_the_launch_is_recovered_by_the_next_loop(
    host: HostLoop,
) -> None:
    """The launch (the loop's child, now the implementer account) dies with its loop, as a
    personal-mode launch does; the next loop releases the attempt and removes the run."""
    loop = host.loop
    loop.agent.write_text(HANGING_AGENT)
    task = loop.task()
    proc = loop.start()
    try:
        record = loop.wait_for(lambda: [r for r in loop.records() if r.get("pid")])[0]
        events = loop.state / "impl/runs" / record["launch_id"] / "events.jsonl"
        loop.wait_for(lambda: events.exists() and events.read_text())
        status = Path(f"/proc/{record['pid']}/status").read_text()
        uid = host.accounts["implementer"].uid
        assert f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}" in status, status
        # It holds descriptors the loop opened as root: the role account cannot reach them.
        fds = host.as_role("implementer", "ls", f"/proc/{record['pid']}/fd")
        assert fds.returncode != 0 and "Permission denied" in fds.stderr, fds
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    loop.wait_for(lambda: not os.path.exists(f"/proc/{record['pid']}"), timeout=30)
    run = loop.state / "impl/runs" / record["launch_id"]
    assert (run / ".state-terminal.json").exists()  # it ended recorded
    (loop.state / "kill-switch").touch()  # settle, but claim nothing afterwards
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert f"settled launch {record['launch_id']}" in result.stderr
    assert loop.records() == [] and not run.exists()
    assert loop.show(task["id"])["work_status"] == "ready"


def test_role_accounts_that_administer_or_share_a_uid_are_problems(
    accounts: dict[str, Account], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    impl, rev = accounts["implementer"], accounts["reviewer"]
    config = SupervisorConfig(implementer_user=impl.name, reviewer_user=rev.name)
    roles = ROLES
    assert preflight_host.account_problems(config, roles) == []
    same = SupervisorConfig(implementer_user=impl.name, reviewer_user=impl.name)
    [shared] = preflight_host.account_problems(same, roles)
    assert f"shares uid {impl.uid} with {impl.name}" in shared
    missing = SupervisorConfig(implementer_user="agentc-nobody-here", reviewer_user=rev.name)
    [gone] = preflight_host.account_problems(missing, roles)
    assert "role account agentc-nobody-here does not exist (fix: create the role" in gone
    subprocess.run(["gpasswd", "-a", impl.name, "adm"], check=True, capture_output=True)
    try:
        [admin] = preflight_host.account_problems(config, roles)
        assert f"the implementer's account {impl.name} is in the group adm" in admin
    finally:
        subprocess.run(["gpasswd", "-d", impl.name, "adm"], check=True, capture_output=True)
    # sudo -l as root lists what an account may run: a grant is a problem, a refusal is not.
    sudo = tmp_path / "sudo"
    sudo.write_text(
        '#!/bin/sh\ncase "$4" in\n'
        f'  {rev.name}) printf "User %s may run the following commands on h:\\n'
        '    (ALL : ALL) ALL\\n" "$4";;\n'
        '  *) echo "User $4 is not allowed to run sudo on h.";;\nesac\n'
    )
    sudo.chmod(0o755)
    monkeypatch.setattr(host_accounts, "SUDO", sudo)
    [granted] = preflight_host.account_problems(config, roles)
    assert f"the reviewer's account {rev.name} may use sudo ((ALL : ALL) ALL)" in granted


def test_a_launch_the_role_cannot_start_is_released_naming_why(host: HostLoop) -> None:
    """The launch is planned as the role account: an agent only root may run (mode 0700) is
    not started, and the attempt is released with the child's reason."""
    loop = host.loop
    os.chmod(loop.agent, 0o700)
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    impl = host.accounts["implementer"].name
    why = f"the launch as {impl} did not start: harness command:{loop.agent}: "
    assert why in result.stderr and "is not an executable" in result.stderr, result.stderr
    [final] = loop.records("finished")
    assert final["outcome"] == "released" and final["pid"] is None
    handoff = loop.attempt(final["attempt"])["attempt"]["handoff"]
    assert f"the launch failed: {why}" in handoff, handoff
    assert loop.show(task["id"])["work_status"] == "ready"
    assert list((loop.state / "impl/clones").iterdir()) == []
    leftovers = [p.name for p in (loop.state / "push").iterdir() if not p.name.startswith(".")]
    assert leftovers == []


def test_hand_over_gives_the_tree_to_the_role_and_follows_no_link(
    accounts: dict[str, Account], tmp_path: Path
) -> None:
    impl = accounts["implementer"]
    outside = _file(tmp_path / "outside", "root's\n", 0, 0, 0o600)
    tree = tmp_path / "clone"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub/file").write_text("x\n")
    (tree / "link").symlink_to(outside)
    hostlaunch.hand_over(pwd.getpwnam(impl.name), tree)
    for path in (tree, tree / "sub", tree / "sub/file", tree / "link"):
        assert os.lstat(path).st_uid == impl.uid, path
    assert os.stat(outside).st_uid == 0  # the link's target is not touched
    planted = tmp_path / "planted"
    planted.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(SupervisorError, match="no longer the directory the loop made"):
        hostlaunch.hand_over(pwd.getpwnam(impl.name), planted)
    with pytest.raises(SupervisorError, match="no longer the directory the loop made"):
        hostlaunch.hand_over(pwd.getpwnam(impl.name), tree)  # the role's already
    assert os.stat(tmp_path / "elsewhere").st_uid == 0


def test_host_mode_refuses_a_reviewer_credential_in_a_role_dir(host: HostLoop) -> None:
    loop = host.loop
    loop.run.update(reviewer=True)
    inside = loop.state / "rev/coordinator/credentials.toml"  # the default: the role's own
    loop.write_config()
    result = loop.once()
    assert result.returncode != 0
    assert f"run.reviewer_binding.credential_file: {inside} is inside" in result.stderr
    assert "run.binding.credential_file" not in result.stderr, result.stderr
    assert not (loop.state / "loop").exists()


CONNECT = "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])"


def _helper_pid(launch_id: str) -> int | None:
    """The pid of the push helper serving ``launch_id`` (found by its command line)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"agentc.push.cli" in argv and f"--launch={launch_id}".encode() in argv:
            return int(entry.name)
    return None


def test_host_mode_runs_the_push_helper_as_its_own_account(host: HostLoop) -> None:
    """While a launch runs, its push helper is the push account's process (no groups, only
    PATH, LANG and HOME, plus PYTHONPATH from a source tree), its work directory that account's
    0700, its socket directory the push account's with the implementer's group 2750: the
    implementer account can connect but not read the work directory or the ssh key, another
    local account cannot even connect. The helper dies with the loop."""
    loop = host.loop
    push, impl = host.accounts["push"], host.accounts["implementer"]
    loop.agent.write_text(HANGING_AGENT)
    loop.task()
    proc = loop.start()
    try:
        record = loop.wait_for(lambda: [r for r in loop.records() if r.get("pid")])[0]
        helper = loop.wait_for(lambda: _helper_pid(record["launch_id"]))
        status = Path(f"/proc/{helper}/status").read_text()
        assert f"Uid:\t{push.uid}\t{push.uid}\t{push.uid}\t{push.uid}\n" in status, status
        assert f"Gid:\t{push.gid}\t{push.gid}\t{push.gid}\t{push.gid}\n" in status, status
        [groups] = [line for line in status.splitlines() if line.startswith("Groups:")]
        assert groups.split() == ["Groups:"], status  # no supplementary groups
        environ = Path(f"/proc/{helper}/environ").read_bytes().split(b"\0")
        names = {item.split(b"=", 1)[0].decode() for item in environ if item}
        assert {"PATH", "LANG", "HOME"} <= names <= {"PATH", "LANG", "HOME", "PYTHONPATH"}, names
        argv = Path(f"/proc/{helper}/cmdline").read_bytes().decode().split("\0")
        assert f"--ssh-key={host.push_key}" in argv, argv
        sock = Path(next(a for a in argv if a.startswith("--socket=")).removeprefix("--socket="))
        loop.wait_for(lambda: sock.exists())
        work = sock.parent.parent / "work"
        assert f"--work-dir={work / 'repo'}" in argv, argv
        info = os.stat(work)
        assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (push.uid, push.gid, 0o700)
        info = os.stat(sock.parent)
        assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (push.uid, impl.gid, 0o2750)
        info = os.stat(sock.parent.parent)
        assert (info.st_uid, info.st_mode & 0o7777) == (0, 0o711)
        # The implementer account reaches the socket, not the helper's files or its key.
        assert host.as_role("implementer", "ls", str(work)).returncode != 0
        assert host.as_role("implementer", "cat", str(host.push_key)).returncode != 0
        assert host.as_role("push", "cat", str(host.push_key)).returncode == 0  # its own
        reached = host.as_role("implementer", "/usr/bin/python3", "-c", CONNECT, str(sock))
        assert reached.returncode == 0, reached.stderr
        # Another local account (neither root nor the implementer) cannot connect at all.
        other = host.as_role("other", "/usr/bin/python3", "-c", CONNECT, str(sock))
        assert other.returncode != 0 and "Permission denied" in other.stderr, other.stderr
        assert host.as_role("other", "ls", str(work)).returncode != 0
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    loop.wait_for(lambda: not os.path.exists(f"/proc/{helper}"), timeout=30)  # parent death
    loop.wait_for(lambda: not os.path.exists(f"/proc/{record['pid']}"), timeout=30)
    (loop.state / "kill-switch").touch()  # settle, but claim nothing afterwards
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert not sock.parent.parent.exists()  # swept


def test_host_mode_refuses_a_missing_or_shared_push_account_and_an_open_key(
    host: HostLoop,
) -> None:
    loop = host.loop
    table = loop.top["push_helper"]
    loop.top["push_helper"] = {**table, "user": "agentc-nobody-push"}
    loop.write_config()
    result = loop.once()
    assert result.returncode != 0
    assert "the push helper's account agentc-nobody-push does not exist (fix: create it" in (
        result.stderr
    ), result.stderr
    impl = host.accounts["implementer"]
    loop.top["push_helper"] = {**table, "user": impl.name}
    loop.write_config()
    result = loop.once()
    assert result.returncode != 0
    assert f"the push helper's account {impl.name} shares uid {impl.uid}" in result.stderr
    loop.top["push_helper"] = table
    loop.write_config()
    os.chmod(host.push_key, 0o440)
    result = loop.once()
    assert result.returncode != 0
    assert f"push_helper.ssh_key {host.push_key} has mode 0440" in result.stderr, result.stderr
    os.chmod(host.push_key, 0o400)
    os.chown(host.push_key, 0, 0)
    result = loop.once()
    assert result.returncode != 0
    owned = f"push_helper.ssh_key {host.push_key} is owned by uid 0, not by the push helper's"
    assert owned in result.stderr, result.stderr
    assert not (loop.state / "loop").exists()  # nothing was written


def test_push_accounts_that_are_root_or_share_a_uid_are_problems(
    accounts: dict[str, Account],
) -> None:
    impl, rev, push = accounts["implementer"], accounts["reviewer"], accounts["push"]

    def config(user: str) -> SupervisorConfig:
        return SupervisorConfig(implementer_user=impl.name, reviewer_user=rev.name,
                                push_helper=PushHelperSettings(user=user))  # fmt: skip

    assert preflight_host.account_problems(config(push.name), ROLES, push_helper=True) == []
    problems = preflight_host.account_problems(config("root"), ROLES, push_helper=True)
    assert "the push helper's account root is root (uid or group 0)" in problems[0], problems
    shared = config(rev.name)
    [problem] = preflight_host.account_problems(shared, ROLES, push_helper=True)
    assert f"the push helper's account {rev.name} shares uid {rev.uid} with {rev.name}" in problem
