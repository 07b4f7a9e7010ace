"""The updater's test host: set up for real (accounts, layout) under a throwaway root, a release
index served over loopback HTTPS with a throwaway certificate, releases published into it with
``agentc-host release`` and signed with a throwaway ssh key, the first release installed by the
updater itself, and the host's egress proxy and loop running as cron would run them (``agentc-host
service``), the loop bound to a real coordinator."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agentc.host.servicectl import Cron
from agentc.host.settings import HostSettings
from tests.client.kit import make_clone, write_credentials
from tests.host.kit import host
from tests.host.real import PATHS, new_names, new_root, remove
from tests.host.wheels import agentc_wheel
from tests.kit.live import LiveServer
from tests.supervisor.loop.kit import HANGING_AGENT

CLAUDE = '#!/bin/sh\necho "{version} (Claude Code)"\n'


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def https_index(folder: Path, certs: Path) -> Iterator[tuple[str, Path]]:
    """``folder`` served on 127.0.0.1 over HTTPS with a throwaway self-signed certificate."""
    cert, key = certs / "cert.pem", certs / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    handler = functools.partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


def ssh_key(path: Path, comment: str) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True, capture_output=True,
    )  # fmt: skip
    return Path(f"{path}.pub").read_text().strip()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class UpdateHost:
    root: Path
    names: dict[str, str]
    config: Path
    index: Path
    url: str
    cert: Path
    key: Path
    other_key: Path
    deps: Path
    work: Path
    update_keys: dict[str, str] = field(default_factory=dict)

    @property
    def settings(self) -> HostSettings:
        return HostSettings.load(self.config)

    def path(self, host_path: str) -> Path:
        return self.root / host_path.lstrip("/")

    @property
    def manager(self) -> Cron:
        return Cron(self.settings, self.config)

    def write_settings(self, **update: str) -> None:
        """host.toml, with these ``[update]`` keys (TOML values) over the kit's."""
        keys = {
            "index": json.dumps(self.url), "ca_file": json.dumps(str(self.cert)),
            "signers": json.dumps(str(self.path("/etc/agentc/update-signers"))),
            "settle_seconds": "1", "poll_seconds": "0.5", "drain_timeout_minutes": "3",
            "canary_harnesses": "[]", **self.update_keys, **update,
        }  # fmt: skip
        lines = [f'{key} = "{self.root}{path}"' for key, path in PATHS]
        lines += ['init = "cron"', "[accounts]"]
        lines += [f'{key} = "{name}"' for key, name in self.names.items()]
        lines += ["[update]", *(f"{k} = {v}" for k, v in keys.items())]
        self.config.write_text("\n".join(lines) + "\n")

    def publish(
        self,
        version: str,
        patch: Callable[[Path], None] | None = None,
        key: Path | None = None,
        harnesses: tuple[str, ...] = (),
        wheel: Path | None = None,
    ) -> Path:
        """A release of this checkout as ``version`` (``patch`` applied to a copy), in the index."""
        if wheel is None:
            out = self.work / f"wheel-{version}"
            out.mkdir()
            wheel = agentc_wheel(out, version, patch)
        args = ["release", "--index", str(self.index), "--wheel", str(wheel),
                "--dependencies", str(self.deps), "--key", str(key or self.key)]  # fmt: skip
        for item in harnesses:
            args += ["--harness", item]
        done = host(self.config, *args)
        assert done.returncode == 0, done.stderr
        return self.index / version

    def update(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        """The live release's ``agentc-host update``."""
        return subprocess.run(
            [str(self.settings.bin_dir / "agentc-host"), "--config", str(self.config), "update",
             *args],
            capture_output=True, text=True, timeout=timeout, cwd="/",
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        )  # fmt: skip

    def live(self) -> str:
        return os.readlink(self.settings.current).removeprefix("releases/")

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(
            self.path("/var/lib/agentc/update-state.json").read_text()
        )
        return data

    def pages(self) -> list[dict[str, Any]]:
        path = self.root / "pages.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def results(self) -> list[dict[str, Any]]:
        path = self.path("/var/lib/agentc/update.jsonl")
        return [json.loads(line) for line in path.read_text().splitlines()]

    def loop_release(self) -> str:
        """Which release the running loop's interpreter comes from."""
        [pid] = self.manager.holders("loop")
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()

    def heartbeat(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(
            self.path("/var/lib/agentc/loop/heartbeat.json").read_text()
        )
        return data


def _supervisor_toml(
    up: UpdateHost, live: LiveServer, project: str, origin: Path, agent: Path
) -> None:
    """The person's edits: no gateway (the canary and agents need no model), the loop bound."""
    path = up.path("/etc/agentc/supervisor.toml")
    text = path.read_text()
    top, _, tables = text.partition("\n[push_helper]")
    credential = up.path("/etc/agentc/impl/credentials.toml")
    top += '\ngateway_listen = ""\n[pinned]\nclaude = "2.1.0"\n'
    tables += (
        f'\n[run]\nharness = "command:{agent}"\npoll_seconds = 1\nheartbeat_seconds = 1\n'
        f"allow_insecure_loopback = true\n"
        f'[run.binding]\nservice_url = "{live.url}"\nproject_id = "{project}"\n'
        f'credential_file = "{credential}"\n'
        f'[setup.{project}]\nrepository_url = "{origin}"\n'
    )
    path.write_text(top + "\n[push_helper]" + tables)


def _attention_toml(up: UpdateHost) -> None:
    token = up.path("/etc/agentc/attention-token")
    token.write_text("attention-token\n")
    os.chmod(token, 0o400)
    up.path("/etc/agentc/attention.toml").write_text(
        f'origin = "http://127.0.0.1:{closed_port()}"\nproject_id = "p"\n'
        f'token_file = "{token}"\nallow_insecure_loopback = true\n'
        f'state_dir = "{up.path("/var/lib/agentc/attention")}"\n'
        f'[log]\npath = "{up.root / "pages.jsonl"}"\n'
        "[canary]\ntimeout_minutes = 1\npoll_seconds = 1\n"
    )


@contextlib.contextmanager
def update_host(
    tmp: Path, deps: Path, first: Path, live: LiveServer, project: str, token: str
) -> Iterator[UpdateHost]:
    root, names = new_root(), new_names()
    index, certs = tmp / "index", tmp / "certs"
    index.mkdir()
    certs.mkdir()
    config = root / "host.toml"
    try:
        with https_index(index, certs) as (url, cert):
            key, other = tmp / "release-key", tmp / "other-key"
            public = ssh_key(key, "release")
            ssh_key(other, "someone else")
            up = UpdateHost(root, names, config, index, url, cert, key, other, deps, tmp)
            up.write_settings()
            done = host(config, "setup")
            assert done.returncode == 0, done.stdout + done.stderr
            signers = up.path("/etc/agentc/update-signers")
            signers.write_text(f'agentc-release namespaces="agentc-release" {public}\n')
            write_credentials(up.path("/etc/agentc/impl"), live.url, token)
            os.chmod(up.path("/etc/agentc/impl/credentials.toml"), 0o400)
            claude = up.path("/opt/agentc/bin/claude")
            claude.write_text(CLAUDE.format(version="2.1.0"))
            os.chmod(claude, 0o755)  # noqa: S103 - the pinned harness every launch runs
            agent = root / "agent" / "agent.sh"
            agent.parent.mkdir(mode=0o755)
            agent.write_text(HANGING_AGENT)
            os.chmod(agent, 0o755)  # noqa: S103 - the role accounts run it
            origin, _clone = make_clone(tmp / "repo")
            _supervisor_toml(up, live, project, origin, agent)
            _attention_toml(up)
            up.publish("0.1.0", wheel=first)
            done = host(config, "update")  # the first release, by the updater itself
            assert done.returncode == 0, done.stdout + done.stderr
            assert "installed 0.1.0 (the first release)" in done.stdout, done.stdout
            for service in ("egress", "loop"):  # as cron runs them
                up.manager.start(service)
            yield up
    finally:
        with contextlib.suppress(Exception):
            for service in ("loop", "egress"):
                Cron(HostSettings.load(config), config).stop(service, 60)
        remove(config, root, names)
        shutil.rmtree(index, ignore_errors=True)
