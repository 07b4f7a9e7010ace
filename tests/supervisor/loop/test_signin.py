"""The vendor sign-in check at admission: a vendor whose credential is missing, expired or
signed out is skipped (primary, then fallback), with the real ``claude auth status`` and a real
loop that falls back to a ``command:`` agent."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from agentc.supervisor.config import SupervisorConfig, load_config
from agentc.supervisor.loop import admission, signin
from tests.kit.live import LiveServer
from tests.supervisor.kit import Account
from tests.supervisor.loop.kit import CLAUDE, make_claude_loop_kit

OLD = time.time() - 400 * 24 * 3600


def _config(tmp_path: Path, text: str, run: str = "") -> SupervisorConfig:
    state = tmp_path / "state"
    (state / "impl").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "supervisor.toml"
    path.write_text(
        f'mode = "personal"\nstate_dir = "{state}"\n{text}\n[run]\nmin_free_mib = 1\n{run}'
        '[run.binding]\nservice_url = "https://c.example"\nproject_id = "p1"\n'
    )
    return load_config(path)


def _own_token(tmp_path: Path, fallback: bool = True, claude: Path = CLAUDE) -> SupervisorConfig:
    text = f'token_in_env = true\n[harness_paths]\nclaude = "{claude}"\n'
    if fallback:
        text += '[health.fallback]\nharness = "command:/bin/true"\nmodel = "m"\n'
    return _config(tmp_path, text)


def _token(config: SupervisorConfig, mtime: float | None = None) -> Path:
    path = config.resolved_state_dir() / "impl/claude-token"
    path.write_text("sk-ant-oat01-" + "x" * 40 + "\n")
    os.chmod(path, 0o600)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_a_missing_token_skips_to_the_fallback_or_refuses(tmp_path: Path) -> None:
    config = _own_token(tmp_path)
    vendor, problems = admission.admit(config)
    assert vendor is not None and vendor["harness"] == "command:/bin/true", problems
    alone = _own_token(tmp_path / "alone", fallback=False)
    vendor, problems = admission.admit(alone)
    assert vendor is None
    assert "no vendor is usable: claude: credential missing (" in problems[0], problems


def test_an_expired_token_is_skipped(tmp_path: Path) -> None:
    config = _own_token(tmp_path, fallback=False)
    _token(config, mtime=OLD)
    vendor, problems = admission.admit(config)
    assert vendor is None
    assert "claude: credential expired at " in problems[0], problems
    assert "token_lifetime_days" in problems[0]


def test_a_signed_in_claude_is_used_and_remembered(tmp_path: Path) -> None:
    if not CLAUDE.exists():
        pytest.skip("the claude harness is not installed (tools/harnesses)")
    config = _own_token(tmp_path)
    _token(config)
    signin._signed_in.clear()
    vendor, problems = admission.admit(config)
    assert vendor is not None and vendor["harness"] == "claude", problems
    assert len(signin._signed_in) == 1  # the next polls skip the check while nothing changes
    started = time.monotonic()
    assert admission.admit(config)[0] == vendor
    assert time.monotonic() - started < 0.4


def test_a_failing_sign_in_check_counts_as_signed_out(tmp_path: Path) -> None:
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\n[ \"$1 $2\" = 'auth status' ] && exit 1\nexit 0\n")
    os.chmod(fake, 0o755)  # noqa: S103 - a program
    config = _own_token(tmp_path, fallback=False, claude=fake)
    _token(config)
    vendor, problems = admission.admit(config)
    assert vendor is None
    assert "claude: signed out: claude auth status exited 1" in problems[0], problems


def test_the_reviewer_checks_its_own_token(tmp_path: Path) -> None:
    config = _own_token(tmp_path)
    _token(config)  # the implementer's: the reviewer's rev/claude-token is missing
    vendor, problems = admission.admit(config, "reviewer")
    assert vendor is None
    assert "rev/claude-token" in problems[0], problems


def _gateway_config(tmp_path: Path, credential: Path, upstream: str = "codex") -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(
        f'control_socket = "{tmp_path}/gw.sock"\nledger = "{tmp_path}/l.jsonl"\n'
        f'vendors = "{tmp_path}/v.json"\n[upstreams.{upstream}]\napi = "openai"\n'
        f'base_url = "https://api.example"\ncredential_file = "{credential}"\n'
    )
    return path


def test_a_gateway_vendor_needs_its_upstream_credential(tmp_path: Path) -> None:
    credential = tmp_path / "codex.key"
    gateway = _gateway_config(tmp_path, credential)
    config = _config(tmp_path, f'[health]\ngateway_config = "{gateway}"\n', 'harness = "codex"\n')
    assert config.run.harness == "codex"
    vendor, problems = admission.admit(config)
    assert vendor is None and "codex: credential missing (" in problems[0], problems
    assert str(credential) in problems[0]
    credential.write_text("sk-" + "k" * 30 + "\n")
    os.chmod(credential, 0o600)
    vendor, problems = admission.admit(config)
    assert vendor is not None and vendor["harness"] == "codex", problems
    os.utime(credential, (OLD, OLD))  # an API key does not expire
    assert admission.admit(config)[0] is not None
    credential.write_text(json.dumps({"oauth_token": "tok-" + "o" * 30}))
    os.utime(credential, (OLD, OLD))  # an OAuth token does
    vendor, problems = admission.admit(config)
    assert vendor is None and "codex: credential expired at " in problems[0], problems
    _gateway_config(tmp_path, credential, upstream="claude")
    vendor, problems = admission.admit(config)
    assert vendor is None and "has no upstream codex" in problems[0], problems


def test_the_loop_falls_back_when_the_primary_is_signed_out(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_claude_loop_kit(
        short_tmp,
        server,
        admin,
        token_in_env=True,
    )
    (loop.state / "impl/claude-token").unlink()  # the kit's dummy token: signed out now
    agent = loop.fall_back_to_the_agent()
    loop.write_config(harness="claude")
    task = loop.task()
    result = loop.once()
    assert result.returncode == 0, result.stderr
    assert "implementer vendor skipped: claude: credential missing" in result.stderr
    assert "exit_code: 0" in result.stderr, result.stderr
    [final] = loop.records("finished")
    assert final["vendor"]["harness"] == agent
    assert loop.show(task["id"])["work_status"] == "waiting_review", loop.tails()


DAY = 24 * 3600


def _lifetime_left(days: float) -> float:
    """The modification time of a token that expires in ``days`` (lifetime 365 days)."""
    return time.time() - (365 - days) * DAY


def test_a_token_near_its_expiry_is_warned_about_once(tmp_path: Path) -> None:
    config = _own_token(tmp_path)
    path = _token(config, mtime=_lifetime_left(5.5))
    now = time.time()
    [warning] = signin.expiry_warnings(config, [("claude", "implementer")] * 2, now)
    assert warning.startswith(f"the claude credential {path} expires at ")
    assert "(in 5 days)" in warning and "renew it" in warning
    # Outside the window, already expired (admission refuses it), or a command: nothing.
    for days in (30.0, -1.0):
        os.utime(path, (_lifetime_left(days), _lifetime_left(days)))
        assert signin.expiry_warnings(config, [("claude", "implementer")], now) == []
    assert signin.expiry_warnings(config, [("command:/bin/true", "implementer")], now) == []


def test_a_gateway_oauth_credential_is_warned_about_an_api_key_never(tmp_path: Path) -> None:
    credential = tmp_path / "codex.key"
    gateway = _gateway_config(tmp_path, credential)
    config = _config(tmp_path, f'[health]\ngateway_config = "{gateway}"\n', 'harness = "codex"\n')
    credential.write_text("sk-" + "k" * 30 + "\n")
    os.chmod(credential, 0o600)
    os.utime(credential, (_lifetime_left(2), _lifetime_left(2)))
    assert signin.expiry_warnings(config, [("codex", "implementer")], time.time()) == []
    credential.write_text(json.dumps({"oauth_token": "tok-" + "o" * 30}))
    os.utime(credential, (_lifetime_left(2), _lifetime_left(2)))
    [warning] = signin.expiry_warnings(config, [("codex", "implementer")], time.time())
    assert f"the codex credential {credential} expires at " in warning


def test_the_loop_warns_at_its_first_poll_and_then_once_a_day(
    server: LiveServer, admin: httpx.Client, short_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentc.supervisor.loop.run import Loop

    loop = make_claude_loop_kit(
        short_tmp,
        server,
        admin,
        token_in_env=True,
    )
    token = loop.state / "impl/claude-token"
    os.utime(token, (_lifetime_left(3), _lifetime_left(3)))
    loop.write_config(harness="claude")
    result = loop.once()
    assert f"warning: the claude credential {token} expires at " in result.stderr, result.stderr
    running = Loop(load_config(loop.config))
    now = time.time()
    running.warn_expiring(now)
    running.warn_expiring(now + DAY - 60)  # the same day: not again
    assert capsys.readouterr().err.count("warning: the claude credential") == 1
    running.warn_expiring(now + DAY)
    assert capsys.readouterr().err.count("warning: the claude credential") == 1


@pytest.mark.root
def test_in_host_mode_the_check_runs_as_the_role_account(
    short_tmp: Path, accounts: dict[str, Account]
) -> None:
    """Never as root: ``claude auth status`` runs as the role's account, in a home it owns,
    with the role's own token (root:<role group> 0440, host mode's rule)."""
    os.chmod(short_tmp, 0o755)  # noqa: S103 - root's, so the role account can reach the program
    fake = short_tmp / "claude"
    record = short_tmp / "who"
    record.touch()
    os.chmod(record, 0o666)  # noqa: S103 - the role account writes what it saw
    fake.write_text(f'#!/bin/sh\necho "$(id -u) $(stat -c %u "$HOME")" > {record}\nexit 0\n')
    os.chmod(fake, 0o755)  # noqa: S103 - a program
    for role in ("implementer", "reviewer"):
        account = accounts[role]
        path = short_tmp / f"{role}.toml"
        path.write_text(
            f'mode = "host"\nstate_dir = "{short_tmp / "state"}"\ntoken_in_env = true\n'
            f'implementer_user = "{accounts["implementer"].name}"\n'
            f'reviewer_user = "{accounts["reviewer"].name}"\n'
            f'[harness_paths]\nclaude = "{fake}"\n[run]\nmin_free_mib = 1\n'
            '[run.binding]\nservice_url = "https://c.example"\nproject_id = "p1"\n'
        )
        config = load_config(path)
        token = short_tmp / "state" / ("impl" if role == "implementer" else "rev") / "claude-token"
        token.parent.mkdir(parents=True, exist_ok=True)
        token.write_text("sk-ant-oat01-" + "x" * 40 + "\n")
        os.chown(token, 0, account.gid)
        os.chmod(token, 0o440)
        signin._signed_in.clear()
        assert signin.vendor_problem(config, "claude", role) is None
        assert record.read_text().split() == [str(account.uid)] * 2, role
