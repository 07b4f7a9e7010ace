"""The first ``agentc up`` on a state directory: check everything, then create it all.

Every check that can refuse (the state directory, ``--repo``, ``--check``, the harness, the
port) runs before anything is written. Setting up has two halves: before the coordinator runs
(the directory, the database's first admin through the server's own ``init-admin``, the bare
remote, its first commit) and once it answers (the project, the role credentials and the
configurations, through the API as the admin). ``up.json`` is written last; a first ``up`` that
fails removes the directory it created, so nothing is left half made.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentc.client.transport import Transport
from agentc.core.errors import ConfigError
from agentc.files.git import git_env, run_git
from agentc.files.procs import run_check
from agentc.up import sample
from agentc.up.layout import Layout, write_credential

# Role -> (credential class, access) of the agent principal up issues for it.
PRINCIPALS = {
    "implementer": ("supervised", "write"),
    "reviewer": ("supervised", "write"),
    "integrator": ("integrator", "write"),
    "status": ("interactive", "read"),
    # agentc-attention's: the digest sender and the canary agent (it files canary tasks).
    "attention": ("supervised", "write"),
}
ATTENTION_AGENT = "up-attention"
GIT_TIMEOUT = 300.0
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "agentc up",
    "GIT_AUTHOR_EMAIL": "up@agentc.invalid",
    "GIT_COMMITTER_NAME": "agentc up",
    "GIT_COMMITTER_EMAIL": "up@agentc.invalid",
}


@dataclass
class Options:
    state: Path
    port: int
    repo: Path | None = None
    checks: list[str] = field(default_factory=list)
    harness: str = "example"
    seed_demo: bool = False
    password: str | None = None  # None: generated
    quiet_hours: str | None = None  # the window new work may be claimed in; None: as before
    agents: int | None = None  # launches at once (0: the machine's number); None: as before


PROGRAMS = {
    "agent-coordinator-server": "agentc.service.cli",
    "agentc-supervisor": "agentc.supervisor.cli",
    "agentc-integrator": "agentc.integrator.cli",
    "agentc-attention": "agentc.attention.cli",
}


def program(name: str) -> list[str]:
    """One of agentc's programs, run by this interpreter (whatever way agentc is installed)."""
    return [sys.executable, "-m", PROGRAMS[name]]


def git(*args: str, cwd: Path | None = None) -> str:
    env = {**git_env(), "HOME": "/nonexistent", **GIT_IDENTITY}
    done = run_git(["git", *args], cwd, env, GIT_TIMEOUT, ConfigError, _complaint, text=True)
    return done.stdout.strip()


def _complaint(stderr: str) -> str:
    return stderr.strip()


def check_repo(repo: Path) -> str:
    """``--repo`` must be a git work tree with a commit; returns its current branch's name."""
    if not repo.is_dir():
        raise ConfigError(f"--repo {repo}: no such directory")
    try:
        inside = git("-C", str(repo), "rev-parse", "--is-inside-work-tree")
    except ConfigError:
        inside = ""
    if inside != "true":
        raise ConfigError(f"--repo {repo}: not a git repository (git init it, commit, retry)")
    try:
        git("-C", str(repo), "rev-parse", "--verify", "HEAD^{commit}")
    except ConfigError:
        raise ConfigError(f"--repo {repo}: the repository has no commit yet") from None
    try:
        return git("-C", str(repo), "symbolic-ref", "--short", "HEAD")
    except ConfigError:
        return "main"  # a detached HEAD lands on main


def check_new_state(layout: Layout) -> None:
    root = layout.root  # the lock of the up setting it up may be there already
    if root.exists() and any(p != layout.lock for p in root.iterdir()):
        raise ConfigError(
            f"--state-dir {root}: the directory is not empty and holds no up.json (it was not "
            "made by agentc up): choose another --state-dir or empty it"
        )


def init_admin(layout: Layout, password: str) -> None:
    """The first admin, created with the server's own host command (nothing else writes the
    database directly)."""
    argv = [*program("agent-coordinator-server"), "--database", str(layout.database)]
    argv += ["init-admin", "--username", "admin", "--password-stdin"]
    done = subprocess.run(argv, input=password + "\n", capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"creating the admin failed: {done.stderr.strip()}")
    fd = os.open(layout.admin_password, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")


def end_browser_sessions(layout: Layout) -> None:
    """End every browser session of an earlier ``up`` (the server's own host command): while
    ``up`` was stopped its port was free, and a program that took it may have collected the
    cookie a browser tab sent there."""
    argv = [*program("agent-coordinator-server"), "--database", str(layout.database)]
    done = subprocess.run([*argv, "end-browser-sessions"], capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"ending the earlier browser sessions failed: {done.stderr.strip()}")


def make_remote(layout: Layout, repo: Path | None, branch: str) -> None:
    """The bare repository the project lives in: ``--repo``'s current branch, or the sample.
    Private (``core.sharedRepository`` 0600) whatever the umask of whoever writes it."""
    git(
        "init", "--quiet", "--bare", "--shared=0600", "--initial-branch", branch, str(layout.remote)
    )
    if repo is not None:
        git(
            "-C",
            str(layout.remote),
            "fetch",
            "--quiet",
            "--no-tags",
            str(repo.resolve()),
            f"HEAD:refs/heads/{branch}",
        )
        return
    with tempfile.TemporaryDirectory(prefix="agentc-sample-") as scratch:
        work = Path(scratch)
        git("init", "--quiet", "--initial-branch", branch, str(work))
        for name, text in sample.FILES.items():
            (work / name).write_text(text)
        git("add", ".", cwd=work)
        git("commit", "--quiet", "-m", "calc: a tiny sample project", cwd=work)
        git("push", "--quiet", str(layout.remote), f"HEAD:refs/heads/{branch}", cwd=work)


def before_server(options: Options, layout: Layout, branch: str) -> str:
    """Create the directory (made private by the caller), the admin and the remote; returns
    the admin's password."""
    for sub in ("credentials", "logs"):
        (layout.root / sub).mkdir(mode=0o700, exist_ok=True)
    password = options.password or secrets.token_urlsafe(18)
    init_admin(layout, password)
    make_remote(layout, options.repo, branch)
    return password


def check_names(checks: list[str]) -> list[str]:
    """The integrator's (and the project's) names for the required checks."""
    return ["tests"] if len(checks) == 1 else [f"check-{i + 1}" for i in range(len(checks))]


def _post(admin: Transport, path: str, body: dict[str, Any]) -> Any:
    return admin.send("POST", path, body, key=str(uuid.uuid4())).data


def after_server(
    options: Options, layout: Layout, origins: tuple[str, str], password: str, branch: str
) -> dict[str, Any]:
    """The project, the role credentials and the configurations; returns the record.
    ``origins``: the API's (loopback, what the programs' credentials name) and the console's
    (where a person, and so the admin here, signs in)."""
    origin, console = origins
    with Transport(console, None) as admin:
        admin.sign_in("admin", password)
        checks = options.checks or [" ".join(sample.TEST_CHECK)]
        project = _post(
            admin,
            "/api/v1/projects",
            {
                "name": "sample" if options.repo is None else options.repo.resolve().name[:100],
                "repository_url": layout.remote.resolve().as_uri(),
                "target_branch": branch,
                # An agent's review or a person's, whichever comes first: where the loop takes
                # no reviews (as root, or with a harness that cannot review), people do.
                "review_mode": "either",
                "required_checks": [{"identity": name} for name in check_names(checks)],
            },
        )
        for role, (klass, access) in PRINCIPALS.items():
            body = {
                "name": f"up-{role}",
                "credential_class": klass,
                "access": access,
                "projects": [str(project["id"])],
            }
            issued = _post(admin, "/api/v1/admin/agents", body)
            write_credential(layout.credential(role), origin, str(issued["token"]))
    return {
        "project_id": str(project["id"]),
        "branch": branch,
        "checks": checks,
        "repo": str(options.repo.resolve()) if options.repo else None,
        "demo_seeded": False,
    }


def ensure_attention(console: str, layout: Layout, origin: str, record: dict[str, Any]) -> None:
    """The attention agent's credential (issued when its file is missing: a state directory
    made before it had one, or an up that died before writing it), and its designation as the
    project's digest sender (the server's host command, once: ``record["attention"]``)."""
    project_id = str(record["project_id"])
    path = layout.credential("attention")
    if not path.exists():
        password = layout.admin_password.read_text().strip()
        with Transport(console, None) as admin:
            admin.sign_in("admin", password)
            klass, access = PRINCIPALS["attention"]
            body = {
                "name": ATTENTION_AGENT,
                "credential_class": klass,
                "access": access,
                "projects": [project_id],
            }
            issued = _post(admin, "/api/v1/admin/agents", body)
        write_credential(path, origin, str(issued["token"]))
    if record.get("attention"):
        return
    argv = [*program("agent-coordinator-server"), "--database", str(layout.database)]
    argv += ["designate-digest-sender", "--project", project_id, "--agent", ATTENTION_AGENT]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"designating the digest sender failed: {done.stderr.strip()}")
    record["attention"] = True


def seed_demo(console: str, layout: Layout, project_id: str) -> None:
    """The demo tasks, filed by the admin signed in at the console's origin."""
    password = layout.admin_password.read_text().strip()
    with Transport(console, None) as admin:
        admin.sign_in("admin", password)
        for body in sample.demo_tasks():
            _post(admin, f"/api/v1/projects/{project_id}/tasks", body)


def rewrite_origin(layout: Layout, origin: str) -> None:
    """A later ``up`` on another port: the credentials name the new origin (same tokens)."""
    from agentc.files import load_toml

    for role in PRINCIPALS:
        path = layout.credential(role)
        if path.suffix == ".token":
            continue  # a bare token: no origin in it
        data = load_toml(path, what="credentials file")
        token = data["credentials"][0]["token"]
        write_credential(path, origin, str(token))


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2)


def integrator_signing_key(layout: Layout, env: dict[str, str]) -> None:
    """The integrator's signing key, made once by ``agentc-integrator signing-key create``
    (which keeps an existing one and writes the allowed-signers file)."""
    argv = [*program("agentc-integrator"), "--config", str(layout.integrator_config)]
    try:
        done = run_check([*argv, "signing-key", "create"], env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"creating the integrator's signing key failed: {exc}") from None
    if done.returncode != 0:
        raise ConfigError(f"creating the integrator's signing key failed: {done.stderr.strip()}")
