"""The supervisor's and the integrator's configuration files ``agentc up`` writes.

Both are ordinary configuration files of those programs (docs/supervisor.md,
docs/integrator.md), so what ``up`` runs is what an operator could run by hand. The whole state
directory is masked inside launches and checks, so no agent reads another role's credential.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from agentc.core.roles import CLAUDE_TOOLS, claude_settings
from agentc.files import write_atomic
from agentc.files.toml import dump_toml
from agentc.up.gateway import INNER, GatewaySetup
from agentc.up.layout import Layout

EXAMPLE_AGENT = Path(__file__).with_name("example_agent.py")


def reviews_by_agents(harness: str) -> str | None:
    """Why the loop takes no reviews with this harness here (None: it does).

    A reviewer's candidate shell is a sandbox nested in the reviewer's, which bwrap cannot
    start when the launcher is root; Codex and Pi have no hook to confine a reviewer's commands
    (docs/security.md).
    """
    if os.geteuid() == 0:
        return "agentc up runs as root, where the reviewer's nested candidate sandbox cannot start"
    if harness in ("codex", "pi"):
        return f"{harness} cannot confine a reviewer's commands"
    return None


def harness_value(harness: str) -> str:
    """``supervisor.toml``'s harness for ``--harness`` (``example``: the bundled agent)."""
    return f"command:{EXAMPLE_AGENT}" if harness == "example" else harness


def write_supervisor(
    layout: Layout,
    record: dict[str, Any],
    origin: str,
    harness: str,
    gateway: GatewaySetup | None = None,
    egress: tuple[str, Path] | None = None,
) -> None:
    """``supervisor.toml``; ``egress``: the proxy's address inside launches and its socket."""
    root = layout.root.resolve()
    project = record["project_id"]
    agent = harness_value(harness)
    top: dict[str, Any] = {
        "mode": "personal",
        "state_dir": layout.supervisor_state.resolve(),
        "egress_listen": egress[0] if egress else "",
        "gateway_listen": "",
        "coordinator_listen": origin.removeprefix("http://"),
        "masks": [root],
        "launch_logs": layout.launch_logs.resolve(),
    }
    if egress is not None:
        top["egress_socket"] = egress[1]
    health: dict[str, Any] = {}
    if gateway is not None:
        found = shutil.which(harness)
        top.update(
            gateway_listen=INNER,
            gateway_address=gateway.address,
            gateway_control=gateway.control,
            harness_paths={harness: found} if found else {},
        )
        health = {"ledger": gateway.ledger, "vendors": gateway.vendors}
    tables: dict[tuple[str, ...], dict[str, Any]] = {
        (): top,
        ("run",): {
            "poll_seconds": 2,
            "harness": agent,
            "reviewer": reviews_by_agents(harness) is None,
            "reviewer_harness": agent,
            "allow_insecure_loopback": True,
            "min_free_mib": 512,
            "drain_seconds": 10,
            # The attention checks read the heartbeat (docs/attention.md): every 5 s during a
            # launch, so a stale one means a stopped loop, not a long launch.
            "heartbeat_seconds": 5,
            "branch": record["branch"],
        },
        ("run", "binding"): {
            "service_url": origin,
            "project_id": project,
            "credential_file": layout.credential("implementer").resolve(),
        },
        ("run", "reviewer_binding"): {"credential_file": layout.credential("reviewer").resolve()},
        ("setup", project): {"repository_url": str(layout.remote.resolve())},
    }
    if record.get("quiet_hours"):
        health["quiet_hours"] = record["quiet_hours"]
    if record.get("agents"):  # else the loop derives it from the machine
        tables[("run",)]["launches"] = record["agents"]
    if health:
        tables[("health",)] = health
    if harness == "claude":
        _claude_settings(layout)
    write_atomic(layout.supervisor_config, dump_toml(tables), mode=0o600)


def _claude_settings(layout: Layout) -> None:
    for role in CLAUDE_TOOLS:
        for private in (layout.supervisor_state, layout.supervisor_state / role):
            private.mkdir(mode=0o700, exist_ok=True)
        folder = layout.supervisor_state / role / "claude-config"
        folder.mkdir(mode=0o755, exist_ok=True)
        path = folder / "settings.json"
        if not path.exists():
            write_atomic(path, claude_settings(role).encode(), mode=0o644)


def write_integrator(layout: Layout, record: dict[str, Any], origin: str) -> None:
    from agentc.up.bootstrap import check_names

    root = layout.root.resolve()
    tables: dict[tuple[str, ...], dict[str, Any]] = {
        (): {
            "origin": origin,
            "project_id": record["project_id"],
            "credential_file": layout.credential("integrator").resolve(),
            "allow_insecure_loopback": True,
            "remote": str(layout.remote.resolve()),
            "target_branch": record["branch"],
            "merge_policy": "rebase",
            "work_dir": layout.integrator_state.resolve(),
            "poll_seconds": 2,
            "masks": [root],
            "signing_key": layout.signing.resolve() / "integrator-key",
        }
    }
    for name, command in zip(check_names(record["checks"]), record["checks"], strict=True):
        tables[("checks", name)] = {"argv": ["/bin/sh", "-c", command]}
    write_atomic(layout.integrator_config, dump_toml(tables), mode=0o600)


def write_attention(
    layout: Layout,
    record: dict[str, Any],
    origin: str,
    harness: str,
    gateway: GatewaySetup | None = None,
) -> None:
    """``attention.toml``: agentc-attention for this machine (docs/attention.md). Pages go to
    ``logs/pages.jsonl`` (and the console shows the digest); the checks read the loop's
    heartbeat, the integrator's reports and the egress proxy's log; the canary runs in the
    project itself (shared-project mode) with the harness up runs. ``record["schedule"]``
    may set the built-in scheduler's intervals."""
    root = layout.root.resolve()
    ledgers = [layout.supervisor_state.resolve() / "loop" / "harness-ledger.jsonl"]
    if gateway is not None:
        ledgers.insert(0, gateway.ledger)
    tables: dict[tuple[str, ...], dict[str, Any]] = {
        (): {
            "origin": origin,
            "project_id": record["project_id"],
            "token_file": layout.credential("attention").resolve(),
            "allow_insecure_loopback": True,
            "state_dir": layout.attention_state.resolve(),
        },
        ("log",): {"path": root / "logs" / "pages.jsonl"},
        ("checks",): {
            "heartbeat": layout.supervisor_state.resolve() / "loop" / "heartbeat.json",
            "integrator_reports": layout.integrator_state.resolve() / "reports.jsonl",
            "egress_log": root / "logs" / "egress.jsonl",
        },
        ("canary",): {
            "harnesses": [harness_value(harness)],
            "host": "agentc-up",
            "ledgers": ledgers,
        },
        ("schedule",): dict(record.get("schedule") or {}),
    }
    write_atomic(layout.attention_config, dump_toml(tables), mode=0o600)
