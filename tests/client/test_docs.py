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
