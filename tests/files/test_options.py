"""files.options: every program that reads a settings file spells ``--config`` the same way,
names its default in its help and refuses a folder before it reads anything."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agentc.attention import cli as attention_cli
from agentc.files.options import ETC, default_config
from agentc.gateway import cli as gateway_cli
from agentc.host import cli as host_cli
from agentc.integrator import cli as integrator_cli
from agentc.supervisor import commands as supervisor_cli

PROGRAMS: dict[str, click.Command] = {
    "supervisor": supervisor_cli.main,
    "gateway": gateway_cli.command,
    "integrator": integrator_cli.main,
    "attention": attention_cli.main,
    "host": host_cli.main,
}
WORK = {  # what each would do with its settings
    "supervisor": ["run"],
    "gateway": ["--check"],
    "integrator": ["run"],
    "attention": ["check"],
    "host": ["check"],
}


def test_each_default_is_under_etc_agentc() -> None:
    assert default_config("integrator") == Path("/etc/agentc/integrator.toml")
    assert all(default_config(name).parent == ETC for name in PROGRAMS)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_help_names_the_default(program: str) -> None:
    result = CliRunner().invoke(PROGRAMS[program], ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert f"The settings file (default {default_config(program)}" in " ".join(
        result.output.split()
    )


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_a_folder_is_refused_by_name(program: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(PROGRAMS[program], ["--config", str(tmp_path), *WORK[program]])
    assert result.exit_code == 2
    assert "--config" in result.output and "is a directory" in result.output
