"""Real launches through the model gateway, for tests: a scripted provider behind a real gateway
(with its control socket) and a launch kit pointed at it (``make_env``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentc.gateway.app import Gateway
from agentc.gateway.config import GatewayConfig
from agentc.testing.gateway import ThreadedGateway
from agentc.testing.provider import ScriptedProvider
from agentc.testing.script import parse_script
from tests.supervisor.kit import HARNESS_BIN, Kit, make_kit

# Split so that no prompt, argv or script holds the whole key: a probe that finds it found
# the credential itself, not our description of it.
KEY_HEAD = "sk-ant-"
KEY_TAIL = "REALHOSTONLY" + uuid.uuid4().hex
REAL_KEY = KEY_HEAD + KEY_TAIL
INNER = "127.0.0.1:18788"  # the gateway's address inside every launch
MODEL = "claude-sonnet-5"


@dataclass
class Env:
    kit: Kit
    provider: ScriptedProvider
    gateway: ThreadedGateway
    config: GatewayConfig
    log: Path

    def ledger(self, session: str) -> list[dict[str, Any]]:
        if not self.config.ledger.exists():
            return []
        rows = [json.loads(x) for x in self.config.ledger.read_text().splitlines()]
        return [r for r in rows if r["session"] == session]

    def launch(
        self, prompt: str, harness: str, *extra: str, timeout: float = 120
    ) -> tuple[subprocess.CompletedProcess[str], Path, Path, str]:
        run, clone = self.kit.new_run(prompt)
        git_init(clone)
        session = str(uuid.uuid4())
        result = self.kit.launch(
            run, clone, f"--harness={harness}", f"--session-id={session}", *extra, timeout=timeout
        )
        return result, run, clone, session


def git_init(clone: Path) -> None:
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    for key, value in (("user.name", "agentc test"), ("user.email", "agent@agentc.invalid")):
        subprocess.run(["git", "-C", str(clone), "config", key, value], check=True)


def program(name: str) -> str:
    program = HARNESS_BIN / name
    assert program.exists(), f"{program} missing: run scripts/setup --dev"
    return str(program)


MakeEnv = Callable[..., Any]


@pytest.fixture
def make_env() -> Iterator[MakeEnv]:
    # A short root: $RUN/net/gateway.sock must fit in a Unix socket address.
    root = Path(tempfile.mkdtemp(prefix="agc-gw-"))
    # The real credential lives in the user's home (masked in personal mode), not under /tmp.
    secret_dir = Path(tempfile.mkdtemp(prefix=".agc-gw-cred-", dir=Path.home()))

    @contextmanager
    def make(
        script: dict[str, Any],
        harness_paths: dict[str, str],
        *,
        launch_logs: Path | None = None,
        **caps: Any,
    ) -> Iterator[Env]:
        """``launch_logs``: the gateway's and the launch's event log directory (none: off)."""
        logs = {"launch_logs": launch_logs} if launch_logs is not None else {}
        credential = secret_dir / "claude.key"
        credential.write_text(REAL_KEY + "\n")
        os.chmod(credential, 0o600)
        host = root / "host"
        host.mkdir(mode=0o700)
        with ScriptedProvider(parse_script(script)) as provider:
            upstream = {"base_url": provider.url, "credential_file": str(credential)}
            config = GatewayConfig.from_mapping(
                {
                    "control_socket": host / "control.sock",
                    "ledger": host / "ledger.jsonl",
                    "vendors": host / "vendors.json",
                    "caps": caps,
                    **logs,
                    "upstreams": {
                        "claude": {"api": "anthropic", **upstream},
                        "codex": {"api": "openai", **upstream},
                    },
                }
            )
            log = host / "gateway.log"
            with (
                log.open("a") as log_file,
                ThreadedGateway(Gateway(config, log=log_file), control=True) as server,
            ):
                deadline = time.monotonic() + 10
                while not config.control_socket.exists():
                    assert time.monotonic() < deadline, "no control socket"
                    time.sleep(0.01)
                mocks = {n: str(root / "kit/bin" / n) for n in ("claude", "codex", "pi")}
                kit = make_kit(
                    root / "kit",
                    harness_paths={**mocks, **harness_paths},
                    gateway_listen=INNER,
                    gateway_address=server.address,
                    gateway_control=str(config.control_socket),
                    token_in_env=False,
                    **{k: str(v) for k, v in logs.items()},
                )
                yield Env(kit, provider, server, config, log)

    try:
        yield make
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(secret_dir, ignore_errors=True)


def stderr_of(run: Path, result: subprocess.CompletedProcess[str]) -> str:
    log = run / "stderr.log"
    return result.stderr + (log.read_text() if log.exists() else "")


def result_line(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    line: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return line


def claude_settings(kit: Kit) -> None:
    """The role's read-only Claude config: allow the tools the script drives (dontAsk mode)."""
    config = kit.role_dir("implementer") / "claude-config"
    config.mkdir(mode=0o755)
    settings = {"permissions": {"allow": ["Bash", "Write", "Edit", "Read"]}}
    (config / "settings.json").write_text(json.dumps(settings))
    os.chmod(config / "settings.json", 0o644)


def refused_after(env: Env, sentinel: str) -> httpx.Response:
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(
        f"{env.gateway.url}/v1/messages",
        json=body,
        headers={"x-api-key": sentinel, "anthropic-version": "2023-06-01"},
        timeout=10,
    )


def sentinel_in(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("ANTHROPIC_API_KEY="):
            return line.split("=", 1)[1]
    raise AssertionError(f"no ANTHROPIC_API_KEY in {path}")
