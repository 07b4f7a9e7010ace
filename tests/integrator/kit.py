"""Test kit for the integrator: a project with a real bare repository, agents that get a code
task approved through the real agent CLI, and the real `agentc-integrator` as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agentc.push.refs import CANDIDATES
from tests.client.kit import (
    Workspace,
    admin_get,
    admin_project,
    git,
    issue_token,
    make_clone,
    workspace,
)

INTEGRATOR = str(Path(sys.executable).with_name("agentc-integrator"))
PASS = {"unit": ["/bin/sh", "-c", "echo checking; test -f README"]}
NO_BROKEN = {  # fails (exit 3) on a tree holding a file named `broken`
    "unit": [
        "/bin/sh",
        "-c",
        "echo inspecting the tree; test ! -e broken || { echo the tree is broken; exit 3; }",
    ]
}
Shape = Callable[[Path, str], None]
"""Makes a candidate's history in a work tree at its base (see the shapes below)."""


def issue_integrator_token(admin: httpx.Client, project_id: str) -> str:
    return issue_token(
        admin, f"integrator-{uuid.uuid4().hex[:8]}", project_id, credential_class="integrator"
    )


def _toml(value: Any) -> str:
    return json.dumps(str(value) if isinstance(value, Path) else value)


@dataclass
class Setup:
    root: Path
    url: str
    admin: httpx.Client
    project_id: str
    origin: Path
    clone: Path
    reviewer: Workspace
    token: str
    config: Path
    work_dir: Path
    connected: set[Path] = field(default_factory=set)

    def write_config(self, checks: dict[str, list[str]], **extra: Any) -> None:
        secrets = self.root / "secrets"
        secrets.mkdir(mode=0o700, exist_ok=True)
        cred = secrets / "integrator.token"
        cred.write_text(self.token + "\n")
        cred.chmod(0o600)
        keys = {
            "origin": self.url,
            "project_id": self.project_id,
            "credential_file": cred,
            "allow_insecure_loopback": True,
            "remote": self.origin,
            "work_dir": self.work_dir,
            "poll_seconds": 1,
            **extra,
        }
        lines = [f"{k} = {_toml(v)}" for k, v in keys.items()]
        for name, argv in checks.items():
            lines += [f"[checks.{name}]", f"argv = {_toml(argv)}", "timeout_seconds = 120"]
        self.config.write_text("\n".join(lines) + "\n")

    def integrator(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), capture_output=True, text=True, timeout=300, env=clean_env()
        )

    def argv(self, *args: str) -> list[str]:
        return [INTEGRATOR, "--config", str(self.config), *args]

    def connect(self, ws: Workspace) -> None:
        if ws.root not in self.connected:
            ws.ok("connect", "--harness", "test-harness")
            self.connected.add(ws.root)

    def submit(
        self,
        files: dict[str, str],
        base: str = "HEAD",
        title: str = "",
        shape: Shape | None = None,
        credential_class: str = "interactive",
        task_id: str | None = None,
        approve: bool = False,
    ) -> dict[str, Any]:
        """A code task created (or ``task_id``, ready again), implemented and submitted (its
        candidate pushed) by a new worker (a session prepares one worktree): ``files``
        committed on the base, or the history ``shape`` makes; approved with ``approve``. The
        answer holds the worker's ``token`` too."""
        name = f"w-{uuid.uuid4().hex[:6]}"
        token = issue_token(self.admin, name, self.project_id, credential_class)
        worker = workspace(self.root / name, self.url, self.project_id, token, self.clone)
        self.connect(worker)
        if task_id is None:
            about = {"title": title or f"change {sorted(files)}", "acceptance_criteria": ["done"]}
            created = worker.ok("tasks", "create", "--input", "-", stdin=json.dumps(about))
            task = created["task"]
        else:
            task = self.task(task_id)
        worker.ok("claim", "--task", task["id"])
        prepared = worker.ok("worktree", "prepare", "--source", str(self.clone), "--base", base)
        wt = Path(prepared["path"])
        if shape is not None:
            shape(wt, prepared["base_revision"])
        else:
            commit(wt, dict(files), task["title"])
        evidence = [{"criterion": "done", "evidence": "the files"}]
        body = {
            "summary": "done",
            "acceptance_evidence": evidence,
            "candidate_ref": f"{CANDIDATES}/{task['id']}/{name}",  # as agentc-push names it
        }
        sub = worker.ok(
            "submissions", "code", "--push", "origin", "--input", worker.file("sub.json", body)
        )
        submitted = {"task": task, "submission": sub["submission"], "token": token}
        if approve:
            self.approve(submitted)
        return submitted

    def approve(self, submitted: dict[str, Any]) -> None:
        decided = self.decide(submitted, "approved")
        assert decided["task"]["work_status"] == "waiting_integration"

    def decide(self, submitted: dict[str, Any], decision: str) -> Any:
        self.connect(self.reviewer)
        self.reviewer.ok("reviews", "claim", "--submission", submitted["submission"]["id"])
        findings = [] if decision == "approved" else [{"severity": "required", "remedy": "redo"}]
        verdict = {"decision": decision, "summary": "read", "findings": findings}
        return self.reviewer.ok("reviews", "decide", "--input", "-", stdin=json.dumps(verdict))

    def approved(
        self, files: dict[str, str], base: str = "HEAD", shape: Shape | None = None
    ) -> dict[str, Any]:
        submitted = self.submit(files, base, shape=shape)
        self.approve(submitted)
        return submitted

    def advance(self, files: dict[str, str], message: str = "advance") -> str:
        """Move the target and bring the clone (where workers take their base) along."""
        moved = self.push_to_target(files, message)
        git(self.clone, "pull", "--quiet", "--ff-only", "origin", "main")
        return moved

    def task(self, task_id: str) -> Any:
        return admin_get(self.admin, f"/api/v1/projects/{self.project_id}/tasks/{task_id}")

    def workflow(self, task_id: str) -> Any:
        return admin_get(self.admin, f"/api/v1/projects/{self.project_id}/tasks/{task_id}/workflow")

    def landing(self, task_id: str) -> Any:
        acts = self.workflow(task_id)["activities"]
        return next(a for a in acts if a["kind"] == "integration")

    def landings(self) -> list[Any]:
        """Every integration.completed event of the project."""
        events = admin_get(self.admin, f"/api/v1/projects/{self.project_id}/events?limit=200")
        return [e for e in events["items"] if e["kind"] == "integration.completed"]

    def tip(self) -> str:
        return git(self.origin, "rev-parse", "refs/heads/main")

    def tree(self, revision: str) -> str:
        return git(self.origin, "rev-parse", f"{revision}^{{tree}}")

    def trailers(self, revision: str) -> dict[str, str]:
        text = git(self.origin, "log", "-1", "--format=%(trailers:only,unfold)", revision)
        return dict(line.split(": ", 1) for line in text.splitlines())

    def lands_exactly(self, landed: str, before: str, submission: dict[str, Any]) -> None:
        """``landed`` is one commit of the integrator's on ``before`` whose change is exactly
        the submission's reviewed diff, naming it in its trailers."""
        base, candidate = submission["base_revision"], submission["candidate_revision"]
        assert git(self.origin, "rev-list", "--parents", "-n1", landed).split()[1:] == [before]
        assert raw_diff(self.origin, before, landed) == raw_diff(self.origin, base, candidate)
        assert git(self.origin, "log", "-1", "--format=%an|%cn", landed) == (
            "agentc-integrator|agentc-integrator"
        )
        trailers = self.trailers(landed)
        assert trailers["Agentc-Submission"] == submission["id"]
        assert (trailers["Agentc-Candidate"], trailers["Agentc-Base"]) == (candidate, base)

    def reports(self) -> list[Any]:
        path = self.work_dir / "reports.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def push_to_target(self, files: dict[str, str], message: str = "elsewhere") -> str:
        """Someone else moves the target: a commit pushed straight to main from another clone."""
        other = self._other()
        for name, text in files.items():
            (other / name).write_text(text)
            git(other, "add", name)
        return self._push(other, message)

    def remove_from_target(self, name: str) -> str:
        other = self._other()
        git(other, "rm", "--quiet", name)
        return self._push(other, f"remove {name}")

    def _other(self) -> Path:
        other = self.root / f"other-{uuid.uuid4().hex[:6]}"
        subprocess.run(
            ["git", "clone", "--quiet", str(self.origin), str(other)],
            check=True,
            capture_output=True,
        )
        git(other, "config", "user.email", "other@example.invalid")
        git(other, "config", "user.name", "other")
        return other

    def _push(self, other: Path, message: str) -> str:
        git(other, "commit", "--quiet", "-m", message)
        git(other, "push", "--quiet", "origin", "HEAD:refs/heads/main")
        return git(other, "rev-parse", "HEAD")


def clean_env() -> dict[str, str]:
    """What the integrator runs with in the tests: no coordinator or model variables."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
    }


def make_setup(
    root: Path,
    url: str,
    admin: httpx.Client,
    on: tuple[str, Path] | None = None,
    **policy: Any,
) -> Setup:
    """A project with a repository, a reviewer and an integrator credential; ``on``: an
    existing project and its origin (a supervisor loop's) instead of new ones."""
    root.mkdir(parents=True, exist_ok=True)
    if on is None:
        # Its workers file their own tasks (through the agent CLI): the project admits them.
        pid = admin_project(admin, review_mode="agent", admit_agent_tasks=True, **policy)
        origin, clone = make_clone(root)
    else:
        (pid, origin), clone = on, root / "clone"
        subprocess.run(["git", "clone", "--quiet", str(origin), str(clone)], check=True)
    reviewer = workspace(
        root / "reviewer",
        url,
        pid,
        issue_token(admin, f"r-{uuid.uuid4().hex[:6]}", pid),
        repo=clone,
    )
    token = issue_integrator_token(admin, pid)
    return Setup(
        root,
        url,
        admin,
        pid,
        origin,
        clone,
        reviewer,
        token,
        root / "integrator.toml",
        root / "integrator-work",
    )


# -- candidate histories, built with real git in a work tree at the base ------------------------
# Each shape makes the candidate (HEAD) in ``wt``, whose HEAD is ``base`` (a commit with a
# parent: some shapes fork one commit before it). The reviewed change of every hostile shape is
# only ``feature.txt``; what a rebase of its history would land is more (or less).
FEATURE = {"feature.txt": "the intended change\n"}


def write(wt: Path, files: Mapping[str, str | None]) -> None:
    """Write (or, for None, remove) files and stage them."""
    for name, text in files.items():
        path = wt / name
        if text is None:
            git(wt, "rm", "--quiet", "-r", "--force", "--", name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        git(wt, "add", "--", name)


def commit(wt: Path, files: Mapping[str, str | None], message: str) -> str:
    write(wt, files)
    git(wt, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(wt, "rev-parse", "HEAD")


def side_branch_merge(wt: Path, base: str) -> None:
    """A side branch forked one commit before the base adds evil.sh; the candidate merges it
    and deletes evil.sh in the merge: the net change is the feature, the history holds evil."""
    git(wt, "checkout", "--quiet", "-b", "side", f"{base}^")
    commit(wt, {"evil.sh": "#!/bin/sh\necho pwned\n"}, "tooling")
    git(wt, "checkout", "--quiet", "-")
    commit(wt, FEATURE, "the feature")
    git(wt, "merge", "--quiet", "--no-ff", "--no-commit", "side")
    write(wt, {"evil.sh": None})
    git(wt, "commit", "--quiet", "-m", "merge side")


def fork_before_base(wt: Path, base: str) -> None:
    """The attack of issue 24: from one commit before the base, a commit re-applying the base,
    the feature, and a merge of an evil side branch that deletes evil.sh. The net diff from the
    base is the feature; the candidate does not descend from the base."""
    git(wt, "checkout", "--quiet", "--detach", f"{base}^")
    git(wt, "checkout", base, "--", ".")
    git(wt, "commit", "--quiet", "-m", "re-apply the base")
    commit(wt, FEATURE, "the feature")
    main = git(wt, "rev-parse", "HEAD")
    git(wt, "checkout", "--quiet", "--detach", f"{base}^")
    side = commit(wt, {"evil.sh": "#!/bin/sh\necho pwned\n"}, "tooling")
    git(wt, "checkout", "--quiet", "--detach", main)
    git(wt, "merge", "--quiet", "--no-ff", "--no-commit", side)
    write(wt, {"evil.sh": None})
    git(wt, "commit", "--quiet", "-m", "merge tooling")


def revert_and_reapply_base(wt: Path, base: str) -> None:
    """On the base: a commit reverting the base's own change, one re-applying it (a rebase
    drops it: its patch is already upstream), the feature. Rebased onto a moved target, the
    revert would land and the re-application would not."""
    git(wt, "revert", "--no-edit", base)
    git(wt, "checkout", base, "--", ".")
    git(wt, "commit", "--quiet", "-m", "re-apply the base")
    commit(wt, FEATURE, "the feature")


def empty_when_rebased(wt: Path, base: str) -> None:
    """A commit making README what the target also makes it (a rebase drops it as empty once
    the target has it), then one putting README back: the net change is the feature, but a
    rebase onto that target would revert the target's README."""
    commit(wt, {"README": "hello world\n"}, "readme")
    commit(wt, {"README": "hello\n"}, "back")
    commit(wt, FEATURE, "the feature")


def amended(wt: Path, base: str) -> None:
    """A commit with the feature and evil.sh, amended to the feature alone."""
    commit(wt, {**FEATURE, "evil.sh": "#!/bin/sh\necho pwned\n"}, "first try")
    write(wt, {"evil.sh": None})
    git(wt, "commit", "--quiet", "--amend", "-m", "the feature")


def holds(repo: Path, revision: str, path: str) -> bool:
    """Whether ``path`` is in the tree of ``revision`` or of any commit reachable from it."""
    for sha in git(repo, "rev-list", revision).split():
        if git(repo, "ls-tree", "-r", "--name-only", sha, "--", path):
            return True
    return False


def raw_diff(repo: Path, old: str, new: str) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(repo), "diff-tree", "-r", "-z", "--no-renames", old, new],
        capture_output=True,
        check=True,
    )
    return done.stdout


def run_once(s: Setup) -> None:
    """One poll of the real integrator (`run --once`), which must end cleanly."""
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
