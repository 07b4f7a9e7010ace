"""The loop in host mode, for real: root runs ``agentc-supervisor run --once`` against a live
server, throwaway role accounts, the seed's protected layout, real bwrap, and a ``command:``
agent that records who it runs as and what it can read, then commits and submits through the
agent CLI (its candidate through the launch's push helper).

Shown: the agent ran as the implementer account in a run and clone that account owns; the task
reaches review; the role account cannot read the loop's credential files (the binding's
credential, the loop's own client copy and session state, the reviewer's); and, the hostile
row, the implementer's launch cannot read another launch's run directory or the reviewer's
(the state root is masked inside every launch, and the reviewer's tree is closed to the
implementer account outside it as well). Plus the refusals: host mode as a non-root user, a
role account that is root, a credential inside a role directory.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentc.core.errors import SupervisorError
from agentc.supervisor import preflight_host
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.loop import hostlaunch
from agentc.supervisor.roles import ROLES
from tests.client.kit import admin_project, issue_token, make_clone, write_credentials
from tests.kit.live import LiveServer
from tests.supervisor.kit import REPO, Kit, create_user, delete_user
from tests.supervisor.loop.kit import HANGING_AGENT, LoopKit
from tests.supervisor.loop.review_kit import REVIEWER, spend, submit, workflow

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="host mode runs as root")

SHIM = REPO / "src/agentc/client/bin/agent-coordinator"

# Records who it runs as and which of ``PROBES`` it can read (and what it sees of the role's
# runs), commits that with a greeting, and submits.
HOST_AGENT = """#!/bin/sh
set -e
cat > "$TMPDIR/prompt.md"
echo '{{"type": "agent", "step": "start"}}'
cd agentc-checkout
id -u > uid.txt
stat -c %u . > owner.txt
stat -c '%a %g' "$(dirname "$AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET")" > push.txt
for f in {probes}; do
    if cat "$f" > /dev/null 2>&1; then echo "read $f"; else echo "denied $f"; fi
done > probes.txt
ls -A {runs} > runs.txt 2>&1 || true
echo hi > greeting.txt
git add uid.txt owner.txt push.txt probes.txt runs.txt greeting.txt
git commit --quiet -m greeting
cat > "$TMPDIR/submission.json" <<'JSON'
{{"summary": "greeting added",
 "acceptance_evidence": [{{"criterion": "greeting exists", "evidence": "greeting.txt"}}]}}
JSON
agent-coordinator submissions code --checkout "$PWD" --input "$TMPDIR/submission.json" \\
    --json > "$TMPDIR/submitted.json"
echo '{{"type": "agent", "step": "submitted"}}'
"""


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


@pytest.fixture(scope="module")
def accounts() -> Iterator[dict[str, Account]]:
    made: list[str] = []
    try:
        found: dict[str, Account] = {}
        for role, prefix in (("implementer", "agentc-li-"), ("reviewer", "agentc-lr-")):
            name = create_user(prefix)
            made.append(name)
            entry = pwd.getpwnam(name)
            found[role] = Account(name, entry.pw_uid, entry.pw_gid)
        yield found
    finally:
        for name in made:
            delete_user(name)
        for name in made:
            assert subprocess.run(["id", name], capture_output=True).returncode != 0


def _mkdir(path: Path, uid: int, gid: int, mode: int) -> Path:
    path.mkdir(mode=mode)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    return path


def _file(path: Path, data: str, uid: int, gid: int, mode: int) -> Path:
    path.write_text(data)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    return path


@dataclass
class HostLoop:
    loop: LoopKit
    root: Path
    accounts: dict[str, Account]
    credential: Path  # the loop's implementer credential (root 0600, outside the role dirs)
    reviewer_credential: Path
    other_run: Path  # another implementer launch's run, left behind with a secret
    reviewer_run: Path  # a reviewer launch's run, with a secret

    def as_role(self, role: str, *argv: str) -> subprocess.CompletedProcess[str]:
        who = self.accounts[role]
        prefix = ["setpriv", f"--reuid={who.uid}", f"--regid={who.gid}", "--clear-groups"]
        return subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, timeout=60, cwd="/", env={}
        )


@pytest.fixture
def host(
    accounts: dict[str, Account], server: LiveServer, admin: httpx.Client
) -> Iterator[HostLoop]:
    """The seed's protected layout under a short root-owned 0755 base the roles can reach."""
    root = Path(tempfile.mkdtemp(prefix="lh", dir="/tmp"))
    try:
        os.chmod(root, 0o755)  # noqa: S103 - root-owned, so the role accounts can traverse
        state = _mkdir(_mkdir(root / "kit", 0, 0, 0o755) / "state", 0, 0, 0o755)
        for role, account in accounts.items():
            role_dir = _mkdir(state / ("impl" if role == "implementer" else "rev"), 0,
                              account.gid, 0o750)  # fmt: skip
            for sub in ("runs", "clones", "home"):
                _mkdir(role_dir / sub, account.uid, account.gid, 0o700)
        impl, rev = accounts["implementer"], accounts["reviewer"]
        other_run = _mkdir(state / "impl/runs/other-launch", impl.uid, impl.gid, 0o700)
        _file(other_run / "secret", "other launch\n", impl.uid, impl.gid, 0o600)
        reviewer_run = _mkdir(state / "rev/runs/some-review", rev.uid, rev.gid, 0o700)
        _file(reviewer_run / "secret", "reviewer\n", rev.uid, rev.gid, 0o600)
        bin_dir = _mkdir(root / "bin", 0, 0, 0o755)
        shutil.copyfile(SHIM, bin_dir / "agent-coordinator")
        os.chmod(bin_dir / "agent-coordinator", 0o755)  # noqa: S103 - the launch runs it
        project = admin_project(admin)
        token = issue_token(admin, f"impl-{uuid.uuid4().hex[:6]}", project, "supervised")
        _mkdir(root / "etc", 0, 0, 0o755)
        credential = write_credentials(root / "etc/impl", server.url, token)
        reviewer_credential = write_credentials(root / "etc/rev", server.url, "not-a-token")
        origin, clone = make_clone(root / "repo")
        agent_dir = _mkdir(root / "agent", 0, 0, 0o755)
        probes = [
            credential,
            reviewer_credential,
            state / "loop/client/credentials.toml",
            other_run / "secret",
            reviewer_run / "secret",
        ]
        text = HOST_AGENT.format(probes=" ".join(map(str, probes)), runs=state / "impl/runs")
        agent = _file(agent_dir / "agent.sh", text, 0, 0, 0o755)
        top: dict[str, Any] = {
            "mode": "host",
            "bin_dir": str(bin_dir),
            "expose": [str(bin_dir)],  # /opt/agentc/bin on a host; here under the masked /tmp
            "implementer_user": impl.name,
            "reviewer_user": rev.name,
            "supervisor_program": [
                "/usr/bin/env",
                f"PYTHONPATH={REPO / '.venv/lib/python3.11/site-packages'}:{REPO / 'src'}",
                "/usr/bin/python3",
                "-m",
                "agentc.supervisor.cli",
            ],
        }
        run = {
            "harness": f"command:{agent}",
            "allow_insecure_loopback": True,
            "min_free_mib": 1,
            "drain_seconds": 2,
        }
        kit = Kit(root, state, bin_dir, root / "supervisor.toml", "host")
        loop = LoopKit(kit, server, admin, project, origin, agent, root / "supervisor.toml", run,
                       top=top, clone=clone, binding={"credential_file": str(credential)},
                       portable=True)  # fmt: skip
        loop.write_config()
        yield HostLoop(loop, root, accounts, credential, reviewer_credential, other_run,
                       reviewer_run)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the push base is inside: the path is short


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
    # The push helper's socket directory: root's, the implementer's group, setgid 2750.
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
    monkeypatch.setattr(preflight_host, "SUDO", sudo)
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
