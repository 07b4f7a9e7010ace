"""Preflight: every containment precondition, with all problems reported together.

``full_problems`` backs ``agentc-supervisor preflight`` (``{"ok": bool, "problems": [...]}``);
``launch_problems`` is the subset every launch re-checks just before spawning. An unsafe binary
is never executed: protection is checked before ``bwrap --version`` runs.

The two checks that run programs (``bwrap --version`` and the kernel probe) depend only on the
boot and the bwrap binary, so a launch skips them when a private per-user cache file records
that they passed for this boot, uid and bwrap (device, inode, size, mtime, ctime): see
:func:`probe_cache`. ``preflight`` always runs them afresh. A kernel setting changed after
the cache was written (a namespace limit lowered) still fails closed: bwrap then cannot
create the sandbox and the launch ends ``failed``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from agentc.core.errors import AgentcError
from agentc.files import write_atomic
from agentc.files.procs import run_check
from agentc.sandbox import reaper
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.harness import registry
from agentc.supervisor.launch import prompt as prompt_mod
from agentc.supervisor.launch import tokens
from agentc.supervisor.launch.plan import Plan, plan
from agentc.supervisor.launch.request import LaunchRequest
from agentc.supervisor.launch.rundir import RunLayout

MIN_BWRAP = (0, 8)
PROBE_SECONDS = 5
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


def bwrap_problems(config: SupervisorConfig) -> list[str]:
    problems = protected_problems(config.bubblewrap, "bubblewrap", {0})
    if problems:
        return problems  # never run an unprotected binary
    return bwrap_version_problems(config)


def bwrap_version_problems(config: SupervisorConfig) -> list[str]:
    try:
        out = run_check(
            [str(config.bubblewrap), "--version"],
            env={},
            timeout=PROBE_SECONDS,
            preexec_fn=reaper.child_setup,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return [f"bubblewrap {config.bubblewrap} --version failed ({exc})"]
    found = re.search(r"(\d+)\.(\d+)", out)
    if not found or (int(found[1]), int(found[2])) < MIN_BWRAP:
        version = out.strip()[:80] or "no version"
        return [f"bubblewrap {config.bubblewrap} reports {version!r}; 0.8 or newer is required"]
    return []


# Each kernel feature a launch needs, probed alone when the combined probe fails, so the
# problem names the missing feature instead of bwrap's generic "Creating new namespace failed".
FEATURE_PROBES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("user namespaces", ()),
    ("disabling nested user namespaces", ("--disable-userns", "--assert-userns-disabled")),
    ("PID namespaces", ("--unshare-pid",)),
    ("network namespaces", ("--unshare-net",)),
    ("IPC namespaces", ("--unshare-ipc",)),
    ("UTS namespaces", ("--unshare-uts",)),
)


def _probe(bwrap: Path, flags: Sequence[str]) -> str | None:
    """Run ``bwrap --unshare-user <flags> ... /bin/true``; None on success, else why not."""
    argv = [str(bwrap), "--unshare-user", *flags]
    argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    try:
        result = run_check(argv, env={}, timeout=PROBE_SECONDS, preexec_fn=reaper.child_setup)
    except subprocess.TimeoutExpired:
        return "timed out"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not start ({exc})"
    if result.returncode != 0:
        return result.stderr.strip()[:200] or f"exit {result.returncode}"
    return None


def close_range_problem() -> str | None:
    """close_range(CLOSE_RANGE_CLOEXEC) on one scratch descriptor: the launch's fd fence."""
    import ctypes

    fd = os.open("/dev/null", os.O_RDONLY)  # inheritable: the probe must set CLOEXEC itself
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(reaper.SYS_CLOSE_RANGE, fd, fd, reaper.CLOSE_RANGE_CLOEXEC) != 0:
            err = ctypes.get_errno()
            return f"close_range(CLOSE_RANGE_CLOEXEC) unavailable ({os.strerror(err)})"
        if os.get_inheritable(fd):
            return "close_range(CLOSE_RANGE_CLOEXEC) did not set close-on-exec"
        return None
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=4)
def kernel_problems(bwrap: Path, boot_and_inode: str) -> tuple[str, ...]:
    """Sealing; user, PID, net, IPC and UTS namespaces; disabling nested user namespaces."""
    problems: list[str] = []
    try:
        prompt_mod.seal_prompt(b"probe").close()
    except AgentcError as exc:
        problems.append(f"memfd sealing unavailable: {exc}")
    # Each feature is added to the ones before it, so the first probe that fails names the
    # feature whose addition the kernel refuses (a namespace limit counts every namespace).
    if _probe(bwrap, [flag for _name, flags in FEATURE_PROBES for flag in flags]) is None:
        return tuple(problems)
    flags_so_far: list[str] = []
    for name, flags in FEATURE_PROBES:
        flags_so_far += flags
        why = _probe(bwrap, flags_so_far)
        if why is not None:
            problems.append(f"kernel: {name} unavailable ({why}); owner setup required")
            return tuple(problems)
    problems.append("kernel sandbox probe failed only with every feature; owner setup required")
    return tuple(problems)


def sandbox_problems(config: SupervisorConfig, *, cached: bool = False) -> list[str]:
    """The descriptor fence, bubblewrap, then the kernel probe, in that order: nothing is run
    without the fence, and an unprotected bwrap is never run. With ``cached``, the version
    check and the kernel probe are skipped when the probe cache says they passed."""
    fence = close_range_problem()
    if fence:
        return [fence]
    problems = protected_problems(config.bubblewrap, "bubblewrap", {0})
    if problems:
        return problems  # never run an unprotected binary
    key = _probe_key(config.bubblewrap)
    cache = probe_cache()
    if cached and cache is not None and key is not None and _cache_holds(cache, key):
        return []
    problems = bwrap_version_problems(config)
    if not problems:
        problems += kernel_problems(config.bubblewrap, key or "unknown")
    if not problems and cache is not None and key is not None:
        _cache_store(cache, key)
    return problems


def _probe_key(bwrap: Path) -> str | None:
    """What the version check and the kernel probe depend on: boot, uid, the bwrap binary."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        info = os.stat(bwrap)
    except OSError:
        return None
    binary = f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"
    return f"v1 boot={boot} uid={os.geteuid()} bwrap={bwrap} {binary}\n"


def probe_cache() -> Path | None:
    """The per-user probe cache file: root's under ``/run`` (a per-boot tmpfs), another
    user's in its runtime directory (masked in every personal-mode launch); None if absent."""
    uid = os.geteuid()
    parent = Path("/run") if uid == 0 else Path(f"/run/user/{uid}")
    try:
        info = os.lstat(parent)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o022:
        return None
    return parent / "agentc-supervisor" / "probe-ok"


def _private_dir_fd(path: Path) -> int | None:
    """An fd of ``path`` if it is a directory of this user's that no one else can write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        os.close(fd)
        return None
    return fd


def _cache_holds(cache: Path, key: str) -> bool:
    """True when the cache file (private, this user's, no symlink) holds exactly ``key``."""
    dir_fd = _private_dir_fd(cache.parent)
    if dir_fd is None:
        return False
    try:
        fd = os.open(cache.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return False
        return handle.read(4096) == key.encode()


def _cache_store(cache: Path, key: str) -> None:
    """Record a passed probe; any trouble just leaves the cache unwritten."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(cache.parent, 0o700)
    dir_fd = _private_dir_fd(cache.parent)
    if dir_fd is None:
        return
    try:
        with contextlib.suppress(OSError):  # an unwritten cache only slows the next launch
            write_atomic(Path(cache.name), key.encode(), dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def tree_problems(root: Path) -> list[str]:
    """A writable tree holds only dirs, single-link regular files and symlinks, on one fs."""
    problems: list[str] = []
    try:
        device = os.lstat(root).st_dev
    except OSError as exc:
        return [f"{root}: {exc.strerror}"]
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            if info.st_dev != device:
                problems.append(f"{path}: nested filesystem in a writable tree")
            elif stat.S_ISREG(info.st_mode):
                if info.st_nlink != 1:
                    problems.append(f"{path}: hard-linked file in a writable tree")
            elif not stat.S_ISDIR(info.st_mode):
                problems.append(f"{path}: special file in a writable tree")
        if len(problems) > 20:
            break
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
            problems += tree_problems(tree)
    return problems


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
