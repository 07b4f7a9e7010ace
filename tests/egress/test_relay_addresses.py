"""Relay address rules: what the relay can carry faithfully, and everything it refuses."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from agentc.core.errors import ConfigError, SupervisorError
from agentc.egress import netns_relay_command
from agentc.egress.addresses import (
    LoopbackAddress,
    RelayAddressError,
    UnixTarget,
    endpoint,
    parse_host_target,
    parse_loopback_address,
    parse_relay_spec,
    url_relay_address,
)
from agentc.egress.host_relay import start_host_relays
from agentc.supervisor.config import SupervisorConfig, load_config
from agentc.supervisor.launch.plan import plan
from agentc.supervisor.launch.request import LaunchRequest

ACCEPTED_ADDRESSES = {
    "127.0.0.1:3128": LoopbackAddress("127.0.0.1", 3128),
    "127.0.0.1:1024": LoopbackAddress("127.0.0.1", 1024),
    "127.0.0.1:65535": LoopbackAddress("127.0.0.1", 65535),
    "127.10.20.30:18080": LoopbackAddress("127.10.20.30", 18080),
}

REFUSED_ADDRESSES = {
    "user@127.0.0.1:3128": "userinfo",
    "user:pw@127.0.0.1:3128": "userinfo",
    "[::1]:3128": "IPv6",
    "::1:3128": "IPv6",
    "[::ffff:127.0.0.1]:3128": "IPv6",
    "127.1:3128": "canonical dotted-quad",
    "127.0.1:3128": "canonical dotted-quad",
    "2130706433:3128": "canonical dotted-quad",
    "0x7f.0.0.1:3128": "canonical dotted-quad",
    "0177.0.0.1:3128": "canonical dotted-quad",
    "127.000.0.1:3128": "canonical dotted-quad",
    "127.0.0.256:3128": "canonical dotted-quad",
    "localhost:3128": "canonical dotted-quad",
    " 127.0.0.1:3128": "canonical dotted-quad",
    "10.0.0.1:3128": "not a loopback address",
    "0.0.0.0:3128": "not a loopback address",
    "192.168.1.1:3128": "not a loopback address",
    "127.0.0.0:3128": "not a loopback address",
    "127.255.255.255:3128": "not a loopback address",
    "127.0.0.1": "no port",
    "127.0.0.1:": "not a decimal port",
    "127.0.0.1:0": "not a decimal port",
    "127.0.0.1:80": "privileged",
    "127.0.0.1:443": "privileged",
    "127.0.0.1:1023": "privileged",
    "127.0.0.1:65536": "not a decimal port",
    "127.0.0.1:03128": "not a decimal port",
    "127.0.0.1:+3128": "not a decimal port",
    "127.0.0.1:3128 ": "not a decimal port",
    "127.0.0.1:٣١٢٨": "not a decimal port",
}


@pytest.mark.parametrize(("text", "expected"), ACCEPTED_ADDRESSES.items())
def test_loopback_address_accepted(text: str, expected: LoopbackAddress) -> None:
    assert parse_loopback_address(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize(("text", "why"), REFUSED_ADDRESSES.items())
def test_loopback_address_refused(text: str, why: str) -> None:
    with pytest.raises(RelayAddressError, match=why):
        parse_loopback_address(text)


def test_relay_error_is_a_supervisor_error() -> None:
    assert issubclass(RelayAddressError, SupervisorError)


ACCEPTED_URLS = {
    "http://127.0.0.1:8080": LoopbackAddress("127.0.0.1", 8080),
    "https://127.0.0.1:8443/path?q=1#f": LoopbackAddress("127.0.0.1", 8443),
    "HTTP://LOCALHOST:8080/": LoopbackAddress("127.0.0.1", 8080),
    "http://localhost.:8080": LoopbackAddress("127.0.0.1", 8080),
    "http://staging.localhost:18080": LoopbackAddress("127.0.0.1", 18080),
    "http://127.0.0.1.:8080": LoopbackAddress("127.0.0.1", 8080),
    "http://127.4.5.6:2000": LoopbackAddress("127.4.5.6", 2000),
    # Non-loopback hosts get no relay endpoint: they go through the egress proxy.
    "https://agents.example.com": None,
    "https://agents.example.com:8443/x": None,
    "https://10.1.2.3": None,
    "http://93.184.216.34:80": None,
}

REFUSED_URLS = {
    "127.0.0.1:8080": "http:// or https://",
    "//127.0.0.1:8080": "http:// or https://",
    "ftp://127.0.0.1:8080": "http:// or https://",
    "http://user@127.0.0.1:8080": "userinfo",
    "http://user:pw@localhost:8080": "userinfo",
    "http://127.0.0.1:80@example.com/": "userinfo",
    "https://user@example.com": "userinfo",
    "http://[::1]:8080": "IPv6",
    "http://[::ffff:127.0.0.1]:8080": "IPv6",
    "https://[2001:db8::1]/": "IPv6",
    "http://127.1:8080": "short or non-decimal",
    "http://127.0.1:8080": "short or non-decimal",
    "http://2130706433:8080": "short or non-decimal",
    "http://0x7f.0.0.1:8080": "short or non-decimal",
    "http://0x7f000001:8080": "short or non-decimal",
    "http://0177.0.0.1:8080": "short or non-decimal",
    "http://017700000001:8080": "short or non-decimal",
    "http://0.0.0.0:8080": "0.0.0.0/8",
    "http://0:8080": "short or non-decimal",
    "http://0.1.2.3:8080": "0.0.0.0/8",
    "http://127.0.0.1": "default port",
    "https://localhost/": "default port",
    "http://127.0.0.1:0": "invalid port",
    "http://127.0.0.1:80": "privileged",
    "https://127.0.0.1:443": "privileged",
    "http://localhost:1023": "privileged",
    "http://127.0.0.1:99999": "not a decimal port",
    "http://127.0.0.1:8080x": "invalid port",
    "http://127%2e0.0.1:8080": "malformed host",
    "http://:8080": "malformed host",
    "http://lоcalhost:8080": "malformed host",  # Cyrillic o
    "http://127.0.0.1\\@evil.example:8080": "backslash",
    "http://127.0.0.1:8080\\x": "backslash",
    "http://127.0.0.1 :8080": "whitespace",
    "http://127.0.0.1:8080\n": "control character",
}


@pytest.mark.parametrize(("url", "expected"), ACCEPTED_URLS.items())
def test_url_relay_address_accepted(url: str, expected: LoopbackAddress | None) -> None:
    assert url_relay_address(url) == expected


@pytest.mark.parametrize(("url", "why"), REFUSED_URLS.items())
def test_url_relay_address_refused(url: str, why: str) -> None:
    with pytest.raises(RelayAddressError, match=why):
        url_relay_address(url, what="verification url")


def test_refusal_names_the_setting() -> None:
    with pytest.raises(RelayAddressError, match="^egress_listen: "):
        parse_loopback_address("127.1:3128", what="egress_listen")


def test_relay_spec() -> None:
    spec = parse_relay_spec("127.0.0.1:3128=/run/x/net/proxy.sock")
    assert spec.listen == LoopbackAddress("127.0.0.1", 3128)
    assert spec.socket == Path("/run/x/net/proxy.sock")
    assert str(spec) == "127.0.0.1:3128=/run/x/net/proxy.sock"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("127.0.0.1:3128", "expected 127.0.0.1:PORT=/path"),
        ("127.0.0.1:3128=net/proxy.sock", "not absolute"),
        ("127.0.0.1:3128=", "not absolute"),
        ("127.0.0.1:3128=/" + "a" * 107, "longer than 107 bytes"),
        ("127.0.0.1:3128=/a\0b", "NUL"),
        ("127.1:3128=/run/p.sock", "canonical dotted-quad"),
        ("127.0.0.1:443=/run/p.sock", "privileged"),
    ],
)
def test_relay_spec_refused(text: str, why: str) -> None:
    with pytest.raises(RelayAddressError, match=why):
        parse_relay_spec(text)


def test_endpoint() -> None:
    e = endpoint("proxy", "127.0.0.1:3128")
    assert e.listen == e.target == LoopbackAddress("127.0.0.1", 3128)
    e = endpoint("gateway", "127.0.0.1:4000", "127.0.0.1:41234")
    assert e.target == LoopbackAddress("127.0.0.1", 41234)
    for bad in ("", "Proxy", "../x", "a/b", "x" * 40):
        with pytest.raises(RelayAddressError, match="endpoint name"):
            endpoint(bad, "127.0.0.1:3128")
    with pytest.raises(RelayAddressError, match="not a loopback address"):
        endpoint("gateway", "127.0.0.1:4000", "10.0.0.1:4000")


# Host targets: a loopback address or a Unix socket ------------------------------------------


def test_host_target_unix_socket() -> None:
    target = UnixTarget(Path("/run/agentc/gateway.sock"))
    assert parse_host_target("unix:/run/agentc/gateway.sock") == target
    assert parse_host_target(Path("/run/agentc/gateway.sock")) == target
    assert str(target) == "unix:/run/agentc/gateway.sock"
    assert parse_host_target("127.0.0.1:8788") == LoopbackAddress("127.0.0.1", 8788)
    e = endpoint("gateway", "127.0.0.1:8788", "unix:/run/agentc/gateway.sock")
    assert (e.listen, e.target) == (LoopbackAddress("127.0.0.1", 8788), target)
    assert endpoint("gateway", "127.0.0.1:8788", Path("/run/agentc/gateway.sock")) == e


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("unix:run/gateway.sock", "not absolute"),
        ("unix:", "not absolute"),
        (Path("gateway.sock"), "not absolute"),
        ("unix:/" + "a" * 107, "longer than 107 bytes"),
        ("unix:/run/a\0b.sock", "NUL"),
        ("unix:/run/../etc/gateway.sock", "normal form"),
        ("unix:/run/./gateway.sock", "normal form"),
        ("unix:/run/agentc/", "normal form"),
        ("unix://run/gateway.sock", "normal form"),
        ("unix:/", "normal form"),
        ("UNIX:/run/gateway.sock", "canonical dotted-quad"),
        ("/run/gateway.sock", "write a Unix socket target as unix:/run/gateway.sock"),
        ("unix:127.0.0.1:8788", "not absolute"),
    ],
)
def test_host_target_refused(target: str | Path, why: str) -> None:
    with pytest.raises(RelayAddressError, match=why):
        endpoint("gateway", "127.0.0.1:8788", target)


def test_start_host_relays_takes_unix_targets(tmp_path: Path) -> None:
    # Nothing needs to listen yet: the socket is checked when a connection is relayed.
    run = Path(tempfile.mkdtemp(prefix="agentc-t-"))
    try:
        host = start_host_relays(run, {"gateway": ("127.0.0.1:8788", tmp_path / "gw.sock")})
        try:
            assert host.endpoints[0].target == UnixTarget(tmp_path / "gw.sock")
        finally:
            host.close()
    finally:
        shutil.rmtree(run)


# The launch's gateway relay on the gateway's Unix socket ------------------------------------


def test_config_gateway_address_may_be_a_unix_socket(tmp_path: Path) -> None:
    config = SupervisorConfig(gateway_address="unix:/run/agentc/gateway.sock")
    assert config.gateway_target() == "unix:/run/agentc/gateway.sock"
    for bad, why in [
        ("unix:run/gateway.sock", "not absolute"),
        ("unix:/run/../gateway.sock", "not in normal form"),
        ("unix:/" + "a" * 107, "107 bytes"),
        ("127.1:8788", "IPv4"),
    ]:
        path = tmp_path / "supervisor.toml"
        path.write_text(f'gateway_address = "{bad}"\n')
        with pytest.raises(ConfigError, match=why):
            load_config(path)
    # Only the gateway's host side may be a socket: the harness still needs a loopback port.
    with pytest.raises(ValueError, match="IPv4 loopback"):
        SupervisorConfig(gateway_listen="unix:/run/agentc/gateway.sock")


@pytest.mark.root  # the kit's tree is root's
def test_launch_plan_relays_the_gateway_to_its_unix_socket() -> None:
    from tests.supervisor.kit import cleanup, make_kit

    root = Path(tempfile.mkdtemp(prefix="agc-relay-"))  # $RUN/net/*.sock must fit sun_path
    try:
        (root / "gw").mkdir()
        (root / "gws").mkdir()
        gateway_sock = root / "gws" / "gateway.sock"
        kit = make_kit(
            root / "kit",
            gateway_listen="127.0.0.1:18788",
            gateway_address=f"unix:{gateway_sock}",
            gateway_control=str(root / "gw" / "control.sock"),
            token_in_env=False,
        )
        run, clone = kit.new_run("exit 0\n")
        request = LaunchRequest(
            role="implementer", harness="claude", run=run, clone=clone, launch_id=str(uuid.uuid4())
        )
        p = plan(load_config(kit.config), request)
        (gw,) = [r for r in p.description.relays if r.name == "gateway"]
        assert (gw.address, gw.target) == ("127.0.0.1:18788", f"unix:{gateway_sock}")
        assert p.gateway is not None and p.gateway.base_url == "http://127.0.0.1:18788"
        i = p.argv.index("netns-relay")
        assert p.argv[i + 1 : i + 3] == ["--relay", f"127.0.0.1:18788={p.layout.net}/gateway.sock"]
        # The host half the launch builds connects to the socket, not to a port.
        (built,) = [endpoint(r.name, r.address, r.target) for r in [gw]]
        assert built.target == UnixTarget(gateway_sock)
        # A Unix socket ignores network namespaces: its directory is masked in the launch.
        assert ["--tmpfs", str(root / "gws")] in [p.argv[j : j + 2] for j in range(len(p.argv))]
        cleanup(root / "kit")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# Property tests ---------------------------------------------------------------------------

octets = st.integers(0, 255)
ports = st.integers(1, 65535)


@given(b=octets, c=octets, d=octets, port=ports)
def test_property_canonical_loopback(b: int, c: int, d: int, port: int) -> None:
    text = f"127.{b}.{c}.{d}:{port}"
    edge = (b, c, d) in ((0, 0, 0), (255, 255, 255))
    if port < 1024 or edge:
        with pytest.raises(RelayAddressError):
            parse_loopback_address(text)
    else:
        assert str(parse_loopback_address(text)) == text


@given(a=octets.filter(lambda a: a != 127), b=octets, c=octets, d=octets, port=ports)
def test_property_non_loopback_refused(a: int, b: int, c: int, d: int, port: int) -> None:
    with pytest.raises(RelayAddressError):
        parse_loopback_address(f"{a}.{b}.{c}.{d}:{port}")


@given(value=st.integers(0, 2**32 - 1), port=st.integers(1024, 65535))
def test_property_integer_and_hex_ipv4_refused(value: int, port: int) -> None:
    for host in (str(value), hex(value)):
        with pytest.raises(RelayAddressError):
            parse_loopback_address(f"{host}:{port}")
        with pytest.raises(RelayAddressError):
            url_relay_address(f"http://{host}:{port}/")


@given(user=st.text(min_size=0, max_size=10), port=st.integers(1024, 65535))
def test_property_userinfo_always_refused(user: str, port: int) -> None:
    with pytest.raises(RelayAddressError):
        parse_loopback_address(f"{user}@127.0.0.1:{port}")
    with pytest.raises(RelayAddressError):
        url_relay_address(f"http://{user}@127.0.0.1:{port}/")


@given(text=st.text(max_size=40))
def test_property_never_crashes(text: str) -> None:
    """Arbitrary input either parses to a loopback address or raises RelayAddressError."""
    for parse in (parse_loopback_address, url_relay_address, parse_relay_spec):
        try:
            result = parse(text)
        except RelayAddressError:
            continue
        if isinstance(result, LoopbackAddress):
            assert result.host.startswith("127.") and result.port >= 1024


# The CLI refuses bad relays with exit 2, a clear message, and no traceback ------------------


@pytest.mark.parametrize(
    ("arg", "why"),
    [
        ("user@127.0.0.1:3128=/run/p.sock", "userinfo"),
        ("[::1]:3128=/run/p.sock", "IPv6"),
        ("127.1:3128=/run/p.sock", "canonical dotted-quad"),
        ("127.0.0.1:80=/run/p.sock", "privileged"),
        ("10.0.0.1:3128=/run/p.sock", "not a loopback address"),
        ("127.0.0.1:3128", "expected 127.0.0.1:PORT=/path"),
        ("127.0.0.1:3128=rel.sock", "not absolute"),
    ],
)
def test_cli_refuses_bad_relay(arg: str, why: str) -> None:
    result = CliRunner().invoke(netns_relay_command.command, ["--listen", arg, "--", "/bin/true"])
    assert result.exit_code == 2, result.output
    assert why in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_cli_refuses_duplicate_listen_and_missing_command() -> None:
    runner = CliRunner()
    dup = ["--listen", "127.0.0.1:3128=/a.sock", "--relay", "127.0.0.1:3128=/b.sock"]
    result = runner.invoke(netns_relay_command.command, [*dup, "--", "/bin/true"])
    assert result.exit_code == 2
    assert "same address" in result.output
    result = runner.invoke(netns_relay_command.command, ["--listen", "127.0.0.1:3128=/a.sock"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_the_plain_relay_line_is_read_without_click() -> None:
    """The sandbox's own ``netns-relay`` line is parsed by hand (every relayed launch starts
    with it); anything unusual is left to the click command, which names the problem."""
    from agentc.egress import netns_relay

    relays, argv = netns_relay.parse_argv(
        ["--relay", "127.0.0.1:3128=/run/p.sock", "--listen=127.0.0.1:4000=/run/q.sock",
         "--", "claude", "-p"]
    ) or ([], [])  # fmt: skip
    assert [str(r.socket) for r in relays] == ["/run/p.sock", "/run/q.sock"]
    assert argv == ["claude", "-p"]
    for unusual in (
        ["--help"],
        ["--relay", "127.0.0.1:3128=/run/p.sock"],  # no command
        ["--relay", "127.0.0.1:3128=/run/p.sock", "--"],
        ["--relay"],
        ["--relay", "127.1:3128=/run/p.sock", "--", "x"],  # a bad address
        ["--relay", "127.0.0.1:3128=/a.sock", "--relay", "127.0.0.1:3128=/b.sock", "--", "x"],
        ["-x", "--", "x"],
    ):
        assert netns_relay.parse_argv(unusual) is None, unusual


def test_a_relayed_launch_starts_its_relay_without_click_or_the_configuration() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    line = ["netns-relay", "--relay", f"127.0.0.1:{port}=/nonexistent.sock", "--", "/bin/true"]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentc.supervisor.cli", *line],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    imported = {row.rsplit("|", 1)[-1].strip() for row in done.stderr.splitlines()}
    assert "agentc.egress.netns_relay" in imported
    assert not {"click", "agentc.supervisor.config"} & imported
