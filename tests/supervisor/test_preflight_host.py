"""``agentc-supervisor preflight`` with no launch: the whole host, each problem with its fix.

Clean: this machine after ``scripts/setup --dev``, the real harnesses run ``--version`` in a
launch of each role. Hostile: one thing broken at a time (bwrap missing, a dead egress
address, a harness that is not there or prints no version inside, a shared state directory,
libseccomp unloadable, an incomplete launch spec), each named with its fix, ``ok: false``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentc.files.sockets import sun_path
from tests.supervisor.kit import HARNESS_BIN, Kit, cleanup, make_kit, write_config

pytestmark = pytest.mark.root

REAL = {name: str(HARNESS_BIN / name) for name in ("claude", "codex", "pi")}


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[Kit]:
    made = make_kit(tmp_path / "kit")
    try:
        yield made
    finally:
        cleanup(tmp_path / "kit")


def host_preflight(kit: Kit, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    argv = [sys.executable, "-m", "agentc.supervisor.cli", "--config", str(kit.config),
            "preflight", *extra]  # fmt: skip
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    result = subprocess.run(
        argv, env={**base, **(env or {})}, capture_output=True, text=True, timeout=600, cwd="/"
    )
    assert "Traceback" not in result.stderr, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["ok"] is (result.returncode == 0) is (not report["problems"]), report
    return report


def configure(kit: Kit, **settings: Any) -> None:
    kit.settings.update(settings)
    write_config(kit)


def one_problem(report: dict[str, Any], *words: str) -> str:
    found: list[str] = [p for p in report["problems"] if all(w in p for w in words)]
    assert len(found) == 1, report
    assert "(fix: " in found[0], found[0]
    return found[0]


def test_this_host_is_ok_with_the_real_harnesses(kit: Kit) -> None:
    assert all(Path(p).exists() for p in REAL.values()), "run scripts/setup --dev"
    configure(kit, harness_paths=REAL)
    report = host_preflight(kit)
    notes = report.pop("notes", [])
    assert report == {"ok": True, "problems": []}
    assert all("(fix: " in note for note in notes)
    for role in ("impl", "rev"):  # the version launches leave nothing behind
        assert list((kit.role_dir(role) / "runs").iterdir()) == []
        assert list((kit.role_dir(role) / "clones").iterdir()) == []


def test_a_missing_bwrap_names_the_fix(kit: Kit) -> None:
    configure(kit, bubblewrap="/nonexistent/bin/bwrap", harness_paths=REAL)
    problem = one_problem(host_preflight(kit), "/nonexistent/bin/bwrap")
    assert "not installed" in problem and "apt-get install bubblewrap" in problem


def test_a_dead_egress_socket_names_the_fix(kit: Kit, tmp_path: Path) -> None:
    dead = tmp_path / ("d" * 100) / "proxy.sock"  # longer than sun_path: reached all the same
    dead.parent.mkdir()
    with socket.socket(socket.AF_UNIX) as stale, sun_path(str(dead)) as short:
        stale.bind(short)  # a socket nothing listens on any more
    configure(kit, egress_listen="127.0.0.1:3128", egress_socket=str(dead), harness_paths=REAL)
    problem = one_problem(host_preflight(kit), "egress proxy", str(dead), "Connection refused")
    assert f"agentc-supervisor egress-proxy --socket {dead}" in problem


def test_a_dead_gateway_names_the_fix(kit: Kit, tmp_path: Path) -> None:
    configure(kit, gateway_listen="127.0.0.1:18799", gateway_control=str(tmp_path / "no.sock"))
    report = host_preflight(kit)
    one_problem(report, "model gateway at 127.0.0.1:18799")
    one_problem(report, "gateway control", "no.sock")


def test_a_harness_that_is_not_there(kit: Kit) -> None:
    configure(kit, harness_paths={**REAL, "pi": "/nonexistent/pi"})
    problem = one_problem(host_preflight(kit), "harness pi")
    assert "harness_paths.pi" in problem


def test_a_harness_that_prints_no_version_inside_a_launch(kit: Kit) -> None:
    """The kit's mock harness runs its (empty) prompt: no version. (Codex is checked as an
    implementer only: a codex reviewer is refused by every launch.)"""
    configure(kit, harness_paths={"codex": str(kit.bin / "codex")})
    report = host_preflight(kit)
    assert len(report["problems"]) == 1, report
    one_problem(report, "codex --version failed inside a implementer launch", "no version")


def test_a_harness_that_is_not_the_pinned_release(kit: Kit) -> None:
    """``[pinned]``: the version the harness prints inside a launch must contain the pin."""
    printed = subprocess.run(
        [REAL["claude"], "--version"], capture_output=True, text=True, timeout=60
    ).stdout.split()[0]
    configure(kit, harness_paths={"claude": REAL["claude"]}, pinned={"claude": printed})
    assert host_preflight(kit)["problems"] == []
    configure(kit, pinned={"claude": "0.0.1-not-this-one"})
    report = host_preflight(kit)
    for role in ("implementer", "reviewer"):
        problem = one_problem(report, "harness claude --version printed", f"a {role} launch")
        assert "not the pinned '0.0.1-not-this-one'" in problem and "pinned.claude" in problem


def test_a_shared_state_directory_names_the_fix(kit: Kit) -> None:
    configure(kit, harness_paths=REAL)
    os.chmod(kit.role_dir("reviewer") / "runs", 0o777)  # noqa: S103 - the hostile state
    problem = one_problem(host_preflight(kit), "runs has mode 0777")
    assert "mkdir -m 0700" in problem


def test_an_unloadable_libseccomp_names_the_fix(kit: Kit, tmp_path: Path) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "libseccomp.so.2").write_bytes(b"not a library")
    configure(kit, harness_paths=REAL)
    report = host_preflight(kit, env={"LD_LIBRARY_PATH": str(libs)})
    problem = one_problem(report, "syscall filter cannot be built", "implementer")
    assert "apt-get install libseccomp2" in problem


@pytest.mark.parametrize("given", [["--role=implementer"], ["--run=/x", "--clone=/y"]])
def test_an_incomplete_launch_spec_is_a_usage_error(kit: Kit, given: list[str]) -> None:
    argv = [sys.executable, "-m", "agentc.supervisor.cli", "--config", str(kit.config),
            "preflight", *given]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--role, --run and --clone together" in result.stderr
    assert "Traceback" not in result.stderr
