"""Egress proxy rules as pure functions: public addresses, host names, the allowlist, the
launch line a relay names its launch with."""

from __future__ import annotations

import uuid
from ipaddress import IPv4Address, IPv6Address, ip_address
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentc.egress.addresses import RelayAddressError, endpoint
from agentc.egress.egress import (
    DEFAULT_ALLOW,
    Allowlist,
    EgressConfigError,
    address_refusal,
    is_public_address,
    normalize_host,
    parse_allow_entry,
)
from agentc.egress.egress_policy import launch_line, parse_launch_line
from agentc.egress.host_relay import HostRelay

REFUSED = {
    # IPv4
    "0.0.0.0": "unspecified",
    "0.1.2.3": "unspecified",
    "10.0.0.1": "private",
    "10.255.255.255": "private",
    "100.64.0.1": "cgnat",
    "100.127.255.255": "cgnat",
    "127.0.0.1": "loopback",
    "127.255.255.254": "loopback",
    "169.254.169.254": "link-local",
    "172.16.0.1": "private",
    "172.31.255.255": "private",
    "192.0.0.8": "reserved",
    "192.0.2.1": "documentation",
    "192.88.99.1": "reserved",
    "192.168.1.1": "private",
    "198.18.0.1": "benchmarking",
    "198.51.100.1": "documentation",
    "203.0.113.1": "documentation",
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "240.0.0.1": "reserved",
    "255.255.255.255": "reserved",
    # IPv6
    "::": "unspecified",
    "::1": "loopback",
    "::ffff:127.0.0.1": "ipv4-mapped loopback",
    "::ffff:7f00:1": "ipv4-mapped loopback",
    "::ffff:10.0.0.1": "ipv4-mapped private",
    "::ffff:169.254.169.254": "ipv4-mapped link-local",
    "::ffff:100.64.0.1": "ipv4-mapped cgnat",
    "::ffff:0.0.0.0": "ipv4-mapped unspecified",
    "::127.0.0.1": "ipv4-compatible",
    "::8.8.8.8": "ipv4-compatible",
    "64:ff9b::10.0.0.1": "nat64 private",
    "64:ff9b::127.0.0.1": "nat64 loopback",
    "64:ff9b::169.254.169.254": "nat64 link-local",
    "64:ff9b:1::1": "nat64-local",
    "2002:a00:1::1": "6to4 private",
    "2002:7f00:1::": "6to4 loopback",
    "2002:a9fe:a9fe::1": "6to4 link-local",
    "2001::1": "reserved",  # Teredo
    "2001:db8::1": "documentation",
    "3fff::1": "documentation",
    "100::1": "discard",
    "fc00::1": "unique-local",
    "fd12:3456::1": "unique-local",
    "fe80::1": "link-local",
    "fe80::1%eth0": "scoped",
    "febf::1": "link-local",
    "fec0::1": "site-local",
    "ff02::1": "multicast",
    "ff0e::1": "multicast",
    "4000::1": "reserved",
    "::2": "ipv4-compatible",
}

ALLOWED = [
    "1.1.1.1",
    "8.8.8.8",
    "93.184.216.34",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "169.253.255.255",
    "172.15.255.255",
    "172.32.0.0",
    "192.0.1.1",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2a00:1450:4001::1",
    "::ffff:8.8.8.8",
    "64:ff9b::8.8.8.8",
    "2002:808:808::1",
]


@pytest.mark.parametrize(("text", "why"), REFUSED.items())
def test_refused_addresses(text: str, why: str) -> None:
    ip = ip_address(text)
    assert address_refusal(ip) == why
    assert not is_public_address(ip)


@pytest.mark.parametrize("text", ALLOWED)
def test_public_addresses(text: str) -> None:
    assert address_refusal(ip_address(text)) is None


ipv4 = st.integers(0, 2**32 - 1).map(IPv4Address)


@given(ip=ipv4)
def test_property_v4_never_looser_than_stdlib(ip: IPv4Address) -> None:
    if is_public_address(ip):
        assert ip.is_global and not ip.is_multicast and not ip.is_reserved
    if ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast:
        assert not is_public_address(ip)


@given(ip=ipv4)
def test_property_embedded_v4_judged_by_the_v4(ip: IPv4Address) -> None:
    """v4-mapped, NAT64 and 6to4 forms are refused exactly when their IPv4 address is."""
    v4 = int(ip)
    for v6 in (
        IPv6Address((0xFFFF << 32) | v4),
        IPv6Address((0x0064FF9B << 96) | v4),
        IPv6Address((0x2002 << 112) | (v4 << 80) | 1),
    ):
        assert is_public_address(v6) == is_public_address(ip), v6


@given(bits=st.integers(0, 2**128 - 1))
def test_property_v6_public_only_in_global_unicast_or_nat64(bits: int) -> None:
    ip = IPv6Address(bits)
    if is_public_address(ip):
        assert ip.ipv4_mapped is not None or (bits >> 125) == 1 or (bits >> 32) == 0x64FF9B << 64
        assert not ip.is_loopback and not ip.is_link_local and not ip.is_multicast


NAMES = {
    "GitHub.com": "github.com",
    "github.com.": "github.com",
    "api.github.com": "api.github.com",
    "xn--bcher-kva.example": "xn--bcher-kva.example",
    "a-b.example": "a-b.example",
    "localhost": "localhost",
    "x" * 63 + ".example": "x" * 63 + ".example",
}

NOT_NAMES = [
    "",
    ".",
    "a..b",
    ".github.com",
    "-a.example",
    "a-.example",
    "a_b.example",
    "exa mple.com",
    "bücher.example",
    "user@github.com",
    "github.com:443",
    "x" * 64 + ".example",
    ("a." * 127) + "com",
    # IP literals in any notation
    "1.2.3.4",
    "127.1",
    "2130706433",
    "0x7f.0.0.1",
    "0x7f000001",
    "[::1]",
    "::1",
    "github.com.1",
]


@pytest.mark.parametrize(("text", "expected"), NAMES.items())
def test_normalize_host(text: str, expected: str) -> None:
    assert normalize_host(text) == expected


@pytest.mark.parametrize("text", NOT_NAMES)
def test_normalize_host_refuses(text: str) -> None:
    assert normalize_host(text) is None


def test_default_allowlist() -> None:
    allow = Allowlist.parse(DEFAULT_ALLOW)
    for host in (
        "api.anthropic.com",
        "claude.ai",
        "www.claude.ai",
        "github.com",
        "api.github.com",
        "raw.githubusercontent.com",
        "a.b.githubusercontent.com",
        "index.crates.io",
        "chatgpt.com",
        "ab.chatgpt.com",
    ):
        assert allow.allows(host), host
    for host in (
        "githubusercontent.com",  # `.suffix` means subdomains only
        "evilgithubusercontent.com",
        "github.com.evil.example",
        "evilgithub.com",
        "gist.github.com",
        "anthropic.com",
        "crates.io.evil.example",
        "blocked.invalid",
        "localhost",
    ):
        assert not allow.allows(host), host


def test_allow_entries() -> None:
    assert parse_allow_entry("Agents.Example.com") == "agents.example.com"
    assert parse_allow_entry(".Example.com") == ".example.com"
    allow = Allowlist.parse(["only.example", ".sub.example"])
    assert allow.allows("only.example")
    assert not allow.allows("x.only.example")
    assert allow.allows("x.sub.example")
    assert not allow.allows("sub.example")


@pytest.mark.parametrize(
    "entry",
    ["", ".", "*.github.com", "github.com.", " github.com", "1.2.3.4", "http://x.example", "a..b"],
)
def test_bad_allow_entries(entry: str) -> None:
    with pytest.raises(EgressConfigError, match="allowlist entry"):
        parse_allow_entry(entry)


# The launch line ---------------------------------------------------------------------------


@given(st.uuids())
def test_a_launch_line_names_exactly_its_launch(launch: uuid.UUID) -> None:
    line = launch_line(str(launch))
    assert line == f"agentc-launch {launch}\n".encode()
    assert parse_launch_line(line) == str(launch)


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"agentc-launch \n",
        b"agentc-launch 12345678-1234-1234-1234-123456789abc",  # no newline
        b"agentc-launch 12345678-1234-1234-1234-123456789ABC\n",  # not canonical
        b"agentc-launch 12345678123412341234123456789abc\n",
        b"agentc-launch  12345678-1234-1234-1234-123456789abc\n",
        b"agentc-launch 12345678-1234-1234-1234-123456789abc\r\n",
        b"AGENTC-LAUNCH 12345678-1234-1234-1234-123456789abc\n",
        b"agentc-launch 12345678-1234-1234-1234-123456789abc \n",
        b"CONNECT github.com:443 HTTP/1.1\r\n",
    ],
)
def test_anything_else_names_no_launch(line: bytes) -> None:
    assert parse_launch_line(line) is None


@pytest.mark.parametrize("bad", ["", "x", "12345678-1234-1234-1234-123456789ABC", "a\nb", "é"])
def test_a_relay_refuses_to_name_anything_but_a_launch_id(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="canonical UUID"):
        launch_line(bad)
    with pytest.raises(RelayAddressError, match="relay proxy: a launch id is a canonical UUID"):
        HostRelay(tmp_path / "net", [endpoint("proxy", "127.0.0.1:3128", launch=bad)])
    assert not (tmp_path / "net").exists()  # refused before anything was made
