"""Unix sockets under a long directory (a state kept deep in a home): bound and reached through
the directory's descriptor, so only the socket's name must fit in sun_path; and the kernel's
word on who connected."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from agentc.egress.addresses import (
    RelayAddressError,
    check_socket_path,
    parse_host_target,
    parse_relay_spec,
)
from agentc.files.sockets import MAX_SOCKET_PATH_BYTES, peer_credentials, sun_path


def _deep(tmp_path: Path) -> Path:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    return deep


def test_a_socket_under_a_long_directory_is_bound_and_reached(tmp_path: Path) -> None:
    path = str(_deep(tmp_path) / "coordinator.sock")
    assert len(path) > MAX_SOCKET_PATH_BYTES
    with socket.socket(socket.AF_UNIX) as bare, pytest.raises(OSError):
        bare.bind(path)  # what the relay did before: the kernel refuses the path
    with socket.socket(socket.AF_UNIX) as server:
        with sun_path(path) as short:
            assert short.startswith("/proc/self/fd/") and short.endswith("/coordinator.sock")
            server.bind(short)
        server.listen(1)
        assert Path(path).is_socket()
        with socket.socket(socket.AF_UNIX) as client:
            with sun_path(path) as short:
                client.connect(short)
            peer, _ = server.accept()
            with peer:
                client.sendall(b"ping")
                assert peer.recv(4) == b"ping"


def test_a_short_path_is_used_as_it_is(tmp_path: Path) -> None:
    with sun_path("/run/x.sock") as short:
        assert short == "/run/x.sock"


def test_sockets_reached_through_a_descriptor_may_be_long_but_their_names_must_fit() -> None:
    long_path = "/" + "d" * 120 + "/coordinator.sock"
    check_socket_path(long_path, via_directory=True)
    parse_relay_spec(f"127.0.0.1:3128={long_path}")
    # A relay target (the egress proxy's socket, a gateway's): connected through O_PATH.
    assert str(parse_host_target(f"unix:{long_path}")) == f"unix:{long_path}"
    with pytest.raises(RelayAddressError, match="longer than 107 bytes"):
        check_socket_path(long_path)  # bound or connected to by its whole path
    with pytest.raises(RelayAddressError, match="longer than 107 bytes"):
        check_socket_path(
            "/" + "d" * 60 + "/" + "n" * 90, via_directory=True
        )  # the name cannot fit


def test_peer_credentials_name_the_connecting_process(tmp_path: Path) -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert peer_credentials(left) == (os.getpid(), os.geteuid(), os.getegid())
    with socket.socket() as tcp, pytest.raises(OSError):
        peer_credentials(tcp)  # only a Unix socket has a peer the kernel vouches for
