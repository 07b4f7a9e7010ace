"""The pure argv builder: its order is the confinement, so the tests pin it."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath as P

import pytest

from agentc.sandbox.bwrap import LaunchDescription, Relay, build_argv

RUN = P("/s/impl/runs/r1")
CLONE = P("/s/impl/clones/r1")


def desc(**kw: object) -> LaunchDescription:
    base = LaunchDescription(
        bwrap=P("/usr/bin/bwrap"),
        role="implementer",
        mode="host",
        run=RUN,
        clone=CLONE,
        harness_argv=("/opt/agentc/bin/claude", "-p"),
        masks=(P("/s"), P("/tmp")),
        writable=(RUN / "state/home", RUN / "tmp"),
        readonly=(P("/s/impl/claude-config"),),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def index(argv: list[str], *seq: str) -> int:
    """Index of the first occurrence of the consecutive items ``seq``."""
    for i in range(len(argv) - len(seq) + 1):
        if tuple(argv[i : i + len(seq)]) == seq:
            return i
    raise AssertionError(f"{seq} not in {argv}")


def test_implementer_exact_argv() -> None:
    assert build_argv(desc()) == [
        "/usr/bin/bwrap",
        "--unshare-user",
        "--disable-userns",
        "--assert-userns-disabled",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--new-session",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/proc",
        "--tmpfs",
        "/s",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        str(RUN),
        str(RUN),
        "--bind",
        str(RUN / "state/home"),
        str(RUN / "state/home"),
        "--bind",
        str(RUN / "tmp"),
        str(RUN / "tmp"),
        "--bind",
        str(CLONE),
        str(CLONE),
        "--ro-bind",
        "/s/impl/claude-config",
        "/s/impl/claude-config",
        "--remount-ro",
        "/s",
        "--remount-ro",
        "/tmp",
        "--chdir",
        str(CLONE),
        "--",
        "/opt/agentc/bin/claude",
        "-p",
    ]


def test_reviewer_keeps_userns_and_proc_for_the_nested_sandbox_and_clone_read_only() -> None:
    argv = build_argv(desc(role="reviewer"))
    assert "--disable-userns" not in argv
    assert "--assert-userns-disabled" not in argv
    with pytest.raises(AssertionError):
        index(argv, "--remount-ro", "/proc")
    assert index(argv, "--ro-bind", str(CLONE), str(CLONE)) > 0
    with pytest.raises(AssertionError):
        index(argv, "--bind", str(CLONE), str(CLONE))


def test_masks_come_before_every_bind_under_them_and_parents_first() -> None:
    argv = build_argv(desc(masks=(P("/home/u/.local/state/agentc"), P("/home/u"), P("/tmp"))))
    home = index(argv, "--tmpfs", "/home/u")
    state = index(argv, "--tmpfs", "/home/u/.local/state/agentc")
    assert home < state
    first_bind = min(
        i for i, a in enumerate(argv) if a in ("--bind", "--ro-bind") and argv[i + 1] != "/"
    )
    assert max(home, state, index(argv, "--tmpfs", "/tmp")) < first_bind


def test_run_is_the_first_bind_and_writable_dirs_follow_it() -> None:
    argv = build_argv(desc())
    run = index(argv, "--ro-bind", str(RUN), str(RUN))
    binds = [i for i, a in enumerate(argv) if a in ("--bind", "--ro-bind") and argv[i + 1] != "/"]
    assert binds[0] == run
    assert index(argv, "--bind", str(RUN / "tmp"), str(RUN / "tmp")) > run


def test_namespaces_root_proc_dev_precede_masks() -> None:
    argv = build_argv(desc())
    assert index(argv, "--ro-bind", "/", "/") < index(argv, "--proc", "/proc")
    assert index(argv, "--proc", "/proc") < index(argv, "--dev", "/dev")
    assert index(argv, "--dev", "/dev") < index(argv, "--remount-ro", "/proc")
    assert index(argv, "--remount-ro", "/proc") < index(argv, "--tmpfs")
    for flag in ("--unshare-net", "--unshare-ipc", "--unshare-uts", "--new-session"):
        assert index(argv, flag) < index(argv, "--ro-bind", "/", "/")


def test_masks_are_remounted_read_only_after_all_binds() -> None:
    argv = build_argv(desc())
    last_bind = max(i for i, a in enumerate(argv) if a in ("--bind", "--ro-bind"))
    assert index(argv, "--remount-ro", "/s") > last_bind
    assert index(argv, "--remount-ro", "/tmp") > last_bind


def test_relay_runs_as_init_then_wrapper_then_harness() -> None:
    relays = (
        Relay("proxy", "127.0.0.1:3128", RUN / "net/proxy.sock"),
        Relay("coordinator", "127.0.0.1:18080", RUN / "net/coordinator.sock"),
    )
    argv = build_argv(
        desc(
            relays=relays,
            relay_program=("/opt/agentc/bin/agentc-supervisor",),
            wrapper=("agentns-claude", "--intent", "headless:implementer", "--"),
        )
    )
    tail = argv[index(argv, "--chdir") :]
    assert tail == [
        "--chdir",
        str(CLONE),
        "--",
        "/opt/agentc/bin/agentc-supervisor",
        "netns-relay",
        "--relay",
        f"127.0.0.1:3128={RUN}/net/proxy.sock",
        "--relay",
        f"127.0.0.1:18080={RUN}/net/coordinator.sock",
        "--",
        "agentns-claude",
        "--intent",
        "headless:implementer",
        "--",
        "/opt/agentc/bin/claude",
        "-p",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"harness_argv": ()}, "the harness argv is empty"),
        ({"masks": (P("tmp"),)}, "mask path must be absolute and without '..': tmp"),
        ({"writable": (P("/s/../etc"),)}, "writable path must be absolute and without '..'"),
        ({"run": P("relative/run")}, "launch path must be absolute and without '..'"),
        ({"clone": P("/s/impl/clones/../../x")}, "launch path must be absolute"),
        ({"bwrap": P("bwrap")}, "launch path must be absolute"),
        ({"readonly": (P("claude-config"),)}, "read-only path must be absolute"),
        ({"readonly": (P("/s/impl/../rev"),)}, "read-only path must be absolute"),
        (
            {"relays": (Relay("proxy", "127.0.0.1:3128", P("/r/net/proxy.sock")),)},
            "relays are configured but no relay program is given",
        ),
    ],
)
def test_refuses_ambiguous_descriptions(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        build_argv(desc(**change))


def test_a_root_launcher_is_mapped_to_an_inner_uid_right_after_the_userns_flags() -> None:
    argv = build_argv(desc(inner_uid=65534))
    assert argv[1:7] == ["--unshare-user", "--disable-userns", "--assert-userns-disabled",
                         "--uid", "65534", "--gid"]  # fmt: skip
    assert "--uid" not in build_argv(desc())


def test_duplicate_masks_are_mounted_once() -> None:
    argv = build_argv(desc(masks=(P("/s"), P("/s"))))
    assert argv.count("--tmpfs") == 1
