"""agent-coordinator-server's settings: one home for the defaults (settings.py), the documented
environment variables work, and no other variable is read."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agentc.service.cli import main
from agentc.service.settings import ENVIRONMENT, ServerSettings

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operator-guide.md"
# | `--public-origin` (`COORDINATOR_PUBLIC_ORIGIN`) | `http://127.0.0.1:8080` | meaning |
ROW = re.compile(r"^\| `--([a-z-]+)` \(`([A-Z_]+)`\) \| ([^|]+) \|", re.MULTILINE)


def _global_options() -> dict[str, click.Option]:
    return {p.name: p for p in main.params if isinstance(p, click.Option) and p.name}


def test_the_guide_documents_exactly_the_environment_variables() -> None:
    documented = {opt.replace("-", "_"): env for opt, env, _ in ROW.findall(GUIDE.read_text())}
    assert documented == ENVIRONMENT
    assert {name: opt.envvar for name, opt in _global_options().items()} == ENVIRONMENT


def test_the_defaults_are_the_settings_defaults() -> None:
    fields = ServerSettings.model_fields
    for name, option in _global_options().items():
        field = fields[name]
        expected = None if field.is_required() else field.default
        if isinstance(expected, frozenset):
            expected = ",".join(sorted(expected))
        assert option.default == expected, name
        assert option.help == field.description, name
    for opt, _, shown in ROW.findall(GUIDE.read_text()):
        value = shown.strip().strip("`")
        default = fields[opt.replace("-", "_")].default
        if isinstance(default, str | int) and not isinstance(default, bool):
            assert value == str(default), opt


def test_each_documented_variable_sets_its_option(monkeypatch: pytest.MonkeyPatch) -> None:
    given = {
        "database": "/var/lib/c.sqlite3",
        "public_origin": "https://c.example",
        "listen": "127.0.0.1:9000",
        "allow_insecure_loopback": "true",
        "canary_principals": "bot-1,bot-2",
        "agent_task_weekly_budget": "7",
        "trusted_proxy_header": "X-Forwarded-For",
        "workers": "4",
        "database_pool_size": "12",
        "backup_repository": "/var/lib/agent-coordinator-backups",
    }
    for name, value in given.items():
        monkeypatch.setenv(ENVIRONMENT[name], value)
    ctx = main.make_context("agent-coordinator-server", ["migrate"])
    assert ctx.params == {
        **given,
        "allow_insecure_loopback": True,
        "agent_task_weekly_budget": 7,
        "workers": 4,
        "database_pool_size": 12,
    }


def test_no_other_variable_is_read(tmp_path: Path) -> None:
    assert "auto_envvar_prefix" not in main.context_settings
    for command in main.commands.values():
        assert [p.name for p in command.params if p.envvar] == [], command.name
    result = CliRunner().invoke(
        main,
        ["--database", str(tmp_path / "c.sqlite3"), "init-admin", "--password-stdin"],
        env={"COORDINATOR_INIT_ADMIN_USERNAME": "admin"},
        input="correct horse battery staple\n",
    )
    assert result.exit_code == 2 and "Missing option '--username'" in result.output
    assert not (tmp_path / "c.sqlite3").exists()


def test_settle_heap_takes_the_startup_objects_out_of_the_collectors_view() -> None:
    """What `serve` does before serving: the objects alive then are frozen (the collector's
    full collections no longer scan them), and what is made afterwards is collected as ever."""
    import gc

    from agentc.service.serving import settle_heap

    before = gc.get_freeze_count()
    try:
        settle_heap()
        frozen = gc.get_freeze_count()
        assert frozen > before
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # new garbage is still found
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
