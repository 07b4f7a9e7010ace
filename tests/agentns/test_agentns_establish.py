"""``establish``: the launcher's ladder in the calling process (what a supervisor calls).

In-process tests: ``env`` carries the mock inputs and the kernel seams, ``say`` collects the
stderr lines. The CLI runs the same function (one ladder), checked at the end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agentc.agentns as agentns
from agentc.agentns import (
    AgentnsError,
    KernelError,
    PermissionDenied,
    SessionIdError,
    SessionRecord,
    UsageError,
    establish,
)
from agentc.agentns import cli as agentns_cli
from agentc.agentns.resolve import MSG_ASSAY, MSG_NO_UNSHARE, MSG_STOCK, MSG_UNSUPPORTED
from tests.agentns.kit import BOOTED, is_hex32

KERNEL_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No mock, no procfs entry (a stock kernel), whatever this machine has."""
    return {
        "AGENTNS_MOCK_FILE": str(tmp_path / "no-such-mock"),
        "AGENTNS_SESSION_PATH": str(tmp_path / "no-such-agent-session"),
    }


@pytest.fixture
def kernel(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """A wintermute kernel through the seams: procfs read-back present, assay Live."""
    procfs = tmp_path / "agent_session"
    procfs.write_text(KERNEL_ID + "\n")
    return {**env, "AGENTNS_SESSION_PATH": str(procfs), "AGENTNS_ASSAY_MOCK_VERDICT": "Live"}


def _establish(
    env: dict[str, str], intent: str = "headless:coder", **kw: bool
) -> tuple[SessionRecord, list[str]]:
    said: list[str] = []
    return establish(intent, env=env, say=said.append, **kw), said


def test_returns_the_id_mode_and_intent_of_this_process(env: dict[str, str]) -> None:
    record, said = _establish(env)
    assert (record.mode, record.intent, record.pid) == (
        "synth-fallback",
        "headless:coder",
        os.getpid(),
    )
    assert is_hex32(record.session_id)
    assert said == [MSG_STOCK]
    assert (record.budget, record.budget_enforced, record.budget_unenforced) == (None, (), ())
    again, _ = _establish(env)
    assert again.session_id != record.session_id  # unique per call (monotonic clock)
    assert agentns.establish is establish


def test_the_mock_file_wins_over_the_override(env: dict[str, str], tmp_path: Path) -> None:
    env["AGENTNS_SESSION_ID_OVERRIDE"] = "override-id"
    record, said = _establish(env)
    assert (record.session_id, record.mode) == ("override-id", "mock")
    assert said == ["MOCK MODE: session_id=override-id"]
    mock = tmp_path / "mock"
    mock.write_text("  file-id \n")
    record, _ = _establish({**env, "AGENTNS_MOCK_FILE": str(mock)}, no_unshare=True)
    assert (record.session_id, record.mode) == ("file-id", "mock")


def test_no_unshare_synthesizes_without_touching_the_kernel(kernel: dict[str, str]) -> None:
    kernel["AGENTNS_PRCTL_MOCK_ERRNO"] = "EPERM"  # would be fatal if the prctl rung ran
    record, said = _establish(kernel, no_unshare=True)
    assert record.mode == "no-unshare" and is_hex32(record.session_id)
    assert said == [MSG_NO_UNSHARE]


def test_the_prctl_rung_reads_the_id_back(kernel: dict[str, str]) -> None:
    record, said = _establish({**kernel, "AGENTNS_PRCTL_MOCK_ERRNO": "0"}, verbose=True)
    assert (record.session_id, record.mode) == (KERNEL_ID, "prctl")
    assert said == [f"mode=prctl session_id={KERNEL_ID} intent=headless:coder"]


@pytest.mark.parametrize("err", ["ENOSYS", "EINVAL"])
def test_an_unsupported_prctl_falls_back_with_a_warning(kernel: dict[str, str], err: str) -> None:
    record, said = _establish({**kernel, "AGENTNS_PRCTL_MOCK_ERRNO": err})
    assert record.mode == "synth-fallback" and record.session_id != KERNEL_ID
    assert said == [MSG_UNSUPPORTED]


def test_assay_not_live_falls_back_before_the_prctl(kernel: dict[str, str]) -> None:
    kernel |= {"AGENTNS_ASSAY_MOCK_VERDICT": "Broken", "AGENTNS_PRCTL_MOCK_ERRNO": "EPERM"}
    record, said = _establish(kernel)
    assert record.mode == "synth-fallback"
    assert said == [MSG_ASSAY]


@pytest.mark.parametrize(
    ("err", "kind", "message"),
    [
        ("EPERM", PermissionDenied, "requires CAP_SYS_ADMIN"),
        ("EIO", KernelError, r"prctl\(PR_SET_AGENT_NS\) failed: .*os error 5"),
    ],
)
def test_prctl_errors_are_the_packages_own(
    kernel: dict[str, str], err: str, kind: type[AgentnsError], message: str
) -> None:
    with pytest.raises(kind, match=message):
        _establish({**kernel, "AGENTNS_PRCTL_MOCK_ERRNO": err})


def test_a_bad_read_back_is_fatal(kernel: dict[str, str]) -> None:
    Path(kernel["AGENTNS_SESSION_PATH"]).write_text("0" * 32 + "\n")
    with pytest.raises(SessionIdError, match="all-zero"):
        _establish({**kernel, "AGENTNS_PRCTL_MOCK_ERRNO": "0"})


def test_an_empty_intent_is_a_usage_error(env: dict[str, str]) -> None:
    with pytest.raises(UsageError, match="non-empty"):
        _establish(env, intent="  ")


@pytest.mark.skipif(BOOTED, reason="a wintermute kernel would create a real namespace")
def test_the_real_prctl_runs_in_this_process_and_a_stock_kernel_refuses_it(
    kernel: dict[str, str],
) -> None:
    # No errno seam: the create call is this process's own prctl(2), which a stock kernel
    # answers with EINVAL (an unknown option): the fallback, and this process is unchanged.
    record, said = _establish(kernel)
    assert record.mode == "synth-fallback"
    assert said == [MSG_UNSUPPORTED]


def test_the_defaults_are_os_environ_and_the_launchers_stderr(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AGENTNS_SESSION_ID_OVERRIDE", "from-environ")
    record = establish("/build", verbose=True)
    assert (record.session_id, record.mode, record.intent) == ("from-environ", "mock", "/build")
    assert capsys.readouterr().err == (
        "[agentns-claude] MOCK MODE: session_id=from-environ\n"
        "[agentns-claude] mode=mock session_id=from-environ intent=/build\n"
    )
    assert os.environ.get("AGENTNS_SESSION_ID") != "from-environ"  # it exports nothing


def test_the_cli_runs_the_same_ladder(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[str, bool, bool]] = []
    execs: list[tuple[list[str], dict[str, str]]] = []

    def fake_establish(intent: str, *, no_unshare: bool, verbose: bool) -> SessionRecord:
        calls.append((intent, no_unshare, verbose))
        return SessionRecord("cafe" * 8, "no-unshare", intent, os.getpid())

    def fake_exec(command: list[str], child: dict[str, str]) -> int:
        execs.append((command, child))
        return 0

    monkeypatch.setattr(agentns_cli, "establish", fake_establish)
    monkeypatch.setattr(agentns_cli, "_exec", fake_exec)
    record = tmp_path / "record.json"
    argv = ["--intent", "/x", "--no-unshare", "--record", str(record), "--", "true"]
    assert agentns_cli.main(argv) == 0
    assert calls == [("/x", True, False)]
    ((command, child),) = execs
    assert command == ["true"]
    assert (child["AGENTNS_SESSION_ID"], child["AGENTNS_MODE"]) == ("cafe" * 8, "no-unshare")
    assert agentns.read_record(record).session_id == "cafe" * 8
