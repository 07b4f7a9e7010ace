"""How a launch is planned with the gateway (the default) and with the token opt-in; no bwrap."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentc.core.errors import ConfigError, SupervisorError
from agentc.supervisor.commands import main
from agentc.supervisor.config import SupervisorConfig, load_config
from agentc.supervisor.launch.plan import Plan, plan
from agentc.supervisor.launch.request import LaunchRequest
from tests.supervisor.kit import Kit, make_kit


@pytest.fixture
def short() -> Iterator[Path]:
    """A short root: $RUN/net/gateway.sock must fit in a Unix socket address."""
    root = Path(tempfile.mkdtemp(prefix="agc-plan-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _kit(short: Path, **settings: Any) -> Kit:
    control = short / "gw" / "control.sock"
    control.parent.mkdir()
    defaults: dict[str, Any] = {
        "gateway_listen": "127.0.0.1:18788",
        "gateway_address": "127.0.0.1:28788",
        "gateway_control": str(control),
        "token_in_env": False,
    }
    return make_kit(short / "kit", **{**defaults, **settings})


def _plan(kit: Kit, harness: str = "claude", **kw: object) -> Plan:
    run, clone = kit.new_run("exit 0\n")
    request = LaunchRequest(
        role="implementer",
        harness=harness,
        run=run,
        clone=clone,
        launch_id=str(uuid.uuid4()),
        **kw,  # type: ignore[arg-type]
    )
    return plan(load_config(kit.config), request)


@pytest.mark.root  # the kit's tree is root's
def test_the_gateway_is_the_default(short: Path) -> None:
    defaults = SupervisorConfig()
    assert defaults.gateway_target() == "127.0.0.1:8788" and not defaults.token_in_env
    kit = _kit(short)
    # A broken token file does not matter: the gateway path never reads it.
    (kit.role_dir("implementer") / "claude-token").write_text("has space\n")
    p = _plan(kit, attempt="a7", generation=3, task="t9", launch_usd=1.5)
    assert p.token is None
    assert not any(k in p.env for k in ("CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_API_KEY"))
    assert p.gateway is not None and p.gateway.base_url == "http://127.0.0.1:18788"
    lease = p.gateway.lease.grant
    assert (lease.attempt, lease.generation, lease.task, lease.launch_usd) == ("a7", 3, "t9", 1.5)
    assert (lease.upstream, lease.role_slug, lease.launch_id) == (
        "claude",
        "impl",
        p.request.launch_id,
    )
    (relay,) = [r for r in p.description.relays if r.name == "gateway"]
    assert (relay.address, relay.target) == ("127.0.0.1:18788", "127.0.0.1:28788")
    sock = p.layout.net / "gateway.sock"
    i = p.argv.index("netns-relay")
    assert p.argv[i + 1 : i + 3] == ["--relay", f"127.0.0.1:18788={sock}"]
    # The control socket's directory is hidden in the launch (Unix sockets ignore netns).
    control_dir = str(short / "gw")
    assert ["--tmpfs", control_dir] == p.argv[p.argv.index(control_dir) - 1 : p.argv.index(
        control_dir) + 1]  # fmt: skip
    assert p.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    attempt_default = _plan(kit)
    assert attempt_default.gateway is not None
    assert attempt_default.gateway.lease.grant.attempt == attempt_default.request.launch_id


@pytest.mark.root  # the kit's tree is root's
def test_each_harness_gets_its_upstream(short: Path) -> None:
    kit = _kit(short)
    upstreams = {}
    for harness in ("claude", "codex", "pi"):
        gateway = _plan(kit, harness).gateway
        assert gateway is not None
        upstreams[harness] = gateway.lease.grant.upstream
    assert upstreams == {"claude": "claude", "codex": "codex", "pi": "claude"}
    codex = _plan(kit, "codex")
    assert "--ignore-user-config" not in codex.argv  # its config.toml holds the provider
    pi = _plan(kit, "pi", model="claude-haiku-4-5")
    assert pi.argv[-4:] == ["--provider", "agentc", "--model", "claude-haiku-4-5"]


@pytest.mark.root  # the kit's tree is root's
def test_token_in_env_is_an_opt_in_for_claude_only(short: Path) -> None:
    kit = _kit(short, token_in_env=True)
    claude = _plan(kit)
    token = (kit.role_dir("implementer") / "claude-token").read_text().strip()
    assert claude.token == token and claude.gateway is None
    assert not any(r.name == "gateway" for r in claude.description.relays)
    codex = _plan(kit, "codex")
    assert codex.token is None and codex.gateway is not None


@pytest.mark.root  # the kit's tree is root's
def test_gateway_off_means_no_model_credential_at_all(short: Path) -> None:
    p = _plan(_kit(short, gateway_listen=""))
    assert p.token is None and p.gateway is None and not p.description.relays


@pytest.mark.root  # the kit's tree is root's
def test_an_unmapped_harness_is_refused(short: Path) -> None:
    kit = _kit(short, gateway_upstreams={"claude": "claude"})
    with pytest.raises(SupervisorError, match="no upstream for codex"):
        _plan(kit, "codex")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("gateway_listen", "10.0.0.1:8788", "not a loopback"),
        ("gateway_address", "127.1:8788", "IPv4"),
        ("gateway_upstreams", {"emacs": "claude"}, "unknown harness"),
        ("gateway_control", "run/control.sock", "absolute"),
    ],
)
def test_gateway_settings_are_checked(
    tmp_path: Path, key: str, value: object, message: str
) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_text(f"{key} = {json.dumps(value)}\n".replace(": ", " = ").replace('{"', '{ "'))
    with pytest.raises(ConfigError, match=message):
        load_config(path)


@pytest.mark.root  # the kit's tree is root's
def test_dry_run_names_the_gateway_and_never_a_sentinel(short: Path) -> None:
    kit = _kit(short)
    run, clone = kit.new_run("exit 0\n")
    args = ["--config", str(kit.config), "launch", "--role=implementer", f"--run={run}"]
    result = CliRunner().invoke(main, [*args, f"--clone={clone}", "--dry-run"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["model_access"] == "gateway http://127.0.0.1:18788 (sentinel claude)"
    assert not any(e.startswith("ANTHROPIC_API_KEY=") for e in shown["env"])
    assert sorted(p.name for p in run.iterdir()) == ["prompt.md"]


@pytest.mark.root  # the kit's tree is root's
def test_no_gateway_running_refuses_the_launch_before_anything_is_written(short: Path) -> None:
    kit = _kit(short)
    run, clone = kit.new_run("exit 0\n")
    result = kit.launch(run, clone)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "model gateway control socket" in result.stderr
    assert sorted(p.name for p in run.iterdir()) == ["prompt.md"]


def test_model_gateway_is_an_agentc_supervisor_command() -> None:
    result = CliRunner().invoke(main, ["model-gateway", "--help"])
    assert result.exit_code == 0 and "--check" in result.output
    assert "model-gateway" in CliRunner().invoke(main, ["--help"]).output


@pytest.mark.root  # the kit's tree is root's
def test_the_egress_relay_goes_to_the_proxys_socket_and_names_the_launch(short: Path) -> None:
    egress = short / "egress" / "proxy.sock"
    egress.parent.mkdir()
    kit = _kit(short, egress_listen="127.0.0.1:3128", egress_socket=str(egress))
    p = _plan(kit, "command:/bin/true")
    (relay,) = [r for r in p.description.relays if r.name == "proxy"]
    assert (relay.address, relay.target) == ("127.0.0.1:3128", f"unix:{egress}")
    assert relay.launch == p.request.launch_id  # the host half names it on every connection
    assert p.env["HTTPS_PROXY"] == "http://127.0.0.1:3128"
    # Its directory is hidden in the launch: only the relay reaches the proxy.
    where = str(egress.parent)
    assert p.argv[p.argv.index(where) - 1] == "--tmpfs"
