"""docs/cli.md is generated from the command tree; it must match, and every verb has --json."""

from __future__ import annotations

from pathlib import Path

import click

from agentc.client.cli import PROG, cli
from agentc.client.docs import _contexts, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_cli_reference_is_current() -> None:
    assert DOC.read_text() == render(), (
        "docs/cli.md is stale: run `uv run python -m agentc.client.docs > docs/cli.md`"
    )


def test_every_verb_takes_json() -> None:
    verbs = [c for c in _contexts(cli, PROG, None) if not isinstance(c.command, click.Group)]
    assert len(verbs) >= 17
    for ctx in verbs:
        names = {opt for p in ctx.command.params for opt in getattr(p, "opts", [])}
        assert "--json" in names, ctx.command_path


def test_the_client_reaches_the_service_only_over_http() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentc.client.cli, agentc.client.mcp_adapter, agentc.client.docs\n"
        "bad = [m for m in sys.modules if m.startswith(('agentc.service', 'agentc.store'))]\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
