"""The session-id precedence ladder, rung by rung, through the installed command.

Seams, as in the original: AGENTNS_MOCK_FILE, AGENTNS_SESSION_PATH, AGENTNS_ASSAY_MOCK_VERDICT,
AGENTNS_PRCTL_MOCK_ERRNO; a fake ``assay`` on PATH exercises the real assay spawn.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from agentc.agentns import kernel, resolve
from tests.agentns.kit import BOOTED, child_env, is_hex32

VALID_ID = "0123456789abcdef0123456789abcdef"
STOCK = (
    "[agentns-claude] WARNING: kernel does not support agent namespaces; synthesizing session id"
)
ASSAY = (
    "[agentns-claude] WARN: assay agentns not Live; agentns unavailable, synthesizing session id"
)
UNSUPPORTED = (
    "[agentns-claude] WARNING: agent_session present but prctl(PR_SET_AGENT_NS) returned "
    "EINVAL/ENOSYS; falling back to synthesized id"
)


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    """A stand-in for /proc/self/agent_session holding a valid id."""
    path = tmp_path / "agent_session"
    path.write_text(VALID_ID + "\n")
    return path


def kernel_env(session_file: Path, **extra: str) -> dict[str, str | None]:
    """Environment that gets past the stock-kernel fast path to the assay gate / prctl."""
    return {"AGENTNS_SESSION_PATH": str(session_file), **extra}


# --- 1. mock ------------------------------------------------------------------------------


def test_override_variable_reaches_child_in_mock_mode(run):  # A-AC3
    r = run("--intent", "t", "--", "env", env={"AGENTNS_SESSION_ID_OVERRIDE": "from-env-0001"})
    assert r.returncode == 0
    env = child_env(r.stdout)
    assert env["AGENTNS_SESSION_ID"] == "from-env-0001"
    assert env["AGENTNS_MODE"] == "mock"
    assert "[agentns-claude] MOCK MODE: session_id=from-env-0001\n" in r.stderr


def test_mock_file_wins_over_variable(run, tmp_path: Path):  # A-AC3
    mock = tmp_path / "mock"
    mock.write_text("  exec-test-fixed-id\n")
    r = run(
        "--intent",
        "t",
        "--",
        "env",
        env={"AGENTNS_MOCK_FILE": str(mock), "AGENTNS_SESSION_ID_OVERRIDE": "from-env"},
    )
    env = child_env(r.stdout)
    assert env["AGENTNS_SESSION_ID"] == "exec-test-fixed-id"
    assert env["AGENTNS_MODE"] == "mock"
    assert r.stderr.startswith("[agentns-claude] MOCK MODE: session_id=exec-test-fixed-id\n")


@pytest.mark.parametrize("kind", ["empty", "blank", "directory"])
def test_mock_file_that_is_not_a_usable_file_falls_through(run, tmp_path: Path, kind):
    mock = tmp_path / "mock"
    if kind == "directory":
        mock.mkdir()
    else:
        mock.write_text("" if kind == "empty" else "  \n\t")
    r = run(
        "--intent",
        "t",
        "--",
        "env",
        env={"AGENTNS_MOCK_FILE": str(mock), "AGENTNS_SESSION_ID_OVERRIDE": "from-env"},
    )
    assert child_env(r.stdout)["AGENTNS_SESSION_ID"] == "from-env"


def test_mock_wins_over_no_unshare(run):  # B-AC3
    r = run("--intent", "t", "--no-unshare", "--", "env", env={"AGENTNS_SESSION_ID_OVERRIDE": "m1"})
    assert child_env(r.stdout)["AGENTNS_MODE"] == "mock"
    assert "no-unshare" not in r.stderr


# --- 2. --no-unshare ------------------------------------------------------------------------


def test_no_unshare_synthesizes_and_says_so(run):  # A-AC9 (first half), B-AC3
    r = run("--intent", "t", "--no-unshare", "--", "env")
    assert r.returncode == 0
    env = child_env(r.stdout)
    assert env["AGENTNS_MODE"] == "no-unshare"
    sid = env["AGENTNS_SESSION_ID"]
    assert is_hex32(sid)
    assert r.stderr == "[agentns-claude] no-unshare: stock kernel, session_id synthesized\n"
    # uid (8 hex) + btime seconds (8 hex) + monotonic ns (16 hex)
    btime = next(
        int(x.split()[1]) for x in Path("/proc/stat").read_text().splitlines() if x[:6] == "btime "
    )
    assert sid[:8] == f"{os.getuid():08x}"
    assert sid[8:16] == f"{btime & 0xFFFFFFFF:08x}"


def test_no_unshare_skips_assay_and_prctl(run, session_file):  # B-AC3
    # EPERM would be fatal if the prctl were attempted.
    env = kernel_env(
        session_file, AGENTNS_ASSAY_MOCK_VERDICT="Live", AGENTNS_PRCTL_MOCK_ERRNO="EPERM"
    )
    r = run("--intent", "t", "--no-unshare", "--", "env", env=env)
    assert r.returncode == 0
    assert child_env(r.stdout)["AGENTNS_MODE"] == "no-unshare"


# --- 3. stock kernel fast path (seed wins over the original code) ---------------------------


def test_stock_kernel_without_flag_runs_child_and_warns(run):  # A-AC9 (changed), 9.4
    r = run("--intent", "t", "--", "sh", "-c", 'echo "$AGENTNS_MODE $AGENTNS_SESSION_ID"; exit 3')
    assert r.returncode == 3
    mode, sid = r.stdout.split()
    assert mode == "synth-fallback"
    assert is_hex32(sid)
    assert r.stderr == STOCK + "\n"


# --- 4. assay gate --------------------------------------------------------------------------


@pytest.mark.parametrize("verdict", ["FlagRejected", "Unknown", "live", ""])
def test_assay_not_live_skips_prctl(run, session_file, verdict):  # SW-AC5
    env = kernel_env(
        session_file, AGENTNS_ASSAY_MOCK_VERDICT=verdict, AGENTNS_PRCTL_MOCK_ERRNO="EPERM"
    )
    r = run("--intent", "t", "--", "env", env=env)
    assert r.returncode == 0, r.stderr  # EPERM never reached: no prctl attempt
    env_out = child_env(r.stdout)
    assert env_out["AGENTNS_MODE"] == "synth-fallback"
    assert env_out["AGENTNS_SESSION_ID"] != VALID_ID
    assert r.stderr == ASSAY + "\n"


def test_assay_verdict_is_trimmed(run, session_file):
    env = kernel_env(
        session_file, AGENTNS_ASSAY_MOCK_VERDICT=" Live\n", AGENTNS_PRCTL_MOCK_ERRNO="0"
    )
    r = run("--intent", "t", "--", "env", env=env)
    assert child_env(r.stdout)["AGENTNS_MODE"] == "prctl"


def _assay(fake_bin, tmp_path: Path, stdout: str, code: int = 0) -> str:
    calls = tmp_path / "assay-calls"
    bindir = fake_bin("assay", f"echo \"$@\" >> {calls}\ncat <<'EOF'\n{stdout}\nEOF\nexit {code}\n")
    return f"{bindir}:/usr/bin:/bin"


LIVE_JSON = (
    '{"primitive":"agentns","verdict":{"type":"Live","detail":{"session":"x"}},'
    '"layers_passed":5,"evidence":[],"kernel_release":"6.x-wintermute","checked_at":"now"}'
)


def test_real_assay_live_lets_prctl_run(run, session_file, fake_bin, tmp_path):
    path = _assay(fake_bin, tmp_path, LIVE_JSON)
    r = run(
        "--intent",
        "t",
        "--",
        "env",
        env=kernel_env(session_file, PATH=path, AGENTNS_PRCTL_MOCK_ERRNO="0"),
    )
    assert r.returncode == 0, r.stderr
    assert child_env(r.stdout)["AGENTNS_MODE"] == "prctl"
    assert (tmp_path / "assay-calls").read_text() == "agentns --json\n"


def test_real_assay_nonzero_exit_still_reads_json(run, session_file, fake_bin, tmp_path):
    path = _assay(fake_bin, tmp_path, LIVE_JSON, code=3)
    env = kernel_env(session_file, PATH=path, AGENTNS_PRCTL_MOCK_ERRNO="0")
    assert child_env(run("--intent", "t", "--", "env", env=env).stdout)["AGENTNS_MODE"] == "prctl"


@pytest.mark.parametrize(
    "stdout",
    [
        '{"verdict":{"type":"FlagRejected","detail":{"flag":"0x100","errno":22}}}',
        '{"verdict":{"detail":"no type"}}',
        "not json at all",
        '["Live"]',
        '{"verdict":"Live"}',
    ],
)
def test_real_assay_anything_but_live_json_means_synth(
    run, session_file, fake_bin, tmp_path, stdout
):
    path = _assay(fake_bin, tmp_path, stdout, code=1)
    env = kernel_env(session_file, PATH=path, AGENTNS_PRCTL_MOCK_ERRNO="EPERM")
    r = run("--intent", "t", "--", "env", env=env)
    assert r.returncode == 0
    assert child_env(r.stdout)["AGENTNS_MODE"] == "synth-fallback"
    assert ASSAY in r.stderr


def test_missing_assay_means_synth(run, session_file, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = kernel_env(session_file, PATH=f"{empty}:/usr/bin:/bin", AGENTNS_PRCTL_MOCK_ERRNO="EPERM")
    r = run("--intent", "t", "--", "/usr/bin/env", env=env)
    assert r.returncode == 0
    assert child_env(r.stdout)["AGENTNS_MODE"] == "synth-fallback"


# --- 5. prctl and the read-back -------------------------------------------------------------


@pytest.mark.parametrize("content", [VALID_ID, VALID_ID + "\n"])
def test_prctl_success_reads_back_the_id(run, tmp_path, content):  # B-AC2 (valid)
    path = tmp_path / "agent_session"
    path.write_text(content)
    env = kernel_env(path, AGENTNS_ASSAY_MOCK_VERDICT="Live", AGENTNS_PRCTL_MOCK_ERRNO="0")
    r = run("--intent", "t", "--verbose", "--", "env", env=env)
    assert r.returncode == 0, r.stderr
    out = child_env(r.stdout)
    assert (out["AGENTNS_SESSION_ID"], out["AGENTNS_MODE"]) == (VALID_ID, "prctl")
    assert r.stderr == f"[agentns-claude] mode=prctl session_id={VALID_ID} intent=t\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("0" * 32, "agent_session: all-zero id — namespace was not initialised"),
        ("abc", "agent_session: expected 32 hex chars, got 3 in "),
        (VALID_ID + "00", "agent_session: expected 32 hex chars, got 34 in "),
        ("", "agent_session: expected 32 hex chars, got 0 in "),
        ("g" * 32, "agent_session: non-lowercase-hex character in id (expected 0-9, a-f)"),
        (VALID_ID.upper(), "agent_session: non-lowercase-hex character in id (expected 0-9, a-f)"),
    ],
)
def test_bad_read_back_is_fatal(run, tmp_path, content, message):  # B-AC2, 9.4
    path = tmp_path / "agent_session"
    path.write_text(content)
    env = kernel_env(path, AGENTNS_ASSAY_MOCK_VERDICT="Live", AGENTNS_PRCTL_MOCK_ERRNO="0")
    r = run("--intent", "t", "--", "echo", "must-not-run", env=env)
    assert r.returncode == 2
    assert f"agentns-claude: {message}" in r.stderr
    assert "must-not-run" not in r.stdout
    assert "Traceback" not in r.stderr


# --- 6-8. create errors ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ENOSYS", "EINVAL"])
def test_unsupported_prctl_synthesizes_and_warns(run, session_file, name):  # B-AC1
    env = kernel_env(session_file, AGENTNS_ASSAY_MOCK_VERDICT="Live", AGENTNS_PRCTL_MOCK_ERRNO=name)
    r = run("--intent", "t", "--", "env", env=env)
    assert r.returncode == 0
    out = child_env(r.stdout)
    assert out["AGENTNS_MODE"] == "synth-fallback"
    assert is_hex32(out["AGENTNS_SESSION_ID"]) and out["AGENTNS_SESSION_ID"] != VALID_ID
    assert r.stderr == UNSUPPORTED + "\n"


def test_eperm_is_fatal_and_names_the_remedies(run, session_file):  # B-AC1, 9.4
    env = kernel_env(
        session_file, AGENTNS_ASSAY_MOCK_VERDICT="Live", AGENTNS_PRCTL_MOCK_ERRNO="EPERM"
    )
    r = run("--intent", "t", "--", "echo", "must-not-run", env=env)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == (
        "agentns-claude: prctl(PR_SET_AGENT_NS) requires CAP_SYS_ADMIN in the user namespace. "
        "Re-run as root or with a privileged user namespace, or use --no-unshare.\n"
    )


@pytest.mark.parametrize("name", ["ENOMEM", "EBUSY", "1"])
def test_other_create_errors_are_fatal_io_errors(run, session_file, name):  # B-AC1
    env = kernel_env(session_file, AGENTNS_ASSAY_MOCK_VERDICT="Live", AGENTNS_PRCTL_MOCK_ERRNO=name)
    r = run("--intent", "t", "--", "echo", "must-not-run", env=env)
    assert r.returncode == 2
    assert "agentns-claude: prctl(PR_SET_AGENT_NS) failed: Input/output error" in r.stderr


def test_real_prctl_on_this_kernel(run, session_file):
    # No errno seam: the real ctypes prctl runs. A stock kernel answers EINVAL (unknown option).
    env = kernel_env(session_file, AGENTNS_ASSAY_MOCK_VERDICT="Live")
    r = run("--intent", "t", "--", "env", env=env)
    assert r.returncode == 0, r.stderr
    mode = child_env(r.stdout)["AGENTNS_MODE"]
    if BOOTED:
        assert mode == "prctl"
    else:
        assert mode == "synth-fallback"
        assert r.stderr == UNSUPPORTED + "\n"


def test_old_pending_unshare_mode_is_gone(run):  # B-AC4
    src = Path(kernel.__file__).parent
    for module in src.glob("*.py"):
        assert "pending-unshare" not in module.read_text()
    assert "pending-unshare" not in run("--help").stdout


# --- the intent tag (in-process: the seam is an injectable function) -------------------------


def test_intent_tag_is_cut_to_63_bytes():  # B-AC5
    assert kernel.intent_bytes("x" * 100) == b"x" * 63
    assert kernel.intent_bytes("/build") == b"/build"
    assert len(kernel.intent_bytes("é" * 40) or b"") == 63
    assert kernel.intent_bytes("a\0b") is None


def test_intent_failure_only_warns(monkeypatch, tmp_path):  # B-AC5
    path = tmp_path / "agent_session"
    path.write_text(VALID_ID)
    seen: list[str] = []
    monkeypatch.setattr(kernel, "set_intent", lambda intent, env: errno.EINVAL)
    env = {
        "AGENTNS_MOCK_FILE": str(tmp_path / "none"),
        "AGENTNS_SESSION_PATH": str(path),
        "AGENTNS_ASSAY_MOCK_VERDICT": "Live",
        "AGENTNS_PRCTL_MOCK_ERRNO": "0",
    }
    res = resolve.resolve_session("t", no_unshare=False, env=env, say=seen.append)
    assert (res.session_id, res.mode) == (VALID_ID, "prctl")
    assert seen == ["WARNING: prctl(PR_SET_AGENT_INTENT_TAG) failed: Invalid argument; continuing"]


def test_prctl_numbers_match_the_uapi_header():
    assert kernel.PR_AGENT_BASE == 0x41544E53
    assert kernel.PR_SET_AGENT_INTENT_TAG == 0x41544E55
    assert kernel.PR_SET_AGENT_NS == 0x41544E5A
    assert (kernel.AGENT_NS_ID_BYTES, kernel.AGENT_NS_INTENT_MAX) == (16, 63)
