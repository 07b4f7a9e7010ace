"""The deployment examples in deploy/: the systemd units parse, every setting they and the
environment example name exists, the Caddyfile's body limit is the service's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agentc.service.settings import ENVIRONMENT, ServerSettings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNITS = sorted(p for p in DEPLOY.iterdir() if p.suffix in (".service", ".timer"))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_units_parse(tmp_path: Path) -> None:
    for unit in UNITS:
        text = unit.read_text().replace("/usr/local/bin/agent-coordinator-server", "/bin/true")
        (tmp_path / unit.name).write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / u.name) for u in UNITS)],
        capture_output=True,
        text=True,
    )
    problems = [
        line
        for line in done.stderr.splitlines()
        if "agent-coordinator" in line and "EnvironmentFile" not in line
    ]
    assert not problems, done.stderr


def test_every_setting_named_exists() -> None:
    named = set(
        re.findall(r"\b(COORDINATOR_[A-Z_]+)=", (DEPLOY / "service.env.example").read_text())
    )
    assert named and named <= set(ENVIRONMENT.values())
    commands = set()
    for unit in UNITS:
        for line in unit.read_text().splitlines():
            if line.startswith("ExecStart="):
                commands.add(line.split()[1])
    from agentc.service.cli import main

    assert commands <= set(main.commands), commands - set(main.commands)


def test_the_caddyfile_body_limit_is_the_service_s() -> None:
    # Caddy reads MB as 10^6 bytes and MiB as 2^20 (a body between the two got 502 from Caddy
    # 2.6 in front of a service that takes it: tests/deploy/test_caddy.py).
    found = re.search(r"max_size\s+(\d+)MiB\b", (DEPLOY / "Caddyfile.example").read_text())
    assert found is not None
    limit = ServerSettings.model_fields["json_body_limit_bytes"].default
    assert int(found.group(1)) * 1024 * 1024 == limit
