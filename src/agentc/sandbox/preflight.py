"""Whether this host can make the sandbox: bubblewrap new enough, the descriptor fence, the
kernel's namespaces, and the shape of a tree bound writable into it.

The supervisor's preflight (:mod:`agentc.supervisor.launch.preflight`) asks these before every
launch and for ``agentc-supervisor preflight``; they test what this package itself relies on
(:mod:`.reaper`'s ``close_range`` fence and child setup, the namespaces :mod:`.bwrap`'s
arguments ask for). The two checks that run programs (``bwrap --version`` and the namespace
probe) depend only on the boot and the bwrap binary, so a launch skips them when a private
per-user cache file records that they passed for this boot, uid and bwrap (device, inode,
size, mtime, ctime): see :func:`probe_cache`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from agentc.files import write_atomic
from agentc.files.procs import run_check
from agentc.sandbox import reaper

MIN_BWRAP = (0, 8)
PROBE_SECONDS = 5


def bwrap_version_problems(bwrap: Path) -> list[str]:
    try:
        out = run_check(
            [str(bwrap), "--version"],
            env={},
            timeout=PROBE_SECONDS,
            preexec_fn=reaper.child_setup,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return [f"bubblewrap {bwrap} --version failed ({exc})"]
    found = re.search(r"(\d+)\.(\d+)", out)
    if not found or (int(found[1]), int(found[2])) < MIN_BWRAP:
        version = out.strip()[:80] or "no version"
        return [f"bubblewrap {bwrap} reports {version!r}; 0.8 or newer is required"]
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


def namespace_problem(bwrap: Path) -> str | None:
    """User, PID, net, IPC and UTS namespaces and disabling nested user namespaces: None when
    bwrap makes them all, else the first feature the kernel refuses."""
    # Each feature is added to the ones before it, so the first probe that fails names the
    # feature whose addition the kernel refuses (a namespace limit counts every namespace).
    if _probe(bwrap, [flag for _name, flags in FEATURE_PROBES for flag in flags]) is None:
        return None
    flags_so_far: list[str] = []
    for name, flags in FEATURE_PROBES:
        flags_so_far += flags
        why = _probe(bwrap, flags_so_far)
        if why is not None:
            return f"kernel: {name} unavailable ({why}); owner setup required"
    return "kernel sandbox probe failed only with every feature; owner setup required"


def close_range_problem() -> str | None:
    """close_range(CLOSE_RANGE_CLOEXEC) on one scratch descriptor: the launch's fd fence."""
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


def probe_key(bwrap: Path) -> str | None:
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


def cache_holds(cache: Path, key: str) -> bool:
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


def cache_store(cache: Path, key: str) -> None:
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
