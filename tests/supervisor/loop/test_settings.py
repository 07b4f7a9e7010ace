"""The loop's settings: every key and default in docs/supervisor.md, bad files refused naming
the key before anything is written."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentc.core.errors import ConfigError
from agentc.files.settings import Settings
from agentc.sandbox.limits import Limits
from agentc.supervisor.config import PushHelperSettings, SupervisorConfig, load_config
from agentc.supervisor.loop import settings as loop_settings
from agentc.supervisor.loop.checks import (
    check_binding,
    check_canary_binding,
    check_reviewer_binding,
)
from tests.client.kit import write_credentials
from tests.kit.settings_doc import default, render

DOC = Path(__file__).resolve().parents[3] / "docs/supervisor.md"
TABLES: dict[str, type[Settings]] = {
    "Top level": SupervisorConfig,
    "`[limits]`": Limits,
    "`[push_helper]`": PushHelperSettings,
    "`[run]`": loop_settings.RunSettings,
    "`[run.binding]`": loop_settings.Binding,
    "`[run.reviewer_binding]`": loop_settings.ReviewerBinding,
    "`[run.canary_binding]`": loop_settings.CanaryBinding,
    "`[health]`": loop_settings.HealthSettings,
    "`[health.fallback]`": loop_settings.Fallback,
    "`[setup.<project-id>]`": loop_settings.ProjectSetup,
    "`[verification.<project-id>]`": loop_settings.Verification,
    "`[prices.<model>]`": loop_settings.PriceSettings,
}
SECTIONS = {
    "limits",
    "push_helper",
    "run",
    "health",
    "setup",
    "verification",
    "prices",
    "binding",
    "reviewer_binding",
    "canary_binding",
    "fallback",
}


def _doc_tables() -> dict[str, dict[str, str]]:
    tables: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in DOC.read_text().splitlines():
        if line.startswith("### "):
            current = tables.setdefault(line[4:].strip(), {})
        elif current is not None and (row := re.match(r"^\| `([a-z_]+)` \| ([^|]+) \|", line)):
            current[row[1]] = row[2].strip()
    return tables


@pytest.mark.parametrize("heading", list(TABLES))
def test_the_page_lists_every_key_with_its_default(heading: str) -> None:
    doc = _doc_tables()[heading]
    cls = TABLES[heading]
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    # A nested table is a row of its parent (run.binding, health.fallback) or its own heading.
    assert set(doc) == {n for n in fields if n not in SECTIONS or n in doc}, heading
    headings = _doc_tables()
    for name in set(fields) & SECTIONS - set(doc):
        assert any(h.startswith(f"`[{name}") for h in headings), name
    for name, item in fields.items():
        if name in SECTIONS:
            continue  # a nested table: documented by its own heading
        value = default(item)
        shown = "required" if value == "required" else render(value)
        if name in ("implementer_daily_usd", "reviewer_daily_usd", "launch_reserve_usd"):
            shown = f"`{value}`"
        assert doc[name] == shown, (heading, name)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "supervisor.toml"
    path.write_text(f'mode = "personal"\nstate_dir = "{tmp_path / "state"}"\n' + text)
    return path


BINDING = '[run.binding]\nservice_url = "http://127.0.0.1:9"\nproject_id = "p1"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[run]\npol_seconds = 5\n", "run.pol_seconds: unknown setting"),
        ('[run]\npoll_seconds = "5"\n', "run.poll_seconds: expected a number"),
        ("[run]\npoll_seconds = 0\n", "run.poll_seconds: must be >= 1"),
        ('[run]\nharness = "emacs"\n', "run.harness: must be one of claude, codex, pi"),
        ('[run]\nharness = "command:agent"\n', "run.harness: command: needs an absolute path"),
        ("[run]\ndrain_seconds = -1\n", "run.drain_seconds: must be >= 0"),
        ('[run.binding]\nservice_url = "http://10.0.0.1:80"\nproject_id = "p"\n',
         "run.binding.service_url: plain http is refused for 10.0.0.1"),
        ('[run.binding]\nservice_url = "https://c.example"\n',
         "run.binding.project_id: required, but missing"),
        ('[run.binding]\nservice_url = "https://c.example"\nproject_id = "p"\nrepository = "x"\n',
         "run.binding.repository: unknown setting"),
        ('[run.reviewer_binding]\nservice_url = "http://10.0.0.1"\n',
         "run.reviewer_binding.service_url: plain http is refused for 10.0.0.1"),
        ('[run.canary_binding]\nservice_url = "http://10.0.0.1"\nproject_id = "c"\n',
         "run.canary_binding.service_url: plain http is refused for 10.0.0.1"),
        ('[run.canary_binding]\nservice_url = "https://c.example"\n',
         "run.canary_binding.project_id: required, but missing"),
        ('[run.canary_binding]\nservice_url = "https://c.example"\nproject_id = "c"\nx = 1\n',
         "run.canary_binding.x: unknown setting"),
        ("[run]\nreview_minutes = 0\n", "run.review_minutes: must be > 0"),
        ('[push_helper]\nuser = "Root Account"\n', "push_helper.user: must be an account name"),
        ('[push_helper]\nssh_key = "key"\n', "push_helper.ssh_key: "),
        ("[push_helper]\nprogram = 3\n", "push_helper.program: "),
        ("[push_helper]\nwip_max_refs = -1\n", "push_helper.wip_max_refs: must be >= 0"),
        ('[push_helper]\nwip_max_mib = "lots"\n', "push_helper.wip_max_mib: "),
        ("[health]\nimplementer_daily_usd = -1\n", "health.implementer_daily_usd: must be >= 0"),
        ('[health.fallback]\nharness = "codex"\n', "health.fallback.model: required, but missing"),
        ('[setup."a b"]\nbranch = "x"\n', "setup: 'a b' is not a project id"),
        ("[setup.p1]\ncommand = 'cargo fetch'\n", "setup.p1.command: expected a list"),
        ("[prices.m]\ninput = 1\n", "prices.m.cached_input: required, but missing"),
    ],
)  # fmt: skip
def test_bad_settings_name_their_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "run.binding: required by agentc-supervisor run"),
        (BINDING, "run.binding.service_url: plain http needs a loopback host and"),
        (
            '[run]\nreviewer = true\nreviewer_harness = "codex"\n' + BINDING,
            "run.reviewer_harness: a codex reviewer cannot have its commands confined",
        ),
        (
            '[run]\nreviewer = true\nreviewer_harness = "pi"\n' + BINDING,
            "run.reviewer_harness: a pi reviewer cannot have its commands confined",
        ),
        (
            "[run]\nreviewer = true\nallow_insecure_loopback = true\n" + BINDING,
            "run.reviewer_binding.credential_file: "
            "@STATE@/rev/coordinator/credentials.toml: missing",
        ),
        (
            "[run]\nreviewer = true\nallow_insecure_loopback = true\n[run.reviewer_binding]\n"
            "credential_file = "
            '"@STATE@/impl/coordinator/credentials.toml"\n' + BINDING,
            "run.reviewer_binding.credential_file: @STATE@/impl/coordinator/credentials.toml "
            "is the implementer's; a reviewer needs its own credential",
        ),
        (
            "[run]\nallow_insecure_loopback = true\n[run.canary_binding]\n"
            'service_url = "http://127.0.0.1:10"\nproject_id = "c1"\n' + BINDING,
            "run.canary_binding.service_url: http://127.0.0.1:10 is not [run.binding]'s "
            "coordinator",
        ),
        (
            "[run]\nallow_insecure_loopback = true\n[run.canary_binding]\n"
            'service_url = "HTTP://127.0.0.1:9/"\nproject_id = "p1"\n' + BINDING,
            "run.canary_binding.project_id: p1 is [run.binding]'s project",
        ),
        (
            '[run.canary_binding]\nservice_url = "http://127.0.0.1:9"\nproject_id = "c1"\n'
            "[run]\nallow_insecure_loopback = false\n"
            '[run.binding]\nservice_url = "https://127.0.0.1:9"\nproject_id = "p1"\n',
            "run.canary_binding.service_url: http://127.0.0.1:9 is not [run.binding]'s",
        ),
        (
            '[setup.p1]\ncommand = ["make"]\ncache_paths = ["/nonexistent-agentc-cache"]\n'
            "[run]\nallow_insecure_loopback = true\n" + BINDING,
            "setup.p1.cache_paths: /nonexistent-agentc-cache cannot be used",
        ),
        (
            '[setup.p1]\ncommand = [""]\n[run]\nallow_insecure_loopback = true\n' + BINDING,
            "setup.p1.command: the program name is empty",
        ),
        (
            '[push_helper]\nknown_hosts = "/etc/hosts"\n[run]\nallow_insecure_loopback = true\n'
            + BINDING,
            "push_helper.known_hosts goes with push_helper.ssh_key",
        ),
    ],
)
def test_what_the_loop_cannot_do_is_refused_at_start(
    tmp_path: Path, text: str, message: str
) -> None:
    state = str(tmp_path / "state")
    config = load_config(_write(tmp_path, text.replace("@STATE@", state)))
    with pytest.raises(ConfigError, match=re.escape(message.replace("@STATE@", state))):
        binding = check_binding(config)
        check_canary_binding(config, binding)
        check_reviewer_binding(config, binding)


@pytest.mark.root
def test_reviews_are_refused_under_a_root_launcher_in_personal_mode(tmp_path: Path) -> None:
    """A reviewer's candidate sandbox cannot nest under root (the launch maps root to nobody):
    the loop says so at start instead of failing every review."""
    write_credentials(tmp_path / "state/rev/coordinator", "http://127.0.0.1:9", "t")
    text = "[run]\nreviewer = true\nallow_insecure_loopback = true\n" + BINDING
    config = load_config(_write(tmp_path, text))
    with pytest.raises(ConfigError, match=re.escape("run.reviewer: a reviewer's candidate")):
        check_reviewer_binding(config, check_binding(config))


@pytest.mark.parametrize(
    "text",
    [
        "[run]\npoll_secs = 5\n" + BINDING,
        '[run]\nallow_insecure_loopback = true\n[run.binding]\nservice_url = "http://192.0.2.1"\n'
        'project_id = "p"\n',
        BINDING,  # plain http on loopback without allow_insecure_loopback
        '[run]\nallow_insecure_loopback = true\nreviewer = true\nreviewer_harness = "codex"\n'
        + BINDING,
        "[run]\nallow_insecure_loopback = true\nreviewer = true\n" + BINDING,
    ],
)
def test_run_with_bad_settings_refuses_and_writes_nothing(tmp_path: Path, text: str) -> None:
    config = _write(tmp_path, text)
    out = subprocess.run(
        [sys.executable, "-m", "agentc.supervisor.cli", "--config", str(config), "run", "--once"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stderr.startswith("agentc-supervisor: ") and "Traceback" not in out.stderr
    assert re.search(r"run\.(poll_secs|binding|reviewer_harness|reviewer_binding)", out.stderr)
    assert not (tmp_path / "state").exists()


def test_an_empty_file_still_equals_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_text("")
    assert load_config(path) == SupervisorConfig()
