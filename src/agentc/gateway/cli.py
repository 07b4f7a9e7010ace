"""``agentc-supervisor model-gateway``: run the model gateway (``command`` joins the group)."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import click

from agentc.core.errors import AgentcError
from agentc.files.exits import INVALID_INPUT, fail
from agentc.files.options import config_option, default_config
from agentc.gateway.app import Gateway
from agentc.gateway.config import load_config
from agentc.gateway.server import serve_forever


@click.command("model-gateway")
@config_option("gateway")
@click.option(
    "--check", is_flag=True, help="Validate the configuration and credentials, then exit."
)
def command(config_path: Path | None, check: bool) -> None:
    """Hold the real model credentials; forward, meter and cap the launches' model calls."""
    try:
        config = load_config(config_path or default_config("gateway"))
        gateway = Gateway(config, log=_open_log(config.log))
        for name, upstream in config.upstreams.items():
            gateway.credentials.get(upstream.credential_file)
            click.echo(f"upstream {name}: {upstream.api} at {upstream.base_url}: credential ok")
    except AgentcError as exc:
        fail("agentc-supervisor gateway", exc, INVALID_INPUT)
    if check:
        return
    serve_forever(gateway)


def _open_log(path: Path | None) -> TextIO | None:
    if path is None:
        return None
    return path.open("a", encoding="utf-8")
