"""The launch's syscall filter, built with the system's libseccomp (ctypes, no hand-made BPF).

A denylist on top of the namespaces: what no namespace isolates (the kernel keyrings, BPF,
perf events, userfaultfd, io_uring, module and kexec loading, ``open_by_handle_at``, clock and
I/O-port calls, swap, reboot, accounting, quotas...) fails with ``EPERM``, never a kill, so a
tool that probes for a feature degrades cleanly. ``clone3`` answers ``ENOSYS`` (its flags sit in
a structure a filter cannot read), so the C library falls back to ``clone``, whose flags are
checked.

- **implementer** (and the reviewer's candidate sandbox): also no namespace creation
  (``unshare``/``clone`` with a ``CLONE_NEW*`` flag, ``setns``), no ``mount`` family, no
  ``pivot_root``/``chroot``.
- **reviewer**: keeps namespaces and mounts, which its nested candidate sandbox (bwrap) needs;
  the candidate sandbox then stacks the implementer filter.

The filter is exported as the classic-BPF program bwrap's ``--seccomp FD`` loads. Why each call
Docker's default profile denies is allowed or denied here is in ``docs/security.md``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
from collections.abc import Iterable
from typing import Literal

from agentc.core.errors import AgentcError

FilterRole = Literal["implementer", "reviewer"]

FILTER_VERSION = 2  # bump when a list below changes: cached programs are keyed by it

# Denied for every role: kernel objects and controls no namespace covers.
DENY_ALWAYS: tuple[str, ...] = (
    # kernel keyrings (shared with the launching user: the keyring row in tests/containment)
    "add_key",
    "request_key",
    "keyctl",
    # in-kernel programs, tracing and performance counters
    "bpf",
    "perf_event_open",
    "lookup_dcookie",
    "fanotify_init",
    # surfaces with a record of privilege escalation bugs
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # module and kernel loading
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "kexec_load",
    "kexec_file_load",
    "get_kernel_syms",
    "query_module",
    # file handles bypass the mount namespace's view
    "open_by_handle_at",
    "name_to_handle_at",
    # clocks, I/O ports, the machine itself
    "clock_settime",
    "clock_adjtime",
    "settimeofday",
    "adjtimex",
    "stime",
    "iopl",
    "ioperm",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "nfsservctl",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "vm86",
    "vm86old",
    "pciconfig_read",
    "pciconfig_write",
    "pciconfig_iobase",
    "sethostname",
    "setdomainname",
    # other processes' memory (the PID namespace holds only the launch, but the harness
    # has no use for it and a sandboxed tool should not read its parent harness's memory)
    "pidfd_getfd",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    # NUMA policy of other processes
    "move_pages",
    "migrate_pages",
    "mbind",
    "set_mempolicy",
)

# Denied for the implementer (and candidate commands): namespaces, mounts, root changes.
DENY_CONFINED: tuple[str, ...] = (
    "setns",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
)

CLONE_NEW_FLAGS: tuple[int, ...] = (
    0x00000080,  # CLONE_NEWTIME
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)

_ACT_ALLOW = 0x7FFF0000
_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class SeccompError(AgentcError, RuntimeError):
    """libseccomp is missing or refused the filter; the message names the call that failed."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _library() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as exc:
        raise SeccompError(
            f"libseccomp is not installed ({exc}); install the libseccomp2 package"
        ) from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def syscalls_denied(role: FilterRole) -> tuple[str, ...]:
    """The syscalls refused outright for ``role`` (namespace flags on clone/unshare aside)."""
    return DENY_ALWAYS + (DENY_CONFINED if role == "implementer" else ())


def _rule(lib: ctypes.CDLL, ctx: int, action: int, nr: int, cmps: Iterable[_ArgCmp]) -> None:
    items = list(cmps)
    array = (_ArgCmp * max(len(items), 1))(*items)
    rc = lib.seccomp_rule_add_array(ctx, action, nr, len(items), array)
    if rc < 0:
        raise SeccompError(f"seccomp_rule_add for syscall {nr} failed: {os.strerror(-rc)}")


def build_filter(role: FilterRole) -> bytes:
    """The classic-BPF program (native architecture) for ``role``, as bwrap's --seccomp reads."""
    lib = _library()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise SeccompError("seccomp_init failed")
    try:
        eperm = _act_errno(errno.EPERM)
        for name in syscalls_denied(role):
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                continue  # not a syscall on this architecture (e.g. vm86 on x86_64)
            _rule(lib, ctx, eperm, nr, ())
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0:
            _rule(lib, ctx, _act_errno(errno.ENOSYS), clone3, ())
        if role == "implementer":
            for name in ("unshare", "clone"):
                nr = lib.seccomp_syscall_resolve_name(name.encode())
                for flag in CLONE_NEW_FLAGS:
                    _rule(lib, ctx, eperm, nr, [_ArgCmp(0, _CMP_MASKED_EQ, flag, flag)])
        return _export(lib, ctx)
    finally:
        lib.seccomp_release(ctx)


def _export(lib: ctypes.CDLL, ctx: int) -> bytes:
    fd = os.memfd_create("agentc-seccomp", os.MFD_CLOEXEC)
    try:
        rc = lib.seccomp_export_bpf(ctx, fd)
        if rc < 0:
            raise SeccompError(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
        size = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, 0, os.SEEK_SET)
        program = b""
        while len(program) < size:
            chunk = os.read(fd, size - len(program))
            if not chunk:
                break
            program += chunk
    finally:
        os.close(fd)
    if not program or len(program) % 8:
        raise SeccompError(f"libseccomp exported a malformed program ({len(program)} bytes)")
    return program


def program_fd(program: bytes) -> int:
    """A sealed memfd holding ``program``, positioned at 0, inheritable by bwrap (--seccomp FD)."""
    fd = os.memfd_create("agentc-seccomp", os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        fcntl.fcntl(
            fd,
            fcntl.F_ADD_SEALS,
            fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE,
        )
    except BaseException:
        os.close(fd)
        raise
    return fd
