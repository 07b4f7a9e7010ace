"""Fixtures for the model gateway: a scripted provider behind a gateway, on loopback."""

from __future__ import annotations

import io
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentc.gateway.app import Gateway
from agentc.gateway.config import GatewayConfig
from agentc.gateway.sentinels import Grant
from agentc.testing.gateway import ThreadedGateway
from agentc.testing.provider import ScriptedProvider
from agentc.testing.script import parse_script

REAL_KEY = "sk-ant-REAL-host-only-0123456789abcdef"  # tests repeat it: no conftest imports


@dataclass
class Stack:
    provider: ScriptedProvider
    gateway: Gateway
    server: ThreadedGateway
    log: io.StringIO
    config: GatewayConfig

    @property
    def url(self) -> str:
        return self.server.url

    def issue(self, launch_id: str = "s1", **kw: Any) -> str:
        fields: dict[str, Any] = {"attempt": "a1", "generation": 1, "upstream": "claude"}
        fields.update(kw)
        return self.gateway.registry.issue(Grant(launch_id=launch_id, **fields))

    def ledger_rows(self) -> list[dict[str, Any]]:
        if not self.config.ledger.exists():
            return []
        return [json.loads(line) for line in self.config.ledger.read_text().splitlines()]

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.getvalue().splitlines()]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """An empty git repository for a harness to work in."""
    path = tmp_path / "work"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def credential(tmp_path: Path) -> Path:
    path = tmp_path / "host" / "claude.key"
    path.parent.mkdir(mode=0o700)
    path.write_text(REAL_KEY + "\n")
    os.chmod(path, 0o600)
    return path


MakeStack = Callable[..., Any]


@pytest.fixture
def make_stack(tmp_path: Path, credential: Path) -> Iterator[MakeStack]:
    @contextmanager
    def make(script: dict[str, Any], **config: Any) -> Iterator[Stack]:
        with ScriptedProvider(parse_script(script)) as provider:
            base: dict[str, Any] = {
                "control_socket": tmp_path / "host" / "control.sock",
                "ledger": tmp_path / "host" / "ledger.jsonl",
                "vendors": tmp_path / "host" / "vendors.json",
                "upstreams": {
                    "claude": {
                        "api": "anthropic",
                        "base_url": provider.url,
                        "credential_file": credential,
                    },
                    "codex": {
                        "api": "openai",
                        "base_url": provider.url,
                        "credential_file": credential,
                    },
                },
            }
            base.update(config)
            cfg = GatewayConfig.from_mapping(base)
            log = io.StringIO()
            gateway = Gateway(cfg, log=log)
            with ThreadedGateway(gateway) as server:
                yield Stack(provider, gateway, server, log, cfg)

    yield make
