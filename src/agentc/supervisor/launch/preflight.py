"""Preflight: every containment precondition, with all problems reported together.

``full_problems`` backs ``agentc-supervisor preflight`` (``{"ok": bool, "problems": [...]}``);
``launch_problems`` is the subset every launch re-checks just before spawning. An unsafe binary
is never executed: protection is checked before ``bwrap --version`` runs.

The sandbox's own probes (bubblewrap's version, the descriptor fence, the kernel's namespaces,
a writable tree's shape) are :mod:`agentc.sandbox.preflight`'s. The two checks that run
programs (``bwrap --version`` and the kernel probe) depend only on the boot and the bwrap
binary, so a launch skips them when a private per-user cache file records that they passed for
this boot, uid and bwrap (device, inode, size, mtime, ctime): see
:func:`agentc.sandbox.preflight.probe_cache`. ``preflight`` always runs them afresh. A kernel
setting changed after the cache was written (a namespace limit lowered) still fails closed:
bwrap then cannot create the sandbox and the launch ends ``failed``.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

from agentc.core.errors import AgentcError, SupervisorError
from agentc.sandbox import preflight as sandbox_preflight
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.harness import registry
from agentc.supervisor.launch import prompt as prompt_mod
from agentc.supervisor.launch import tokens
from agentc.supervisor.launch.plan import Plan, plan
from agentc.supervisor.launch.request import LaunchRequest
from agentc.supervisor.launch.rundir import RunLayout

CLAUDE_CONFIG_FILES = {"settings.json", "CLAUDE.md"}


def _trusted_owners(config: SupervisorConfig) -> set[int]:
    # Host mode trusts root only; personal mode has one user, who owns its own tools.
    return {0} if config.mode == "host" else {0, os.getuid()}


def protected_problems(path: Path, what: str, owners: set[int]) -> list[str]:
    """The file and every ancestor: trusted owner, not group/world-writable; no set-id bits."""
    problems: list[str] = []
    try:
        info = os.stat(path)
    except OSError as exc:
        return [f"{what} {path} is not installed ({exc.strerror})"]
    if info.st_mode & (stat.S_ISUID | stat.S_ISGID):
        problems.append(f"{what} {path} must not be setuid or setgid")
    real = Path(os.path.realpath(path))
    for node in [real, *real.parents]:
        node_info = os.lstat(node)
        if node_info.st_uid not in owners:
            problems.append(f"{what}: {node} is owned by uid {node_info.st_uid}")
        if node_info.st_mode & 0o022 and not (node_info.st_mode & stat.S_ISVTX and node != real):
            problems.append(f"{what}: {node} is group- or world-writable")
    return problems


@functools.lru_cache(maxsize=4)
def kernel_problems(bwrap: Path, boot_and_inode: str) -> tuple[str, ...]:
    """Sealing; user, PID, net, IPC and UTS namespaces; disabling nested user namespaces."""
    problems: list[str] = []
    try:
        prompt_mod.seal_prompt(b"probe").close()
    except AgentcError as exc:
        problems.append(f"memfd sealing unavailable: {exc}")
    namespaces = sandbox_preflight.namespace_problem(bwrap)
    if namespaces is not None:
        problems.append(namespaces)
    return tuple(problems)


def sandbox_problems(config: SupervisorConfig, *, cached: bool = False) -> list[str]:
    """The descriptor fence, bubblewrap, then the kernel probe, in that order: nothing is run
    without the fence, and an unprotected bwrap is never run. With ``cached``, the version
    check and the kernel probe are skipped when the probe cache says they passed."""
    fence = sandbox_preflight.close_range_problem()
    if fence:
        return [fence]
    problems = protected_problems(config.bubblewrap, "bubblewrap", {0})
    if problems:
        return problems  # never run an unprotected binary
    key = sandbox_preflight.probe_key(config.bubblewrap)
    cache = sandbox_preflight.probe_cache()
    if (
        cached
        and cache is not None
        and key is not None
        and sandbox_preflight.cache_holds(cache, key)
    ):
        return []
    problems = sandbox_preflight.bwrap_version_problems(config.bubblewrap)
    if not problems:
        problems += kernel_problems(config.bubblewrap, key or "unknown")
    if not problems and cache is not None and key is not None:
        sandbox_preflight.cache_store(cache, key)
    return problems


def launch_problems(config: SupervisorConfig, plan_: Plan) -> list[str]:
    """Checks re-run by every launch: bwrap, the (cached) kernel probe, mount roots, trees."""
    problems = sandbox_problems(config, cached=True)
    desc = plan_.description
    roots = [desc.run, desc.clone, *desc.writable, *desc.readonly, *desc.masks]
    linked: set[str] = set()
    for root in roots:
        if os.path.realpath(root) != str(root):
            linked.add(str(root))
            problems.append(f"mount root {root} is not canonical or contains a symlink")
    trees = [Path(p) for p in desc.writable if Path(p).exists()]
    if plan_.request.role == "implementer":
        trees.append(plan_.layout.clone)
    for tree in trees:
        if str(tree) not in linked:  # never walk where a planted symlink points
            problems += sandbox_preflight.tree_problems(tree)
    return problems


def require(config: SupervisorConfig, plan_: Plan) -> None:
    """Refuse the launch (SupervisorError) when :func:`launch_problems` finds any."""
    problems = launch_problems(config, plan_)
    if problems:
        raise SupervisorError("preflight: " + "; ".join(problems))


def _mode_problem(path: Path, uid: int | None, gid: int | None, mode: int) -> str | None:
    try:
        info = os.lstat(path)
    except OSError:
        return f"{path} is missing"
    if stat.S_ISLNK(info.st_mode):
        return f"{path} must not be a symlink"
    perm = stat.S_IMODE(info.st_mode)
    if (uid is not None and info.st_uid != uid) or (gid is not None and info.st_gid != gid):
        return f"{path} is owned by {info.st_uid}:{info.st_gid}, expected {uid}:{gid}"
    if perm != mode:
        return f"{path} has mode {perm:04o}, expected {mode:04o}"
    return None


def layout_problems(config: SupervisorConfig, layout: RunLayout, harness: str) -> list[str]:
    """Owners and modes of the protected seed layout (host) or the private state (personal)."""
    found: list[str | None] = []
    adapter = registry.adapter(harness)
    if config.mode == "host":
        import pwd

        try:
            account = pwd.getpwnam(config.role_user(layout.role))
        except KeyError:
            return [f"role account {config.role_user(layout.role)} does not exist"]
        found += protected_problems(layout.state_dir, "state directory", {0})
        found.append(_mode_problem(layout.role_dir, 0, account.pw_gid, 0o750))
        for sub in (layout.runs, layout.clones):
            found.append(_mode_problem(sub, account.pw_uid, None, 0o700))
        own = adapter.config_dir(layout) if adapter is not None else None
        if own is not None:
            found.append(_mode_problem(own, 0, account.pw_gid, 0o750))
            if own.is_dir():
                for entry in sorted(os.listdir(own)):
                    path = own / entry
                    if entry == ".credentials.json":
                        found.append(f"{path}: retired claude auth login credential; remove it")
                    elif entry not in CLAUDE_CONFIG_FILES:
                        found.append(f"{path}: unexpected entry in claude-config")
                    else:
                        found.append(_mode_problem(path, 0, None, 0o444))
    else:
        for sub in (layout.state_dir, layout.runs, layout.clones):
            found.append(_mode_problem(sub, os.getuid(), None, 0o700))
    if adapter is not None and adapter.token_env is not None and config.token_in_env:
        # Only the token opt-in hands the token file to a launch; gateway launches never read it.
        gid = None
        if config.mode == "host":
            import pwd

            gid = pwd.getpwnam(config.role_user(layout.role)).pw_gid
        try:
            tokens.read_token(layout.token_file, mode=config.mode, group_gid=gid)
        except AgentcError as exc:
            found.append(str(exc))
    return [p for p in found if p]


def full_problems(config: SupervisorConfig, request: LaunchRequest) -> list[str]:
    """Everything, each check independent, so one report lists every problem."""
    problems = sandbox_problems(config)
    state_dir = Path(os.path.realpath(config.resolved_state_dir()))
    layout = RunLayout(state_dir, request.role, request.run, request.clone)
    problems += layout_problems(config, layout, request.harness)
    program = config.harness_program(request.harness)
    problems += protected_problems(program, f"harness {request.harness}", _trusted_owners(config))
    try:
        plan_ = plan(config, request)
    except AgentcError as exc:
        if str(exc) not in problems:
            problems.append(str(exc))
        return problems
    problems += [p for p in launch_problems(config, plan_) if p not in problems]
    return problems
