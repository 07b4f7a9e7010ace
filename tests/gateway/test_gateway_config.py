"""The gateway's configuration file: the supervisor's settings mechanism, the same keys and
defaults as before, every problem named by its dotted key and the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentc.core.errors import ConfigError
from agentc.gateway.config import GatewayConfig, load_config

MINIMAL = (
    'control_socket = "/run/g/c.sock"\nledger = "/var/l.jsonl"\nvendors = "/var/v.json"\n'
    '[upstreams.claude]\napi = "anthropic"\nbase_url = "https://api.anthropic.com"\n'
    'credential_file = "/etc/agentc/credentials/claude"\n'
)


def test_defaults(tmp_path: Path) -> None:
    file = tmp_path / "gateway.toml"
    file.write_text(MINIMAL)
    config = load_config(file)
    assert (config.host, config.port, config.unix_socket, config.log) == (
        "127.0.0.1",
        8788,
        None,
        None,
    )
    assert (config.exhausted_minutes, config.upstream_timeout_s) == (60, 600.0)
    assert (
        config.cap_limits()
        == GatewayConfig.from_mapping(
            {"control_socket": "/c", "ledger": "/l", "vendors": "/v", "upstreams": {}}
        ).cap_limits()
    )
    assert config.upstreams["claude"].credential_file == Path("/etc/agentc/credentials/claude")
    assert config.prices == {} and config.price_table()


def test_prices_and_caps(tmp_path: Path) -> None:
    file = tmp_path / "gateway.toml"
    file.write_text(
        MINIMAL + '[caps]\nlaunch_usd = 20\n[prices."m-1"]\n'
        "input = 2\noutput = 10.0\ncache_write = 2.5\ncache_read = 0.2\n"
    )
    config = load_config(file)
    assert config.caps.launch_usd == 20.0 and config.caps.day_usd is None
    assert config.price_table()["m-1"].output == 10.0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("typo = 1\n", "typo: unknown setting"),
        ("port = 70000\n", "port: must be <= 65535, got 70000"),
        ("exhausted_minutes = 0\n", "exhausted_minutes: must be >= 1"),
        ("upstream_timeout_s = 0\n", "upstream_timeout_s: must be > 0"),
        ("[caps]\nday_usd = -1\n", "caps.day_usd: must be >= 0"),
        ('[upstreams.codex]\napi = "x"\n', "upstreams.codex.api: must be 'anthropic' or 'openai'"),
        ('[upstreams.codex]\napi = "openai"\n', "upstreams.codex.base_url: required"),
        ("[prices.m]\ninput = 1\n", "prices.m.output: required"),
    ],
)
def test_problems_name_the_file_and_the_key(tmp_path: Path, extra: str, message: str) -> None:
    file = tmp_path / "gateway.toml"
    file.write_text(MINIMAL + extra if extra.startswith("[") else extra + MINIMAL)
    with pytest.raises(ConfigError, match=f"^{file}: .*{message}"):
        load_config(file)


def test_missing_keys_are_reported_together(tmp_path: Path) -> None:
    file = tmp_path / "gateway.toml"
    file.write_text("port = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_config(file)
    for key in ("control_socket", "ledger", "vendors", "upstreams"):
        assert f"{key}: required, but missing" in str(caught.value)
    with pytest.raises(ConfigError, match="the gateway configuration does not exist"):
        load_config(tmp_path / "none.toml")


# --- docs/gateway.md's configuration example: every key, the defaults, loadable ------------


def _example() -> str:
    from tests.kit.settings_doc import DOCS

    page = (DOCS / "gateway.md").read_text(encoding="utf-8")
    section = page.split("## Configuration (`/etc/agentc/gateway.toml`)", 1)[1]
    return section.split("```toml\n", 1)[1].split("```", 1)[0]


def test_the_example_names_every_key_and_shows_the_defaults(tmp_path: Path) -> None:
    import tomllib

    from agentc.gateway.config import (
        BreakersConfig,
        CapsConfig,
        GatewayConfig,
        PriceConfig,
        UpstreamConfig,
        load_config,
    )
    from tests.kit.settings_doc import default, fields

    text = _example()
    written = tmp_path / "gateway.toml"
    written.write_text(text)
    load_config(written)  # the example is a valid file
    keys = set(re.findall(r"(?m)(?:^|# or )([a-z_]+) = ", text))
    for cls in (GatewayConfig, CapsConfig, UpstreamConfig, PriceConfig, BreakersConfig):
        names = set(fields(cls)) - {"caps", "upstreams", "prices", "breakers"}
        assert names <= keys, (cls.__name__, names - keys)
    top = tomllib.loads(text)
    for table, cls in ((top, GatewayConfig), (top["breakers"], BreakersConfig)):
        for name, item in fields(cls).items():
            value = default(item)
            scalar = isinstance(table.get(name), int | float | str)
            if scalar and value not in ("required", None):
                shown = table[name]
                assert shown == value, f"{name}: the example shows {shown!r}, not {value!r}"
