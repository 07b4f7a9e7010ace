"""Containment helpers: the syscall probe every seccomp row runs, on the host and inside.

The probe calls each syscall of a family with arguments the kernel rejects harmlessly (a bad
pointer, flag, descriptor or pid: EFAULT, EINVAL, EBADF, ESRCH; ENOSYS where this kernel lacks
the call) or with a harmless effect (``unshare`` of a namespace in the short-lived probe
process). On the host, as root, no call answers EPERM; inside a launch every call of a denied
family must. Syscall numbers come from libseccomp, the library the filter is built with.
"""

from __future__ import annotations

import secrets
import subprocess

PROBE = r"""# Prints (stderr) "family: name reached ERRNO" or "family: name EPERM" per call; exits 0
# when any call reached the kernel's own checks, 1 when every one was refused with EPERM.
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
sec = ctypes.CDLL("libseccomp.so.2")
sec.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
BAD = 1  # an address no process maps: EFAULT wherever a pointer is read
NOPID = 0x3FFFFFF0  # above pid_max: ESRCH
FAMILIES = {
    "keyring": [
        ("keyctl", 0, -4, 0),  # KEYCTL_GET_KEYRING_ID of @u: succeeds on the host
        ("add_key", BAD, BAD, 0, 0, -4),
        ("request_key", BAD, BAD, 0, 0),
    ],
    "bpf": [("bpf", 9999, 0, 0)],
    "perf": [("perf_event_open", 0, 0, -1, -1, 0), ("fanotify_init", 0xFFFFFFFF, 0)],
    "userfaultfd": [("userfaultfd", 0xFFFF)],
    "io_uring": [
        ("io_uring_setup", 1, 0),
        ("io_uring_enter", -1, 0, 0, 0, 0, 0),
        ("io_uring_register", -1, 0, 0, 0),
    ],
    "modules": [("init_module", 0, 0, 0), ("finit_module", -1, 0, 0), ("delete_module", BAD, 0)],
    "kexec": [("kexec_load", 0, 0, 0, 0xFFFF0000), ("kexec_file_load", -1, -1, 0, 0, 0xFFFF)],
    "file handles": [
        ("open_by_handle_at", -1, 0, 0),
        ("name_to_handle_at", -1, BAD, BAD, BAD, 0),
    ],
    "clocks": [
        ("clock_settime", 0xFFFF, 0),
        ("clock_adjtime", 0xFFFF, 0),
        ("settimeofday", BAD, 0),
        ("adjtimex", BAD),
    ],
    "io ports": [("iopl", 99), ("ioperm", 0xFFFFFF, 1, 1)],
    "machine": [
        ("reboot", 0, 0, 0, 0),  # bad magic: EINVAL after the capability check
        ("swapon", BAD, 0),
        ("swapoff", BAD),
        ("acct", BAD),
        ("syslog", 99, 0, 0),
        ("quotactl", 0, BAD, 0, 0),
        ("sethostname", 0, 9999),
        ("setdomainname", 0, 9999),
        ("sysfs", 99),
        ("ustat", 0, BAD),
    ],
    "other processes": [
        ("ptrace", 2, NOPID, 0, 0),
        ("process_vm_readv", NOPID, 0, 0, 0, 0, 0),
        ("process_vm_writev", NOPID, 0, 0, 0, 0, 0),
        ("kcmp", NOPID, NOPID, 0, 0, 0),
    ],
    "numa": [
        ("mbind", 0, 0, 99, 0, 0, 0),
        ("set_mempolicy", 99, 0, 0),
        ("move_pages", NOPID, 0, 0, 0, 0, 0),
        ("migrate_pages", NOPID, 0, 0, 0),
    ],
    "mounts": [
        ("mount", 0, BAD, 0, 0, 0),
        ("umount2", BAD, 0),
        ("pivot_root", BAD, BAD),
        ("chroot", BAD),
        ("fsopen", BAD, 0),
        ("fspick", -1, BAD, 0),
        ("open_tree", -1, BAD, 0),
        ("move_mount", -1, BAD, -1, BAD, 0),
        ("fsconfig", -1, 0, 0, 0, 0),
        ("fsmount", -1, 0, 0),
        ("mount_setattr", -1, BAD, 0, 0, 0),
    ],
    "namespaces": [("setns", -1, 0)]
    + [("unshare", flag) for flag in (0x20000, 0x4000000, 0x8000000, 0x40000000, 0x20000000,
                                      0x2000000, 0x80)],
}
def main(names):
    reached = False
    for family in names:
        for name, *args in FAMILIES[family]:
            nr = sec.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                continue
            ctypes.set_errno(0)
            rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
            err = ctypes.get_errno() if rc < 0 else 0
            if err == errno.EPERM:
                print(f"{family}: {name} EPERM", file=sys.stderr)
            else:
                reached = True
                print(f"{family}: {name} reached {errno.errorcode.get(err, err)}", file=sys.stderr)
    return 0 if reached else 1
sys.exit(main(sys.argv[1:] or list(FAMILIES)))
"""

ALWAYS_DENIED = (
    "keyring",
    "bpf",
    "perf",
    "userfaultfd",
    "io_uring",
    "modules",
    "kexec",
    "file handles",
    "clocks",
    "io ports",
    "machine",
    "other processes",
    "numa",
)
CONFINED_DENIED = ("mounts", "namespaces")  # the implementer (and candidate commands) only


def probe_script(*families: str) -> str:
    """A row's shell script: the probe, fed to python3 as a here-document."""
    names = " ".join(f"'{family}'" for family in families)
    return f"python3 - {names} <<'AGENTC_PROBE'\n{PROBE}\nAGENTC_PROBE\n"


def host_denials(*families: str) -> list[str]:
    """Every call of ``families`` the host itself answers EPERM (none may, for a row to mean
    anything): run as this process's user, outside any sandbox."""
    return host_denials_as([], *families)


def host_denials_as(prefix: list[str], *families: str) -> list[str]:
    """As :func:`host_denials`, run under ``prefix`` (``setpriv`` as another user)."""
    result = subprocess.run(
        [*prefix, "/usr/bin/python3", "-", *families], input=PROBE, capture_output=True, text=True
    )
    return [line for line in result.stderr.splitlines() if line.endswith(" EPERM")]


def add_user_key(prefix: list[str], secret: str) -> str:
    """``keyctl add user ... @u`` under ``prefix``, readable by its owner's uid (not only its
    possessor), as tools that share a key across sessions set it; the new key's id.

    A new user namespace gets its own ``@u``, so without that permission the key would be out
    of reach inside a launch even with no filter: the row would prove nothing."""
    name = f"agentc-row-{secrets.token_hex(4)}"
    made = subprocess.run(
        [*prefix, "keyctl", "add", "user", name, secret, "@u"],
        capture_output=True,
        text=True,
        check=True,
    )
    key_id = made.stdout.strip()
    subprocess.run([*prefix, "keyctl", "setperm", key_id, "0x3f3f0000"], check=True)
    return key_id
