"""A missing or invalid configuration is a clear error naming the key: exit 2, nothing written."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from tests.integrator.kit import INTEGRATOR, clean_env


def _write(tmp_path: Path, text: str, token_mode: int = 0o600) -> tuple[Path, Path]:
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700, exist_ok=True)
    cred = secrets / "token"
    cred.write_text("a-token\n")
    cred.chmod(token_mode)
    work = tmp_path / "work"
    config = tmp_path / "integrator.toml"
    config.write_text(text.format(cred=cred, work=work, remote=tmp_path / "remote.git"))
    return config, work


GOOD = """
origin = "http://127.0.0.1:9"
allow_insecure_loopback = true
project_id = "p"
credential_file = "{cred}"
remote = "{remote}"
work_dir = "{work}"
[checks.unit]
argv = ["true"]
"""


def _run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [INTEGRATOR, "--config", str(config), "run", "--once", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            ("merge_policy", 'merge_policy = "squash"'),
            "merge_policy: must be one of 'fast-forward', 'rebase', 'merge', got 'squash'",
        ),
        (("extra", "colour = 1"), "colour: unknown setting"),
        (("target", 'target_branch = "-x"'), "target_branch: not a branch name"),
        (("work", 'work_dir = "relative"'), "work_dir"),
        (("origin", 'origin = "http://coordinator.example"'), "origin: plain http is refused"),
        (("argv", "[checks.empty]\nargv = []"), "checks.empty.argv: must be a non-empty list"),
        (("limits", "[limits]\nmemory_mib = -1"), "limits.memory_mib: must be >= 0"),
        (("poll", "poll_seconds = 0"), "poll_seconds: must be >= 1"),
        (("batch", "landing_batch = 17"), "landing_batch: must be <= 16"),
        (("batch0", "landing_batch = 0"), "landing_batch: must be >= 1"),
        (("ssh", 'ssh_key = "id_rsa"'), "ssh_key: must be an absolute path"),
        (("sweep", "ref_sweep_minutes = 0"), "ref_sweep_minutes: must be >= 1"),
        (("keep", "candidate_retention_days = -1"), "candidate_retention_days: must be >= 0"),
        (("keep2", 'candidate_retention_days = "90"'), "candidate_retention_days: expected a"),
        (("sign", 'signing_key = "key"'), "signing_key: must be an absolute path"),
        (("sign2", 'signing_key = "/key"'), "signing_key: must be in a directory"),
        (("signers", 'allowed_signers = "/x/allowed"'), "allowed_signers: needs signing_key"),
    ],
    ids=lambda v: v[0] if isinstance(v, tuple) else "",
)
def test_an_invalid_key_is_named(tmp_path: Path, change: tuple[str, str], named: str):
    setting = change[1]
    if setting.startswith("["):  # a table goes last
        text = GOOD + setting + "\n"
    else:  # a top-level key replaces the good one, before the tables
        key = setting.split(" ", 1)[0]
        lines = [line for line in GOOD.splitlines() if not line.startswith(key + " ")]
        text = setting + "\n" + "\n".join(lines) + "\n"
    config, work = _write(tmp_path, text)
    out = _run(config)
    assert out.returncode == 2, out
    assert named in out.stderr and str(config) in out.stderr
    assert "Traceback" not in out.stderr
    assert not work.exists()


def test_missing_file_and_missing_keys(tmp_path: Path):
    out = _run(tmp_path / "nowhere.toml")
    assert (
        out.returncode == 2
        and "nowhere.toml: the integrator configuration does not exist" in out.stderr
    )
    config, work = _write(tmp_path, 'origin = "https://c.example"\n')
    out = _run(config)
    assert out.returncode == 2
    for key in ("project_id", "credential_file", "remote", "work_dir"):
        assert f"{key}: required, but missing" in out.stderr
    config, work = _write(tmp_path, GOOD.split("[checks.unit]")[0])
    out = _run(config)
    assert out.returncode == 2 and "checks: at least one required check" in out.stderr
    assert not work.exists()


def test_an_unsafe_credential_file_is_refused(tmp_path: Path):
    config, work = _write(tmp_path, GOOD, token_mode=0o644)
    out = _run(config)
    assert out.returncode == 2 and "credential_file:" in out.stderr
    assert "a-token" not in out.stderr and not work.exists()


def test_an_unreachable_coordinator_is_an_error_not_a_traceback(tmp_path: Path):
    config, work = _write(tmp_path, GOOD)
    out = _run(config)
    assert out.returncode == 1 and "poll failed" in out.stderr and "no answer" in out.stderr
    assert "Traceback" not in out.stderr


def test_one_integrator_per_work_directory(tmp_path: Path):
    config, work = _write(tmp_path, GOOD)
    work.mkdir(mode=0o700)
    fd = os.open(work / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        out = _run(config)
    finally:
        os.close(fd)
    assert out.returncode == 5 and "another integrator holds" in out.stderr


# --- docs/integrator.md lists every key with its default ------------------------------------


def test_the_page_lists_every_key_with_its_default() -> None:
    from agentc.integrator.config import CheckConfig, IntegratorConfig
    from tests.kit.settings_doc import fields, key_rows, shown

    rows = key_rows("integrator.md", "Configuration")
    expected = {f"`{name}`": shown(item) for name, item in fields(IntegratorConfig).items()}
    for name, item in fields(CheckConfig).items():
        expected[f"`[checks.<name>] {name}`"] = shown(item)
    del expected["`checks`"], expected["`limits`"]  # tables: their own rows
    expected["`[limits]`"] = rows.get("`[limits]`", "missing")
    assert "the supervisor's defaults" in expected["`[limits]`"]
    checks = expected.pop("`[checks.<name>] argv`")
    assert checks == "required" and rows.pop("`[checks.<name>] argv`").startswith("required")
    assert rows == expected
