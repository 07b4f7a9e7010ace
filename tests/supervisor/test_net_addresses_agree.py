"""One table of addresses, fed to every place that judges one: all must give the same verdict.

`supervisor.toml` once accepted `127.0.0.0:3128`, `127.255.255.255:3128` and `127.0.0.1:03128`
while the relay refused them, so a file that loaded failed at launch time. Now the config, the
relay's two halves and the egress proxy's socket all apply `agentc.egress.addresses`;
this test
keeps them agreeing, and pins where `agentc.core.addresses.is_loopback_host` (a host, any
notation) deliberately differs from a relay address (canonical IPv4 literal, usable host).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from agentc.core.addresses import is_loopback_host
from agentc.core.errors import ConfigError
from agentc.egress import netns_relay_command
from agentc.egress.addresses import (
    RelayAddressError,
    endpoint,
    parse_host_target,
    parse_loopback_address,
    parse_relay_spec,
)
from agentc.supervisor.config import SupervisorConfig, load_config


class Row(NamedTuple):
    text: str
    listen: bool  # a loopback address the relay can listen on
    target: bool  # a host target: such an address, or a Unix socket `unix:/abs/path`
    loopback_host: bool | None  # is_loopback_host(the host part), where that is meaningful


def ok(text: str) -> Row:
    return Row(text, True, True, True)


def refused(text: str, loopback_host: bool | None = None) -> Row:
    return Row(text, False, False, loopback_host)


def socket_target(text: str) -> Row:
    return Row(text, False, True, None)


TABLE = [
    ok("127.0.0.1:3128"),
    ok("127.0.0.1:1024"),
    ok("127.0.0.1:65535"),
    ok("127.0.0.2:8788"),
    ok("127.10.20.30:18080"),
    ok("127.255.255.254:3128"),
    # The bug: the config accepted these three, the relay refused them.
    refused("127.0.0.0:3128", loopback_host=True),  # the network address
    refused("127.255.255.255:3128", loopback_host=True),  # the broadcast address
    refused("127.0.0.1:03128", loopback_host=True),  # a leading zero in the port
    # Not IPv4 loopback.
    refused("10.0.0.1:3128", loopback_host=False),
    refused("0.0.0.0:3128", loopback_host=False),
    refused("192.168.1.1:3128", loopback_host=False),
    # A loopback host, but not as a canonical IPv4 literal: the relay never guesses.
    refused("localhost:3128", loopback_host=True),
    refused("[::1]:3128", loopback_host=True),
    refused("::1:3128"),
    refused("[::ffff:127.0.0.1]:3128"),
    refused("127.1:3128"),
    refused("127.0.1:3128"),
    refused("2130706433:3128"),
    refused("0x7f.0.0.1:3128"),
    refused("0177.0.0.1:3128"),
    refused("127.000.0.1:3128"),
    refused("127.0.0.256:3128"),
    refused(" 127.0.0.1:3128"),
    # Userinfo.
    refused("user@127.0.0.1:3128"),
    refused("user:pw@127.0.0.1:3128"),
    refused("@127.0.0.1:3128"),
    # Port edges.
    refused("127.0.0.1", loopback_host=True),
    refused("127.0.0.1:"),
    refused("127.0.0.1:0"),
    refused("127.0.0.1:80"),
    refused("127.0.0.1:1023"),
    refused("127.0.0.1:65536"),
    refused("127.0.0.1:99999"),
    refused("127.0.0.1:+3128"),
    refused("127.0.0.1:3128 "),
    refused("127.0.0.1:٣١٢٨"),
    # Unix sockets: a host target only, never a listen address.
    socket_target("unix:/run/agentc/gateway.sock"),
    socket_target("unix:/" + "a" * 106),
    # Longer than sun_path: reached through an O_PATH descriptor, so only the name must fit.
    socket_target("unix:/" + "d" * 120 + "/proxy.sock"),
    refused("unix:/" + "a" * 107),
    refused("unix:run/gateway.sock"),
    refused("unix:"),
    refused("unix:/"),
    refused("unix:/run/../etc/gateway.sock"),
    refused("unix:/run/./gateway.sock"),
    refused("unix:/run/agentc/"),
    refused("unix://run/gateway.sock"),
    refused("unix:/run/a\0b.sock"),
    refused("unix:127.0.0.1:8788"),
    refused("UNIX:/run/gateway.sock"),
    refused("/run/gateway.sock"),
]


def row_id(row: Row) -> str:
    return repr(row.text) if len(row.text) < 40 else f"{row.text[:12]!r}...({len(row.text)})"


IDS = [row_id(row) for row in TABLE]
LISTEN_KEYS = ("egress_listen", "coordinator_listen", "gateway_listen")


def accepts(parse: object, *args: object) -> bool:
    assert callable(parse)
    try:
        parse(*args)
    except RelayAddressError:
        return False
    return True


def config_accepts(tmp_path: Path, key: str, text: str, kind: type = str) -> bool:
    path = tmp_path / f"{key}.toml"
    path.write_text(f"{key} = {json.dumps(text)}\n", encoding="utf-8")
    try:
        config = load_config(path)
    except ConfigError as exc:
        assert f": {key}: " in str(exc)  # the problem names its key
        return False
    assert getattr(config, key) == kind(text)  # carried as written
    return True


def keyword_accepts(key: str, text: str) -> bool:
    try:
        SupervisorConfig(**{key: text})  # type: ignore[arg-type]  # each key is a str setting
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("row", TABLE, ids=IDS)
def test_every_caller_gives_the_same_verdict(tmp_path: Path, row: Row) -> None:
    text = row.text
    listen = {
        "relay address": accepts(parse_loopback_address, text),
        "namespace relay": accepts(parse_relay_spec, f"{text}=/run/agentc/net/proxy.sock"),
        "host relay endpoint": accepts(endpoint, "proxy", text),
        **{f"config {key}": config_accepts(tmp_path, key, text) for key in LISTEN_KEYS},
        **{f"keyword {key}": keyword_accepts(key, text) for key in LISTEN_KEYS},
    }
    target = {
        "host target": accepts(parse_host_target, text),
        "host relay target": accepts(endpoint, "gateway", "127.0.0.1:8788", text),
        "config gateway_address": config_accepts(tmp_path, "gateway_address", text),
        "keyword gateway_address": keyword_accepts("gateway_address", text),
    }
    if text.startswith("unix:"):  # the egress proxy's socket is written as a bare path
        bare = text.removeprefix("unix:")
        target["config egress_socket"] = config_accepts(tmp_path, "egress_socket", bare, Path)
    assert listen == dict.fromkeys(listen, row.listen)
    assert target == dict.fromkeys(target, row.target)


@pytest.mark.parametrize("row", [r for r in TABLE if not r.listen], ids=row_id)
def test_the_relay_command_refuses_what_the_rules_refuse(row: Row) -> None:
    result = CliRunner().invoke(
        netns_relay_command.command, ["--listen", f"{row.text}=/run/p.sock", "--", "/bin/true"]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("row", [r for r in TABLE if r.loopback_host is not None], ids=row_id)
def test_the_core_loopback_rule_where_it_is_meaningful(row: Row) -> None:
    """A relay address's host is always a loopback host for core; core alone also allows names,
    IPv6 and 127.0.0.0/8's network and broadcast addresses, which a relay cannot carry."""
    host = row.text.rpartition(":")[0] if ":" in row.text else row.text
    assert is_loopback_host(host) is row.loopback_host
    if row.listen:
        assert row.loopback_host
