"""``agentc-supervisor preflight``: each check gets a hostile state and a clean one.

Every hostile test plants one problem in a throwaway state root (or makes the kernel refuse
one feature, for real: a namespace limit of 0 in a user namespace the test creates, or a
seccomp filter denying one syscall) and checks that preflight prints ``ok: false`` naming it,
and exits 1. Host-mode ownership checks live in ``test_launch_root.py`` (they need role
accounts).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.supervisor.kit import Kit, write_config

pytestmark = pytest.mark.root

SECCOMP_DENY = r"""
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
/* deny <syscall nr> <program> [args...]: exec program with that one syscall failing ENOSYS */
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)atoi(argv[1]), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = 4, .filter = f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return 3;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) return 4;
    execv(argv[2], argv + 2);
    return 5;
}
"""
SYSCALLS = {
    "x86_64": {"memfd_create": 319, "close_range": 436},
    "aarch64": {"memfd_create": 279, "close_range": 436},
}


def preflight(
    kit: Kit, run: Path, clone: Path, prefix: Sequence[str] = (), role: str = "implementer"
) -> tuple[int, dict[str, Any], str]:
    argv = [*prefix, *kit.argv(run, clone, role=role, cmd="preflight")]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert "Traceback" not in result.stderr, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["ok"] is (result.returncode == 0) is (not report["problems"]), report
    return result.returncode, report, result.stderr


def problems_of(kit: Kit, run: Path, clone: Path, prefix: Sequence[str] = ()) -> list[str]:
    code, report, _err = preflight(kit, run, clone, prefix)
    assert code == 1 and report["ok"] is False, report
    found: list[str] = report["problems"]
    return found


def private_dirs(run: Path) -> None:
    """The per-launch trees a launch would create (preflight runs before the launch)."""
    for sub in ("state", "state/home", "state/cargo", "tmp", "target"):
        (run / sub).mkdir(mode=0o700)


# -- clean state ------------------------------------------------------------------------


def test_clean_state_is_ok(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    private_dirs(run)
    (clone / "src").mkdir()
    (clone / "src/main.rs").write_text("fn main() {}\n")
    os.symlink("src/main.rs", clone / "link")  # repository symlinks are allowed
    code, report, _err = preflight(kit, run, clone)
    assert (code, report) == (0, {"ok": True, "problems": []})


def test_clean_state_is_ok_for_a_reviewer(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n", role="reviewer")
    code, report, _err = preflight(kit, run, clone, role="reviewer")
    assert (code, report) == (0, {"ok": True, "problems": []})


# -- bubblewrap ---------------------------------------------------------------------------


@pytest.fixture
def fake_bwrap(kit: Kit) -> Iterator[Path]:
    """A root-owned directory for a stand-in bwrap that records every run."""
    where = kit.root / "fakebwrap"
    where.mkdir(mode=0o755)
    yield where / "bwrap"


def _install(kit: Kit, program: Path, text: str, mode: int = 0o755) -> Path:
    marker = program.parent / "ran"
    program.write_text(text.replace("MARKER", str(marker)))
    os.chmod(program, mode)
    kit.settings["bubblewrap"] = str(program)
    write_config(kit)
    return marker


def test_bwrap_older_than_0_8_is_a_problem(kit: Kit, fake_bwrap: Path) -> None:
    _install(kit, fake_bwrap, '#!/bin/sh\necho "bubblewrap 0.7.0"\nexit 0\n')
    run, clone = kit.new_run("exit 0\n")
    found = problems_of(kit, run, clone)
    assert found == [
        f"bubblewrap {fake_bwrap} reports 'bubblewrap 0.7.0'; 0.8 or newer is required"
    ]


def test_bwrap_0_8_passes_the_version_check(kit: Kit, fake_bwrap: Path) -> None:
    # The real binary behind a 0.8.0 stand-in: the version rule accepts exactly 0.8.
    real = shutil.which("bwrap")
    assert real
    _install(kit, fake_bwrap, f'#!/bin/sh\ncase "$1" in --version) echo "bubblewrap 0.8.0"; '
             f'exit 0;; esac\nexec {real} "$@"\n')  # fmt: skip
    run, clone = kit.new_run("exit 0\n")
    code, report, _err = preflight(kit, run, clone)
    assert (code, report["problems"]) == (0, [])


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("group-writable", "is group- or world-writable"),
        ("world-writable", "is group- or world-writable"),
        ("not root's", "is owned by uid 4242"),
        ("setuid", "must not be setuid or setgid"),
        ("parent writable", "is group- or world-writable"),
        ("missing", "is not installed"),
    ],
)
def test_an_unprotected_bwrap_is_a_problem_and_never_runs(
    kit: Kit, fake_bwrap: Path, how: str, expected: str
) -> None:
    marker = _install(kit, fake_bwrap, '#!/bin/sh\ntouch MARKER\necho "bubblewrap 0.9.0"\n')
    named = fake_bwrap
    if how == "group-writable":
        os.chmod(fake_bwrap, 0o775)  # noqa: S103 - the hostile state under test
    elif how == "world-writable":
        os.chmod(fake_bwrap, 0o757)  # noqa: S103 - the hostile state under test
    elif how == "not root's":
        os.chown(fake_bwrap, 4242, 0)
    elif how == "setuid":
        os.chmod(fake_bwrap, 0o4755)  # noqa: S103 - the hostile state under test
    elif how == "parent writable":
        os.chmod(fake_bwrap.parent, 0o777)  # noqa: S103 - the hostile state under test
        named = fake_bwrap.parent
    else:
        fake_bwrap.unlink()
    run, clone = kit.new_run("exit 0\n")
    found = problems_of(kit, run, clone)
    assert any(str(named) in p and expected in p for p in found), found
    assert not marker.exists(), "preflight ran an unprotected bubblewrap"


# -- kernel features ----------------------------------------------------------------------


def _limited(limits: dict[str, int]) -> list[str]:
    """Run the rest of the argv in a new user namespace (root mapped to root) with the given
    ``user.max_*_namespaces`` limits: the kernel then really refuses those namespaces below."""
    writes = " && ".join(f"echo {v} > /proc/sys/user/{k}" for k, v in limits.items()) or "true"
    return ["unshare", "--user", "--map-root-user", "sh", "-c", f'{writes} && exec "$@"', "sh"]


def test_a_user_namespace_without_limits_is_clean(kit: Kit) -> None:
    """The control for the kernel rows: the test's own user namespace changes nothing."""
    run, clone = kit.new_run("exit 0\n")
    code, report, _err = preflight(kit, run, clone, _limited({}))
    assert (code, report["problems"]) == (0, [])


@pytest.mark.parametrize(
    ("limits", "feature"),
    [
        ({"max_user_namespaces": 0}, "user namespaces"),
        ({"max_pid_namespaces": 0}, "PID namespaces"),
        ({"max_net_namespaces": 0}, "network namespaces"),
        ({"max_ipc_namespaces": 0}, "IPC namespaces"),
        ({"max_uts_namespaces": 0}, "UTS namespaces"),
    ],
)
def test_a_missing_kernel_feature_is_named(kit: Kit, limits: dict[str, int], feature: str) -> None:
    run, clone = kit.new_run("exit 0\n")
    found = problems_of(kit, run, clone, _limited(limits))
    kernel = [p for p in found if p.startswith("kernel:")]
    assert kernel == [p for p in kernel if f"kernel: {feature} unavailable" in p], found
    assert len(kernel) == 1 and "owner setup required" in kernel[0], found


def test_a_bwrap_that_cannot_disable_nested_user_namespaces_is_named(
    kit: Kit, fake_bwrap: Path
) -> None:
    """A limit of 1 user namespace would make the kernel refuse the nested one, but user
    namespaces are freed asynchronously, so back-to-back probes under that limit are racy.
    This stand-in is a bwrap that does not know the flag (older than 0.8 behind a 0.8 banner)."""
    real = shutil.which("bwrap")
    assert real
    _install(kit, fake_bwrap, '#!/bin/sh\nfor a; do [ "$a" = --disable-userns ] && '
             '{ echo "bwrap: Unknown option --disable-userns" >&2; exit 1; }; done\n'
             f'exec {real} "$@"\n')  # fmt: skip
    run, clone = kit.new_run("exit 0\n")
    found = problems_of(kit, run, clone)
    assert found == [
        "kernel: disabling nested user namespaces unavailable "
        "(bwrap: Unknown option --disable-userns); owner setup required"
    ]


@pytest.fixture(scope="module")
def deny_syscall(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("seccomp")
    (where / "deny.c").write_text(SECCOMP_DENY)
    subprocess.run(["cc", "-o", str(where / "deny"), str(where / "deny.c")], check=True)
    return where / "deny"


@pytest.mark.parametrize(
    ("syscall", "expected"),
    [
        ("memfd_create", "memfd sealing unavailable"),
        ("close_range", "close_range(CLOSE_RANGE_CLOEXEC) unavailable"),
    ],
)
def test_a_denied_syscall_is_named(
    kit: Kit, deny_syscall: Path, syscall: str, expected: str
) -> None:
    numbers = SYSCALLS.get(platform.machine())
    assert numbers, f"no syscall numbers for {platform.machine()}: add them to SYSCALLS"
    run, clone = kit.new_run("exit 0\n")
    deny = [str(deny_syscall), str(numbers[syscall])]
    found = problems_of(kit, run, clone, deny)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_the_seccomp_helper_denies_nothing_else(kit: Kit, deny_syscall: Path) -> None:
    """Control: denying an unused syscall (acct) leaves preflight clean."""
    run, clone = kit.new_run("exit 0\n")
    acct = {"x86_64": 163, "aarch64": 89}[platform.machine()]
    code, report, _err = preflight(kit, run, clone, [str(deny_syscall), str(acct)])
    assert (code, report["problems"]) == (0, [])


# -- protected paths (personal mode; host mode in test_launch_root.py) -------------------


@pytest.mark.parametrize("sub", ["", "impl/runs", "impl/clones"])
def test_state_dirs_must_be_private(kit: Kit, sub: str) -> None:
    run, clone = kit.new_run("exit 0\n")
    target = kit.state / sub if sub else kit.state
    os.chmod(target, 0o755)  # noqa: S103 - the hostile state under test
    found = problems_of(kit, run, clone)
    assert found == [f"{target} has mode 0755, expected 0700"]


def test_state_dir_owned_by_someone_else_is_a_problem(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    os.chown(kit.state / "impl/runs", 4242, 4242)
    found = problems_of(kit, run, clone)
    assert f"{kit.state / 'impl/runs'} is owned by 4242:4242, expected 0:None" in found


def test_an_unprotected_harness_is_a_problem(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    os.chmod(kit.bin / "claude", 0o777)  # noqa: S103 - the hostile state under test
    found = problems_of(kit, run, clone)
    assert any(
        p.startswith("harness claude:") and str(kit.bin / "claude") in p and "writable" in p
        for p in found
    ), found


def test_a_bad_token_file_is_a_problem_without_its_bytes(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    token = kit.role_dir("implementer") / "claude-token"
    token.write_text("secret-with space\n")
    found = problems_of(kit, run, clone)
    assert any(str(token) in p for p in found), found
    assert not any("secret" in p for p in found), found


@pytest.mark.parametrize("present", [False, True])
def test_gateway_launches_need_no_token_file(kit: Kit, present: bool) -> None:
    """Without the token_in_env opt-in the token file is never read: broken or absent is fine."""
    kit.settings["token_in_env"] = False
    write_config(kit)
    run, clone = kit.new_run("exit 0\n")
    private_dirs(run)
    token = kit.role_dir("implementer") / "claude-token"
    if present:
        token.write_text("secret-with space\n")
        os.chmod(token, 0o644)
    else:
        token.unlink()
    code, report, _err = preflight(kit, run, clone)
    assert (code, report) == (0, {"ok": True, "problems": []})


def test_the_token_opt_in_requires_the_token_file(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    private_dirs(run)
    token = kit.role_dir("implementer") / "claude-token"
    token.unlink()
    found = problems_of(kit, run, clone)
    assert any(str(token) in p for p in found), found


# -- mount roots and writable trees -------------------------------------------------------


def test_a_symlinked_mount_root_is_a_problem_and_not_followed(kit: Kit, tmp_path: Path) -> None:
    run, clone = kit.new_run("exit 0\n")
    private_dirs(run)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.mkfifo(elsewhere / "fifo")  # would be reported if the tree walk followed the link
    os.rmdir(run / "target")
    os.symlink(elsewhere, run / "target")
    found = problems_of(kit, run, clone)
    assert found == [f"mount root {run / 'target'} is not canonical or contains a symlink"]


@pytest.mark.parametrize(
    ("where", "kind"),
    [
        ("clone", "hard-linked file"),
        ("state/home", "hard-linked file"),
        ("clone", "fifo"),
        ("tmp", "fifo"),
        ("state/cargo", "socket"),
        ("target", "char device"),
        ("clone", "block device"),
    ],
)
def test_links_and_special_files_in_writable_trees(kit: Kit, where: str, kind: str) -> None:
    run, clone = kit.new_run("exit 0\n")
    private_dirs(run)
    base = clone if where == "clone" else run / where
    deep = base / "a/b"
    deep.mkdir(parents=True)
    planted = deep / "planted"
    if kind == "hard-linked file":
        (kit.root / "outside").write_text("x\n")
        os.link(kit.root / "outside", planted)
        expected = f"{planted}: hard-linked file in a writable tree"
    else:
        if kind == "fifo":
            os.mkfifo(planted)
        elif kind == "socket":
            bind = "import socket; socket.socket(socket.AF_UNIX).bind('planted')"
            subprocess.run(["python3", "-c", bind], cwd=deep, check=True)  # short relative path
        else:
            device = os.makedev(1, 3) if kind == "char device" else os.makedev(7, 0)
            block = kind == "block device"
            os.mknod(planted, 0o600 | (0o060000 if block else 0o020000), device)
        expected = f"{planted}: special file in a writable tree"
    found = problems_of(kit, run, clone)
    assert found == [expected]


def test_a_reviewer_clone_is_read_only_so_it_is_not_walked(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n", role="reviewer")
    os.mkfifo(clone / "fifo")
    code, report, _err = preflight(kit, run, clone, role="reviewer")
    assert (code, report["problems"]) == (0, [])


def test_a_nested_filesystem_in_a_writable_tree_is_a_problem(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    private_dirs(run)
    (clone / "mnt").mkdir()
    # A private mount namespace: the tmpfs exists only for this preflight and dies with it.
    prefix = ["unshare", "--mount", "sh", "-c", f'mount -t tmpfs t {clone}/mnt && exec "$@"', "sh"]
    found = problems_of(kit, run, clone, prefix)
    assert found == [f"{clone / 'mnt'}: nested filesystem in a writable tree"]


def test_bad_preflight_input_is_one_line_not_a_traceback(kit: Kit) -> None:
    run, clone = kit.new_run("exit 0\n")
    argv = kit.argv(run, clone / "missing", cmd="preflight")
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert any("does not exist" in p and str(clone / "missing") in p for p in report["problems"])
    assert "Traceback" not in result.stderr
