"""``agentc-host check`` as root on a real host (setup for real, a release built from this
checkout installed): every check passes from inside real launches as each role's account, the
push helper is tried from outside, the dummy tokens it planted are gone afterwards; a layout a
role could change and a dummy token an interrupted check left are FAILs with exit 1."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.host.kit import host, tree
from tests.host.real import RealHost, real_host

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def real(wheelhouse: Path, agentc_010: Path) -> Iterator[RealHost]:
    with real_host(wheelhouse, agentc_010) as made:
        yield made


def test_every_check_passes_from_inside_real_launches(real: RealHost) -> None:
    before = tree(real.root)
    done = real.run("check")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("containment suite: all ") and lines[-1].endswith("checks passed")
    names = real.names
    for role, other in (("implementer", "reviewer"), ("reviewer", "implementer")):
        account = names[role]
        for want in (
            f"PASS {role}: the launch runs as {account}",
            f"PASS {role}: cannot read the {other}'s run",
            f"PASS {role}: cannot read its Claude token inside a launch",
            f"PASS {role}: cannot read the loop's state",
            f"PASS {role}: cannot write the programs' folder",
            f"PASS {role}: cannot add to its protected claude-config",
            f"PASS {role}: cannot reach a listener on host loopback",
            f"PASS {role}: cannot signal its own account's processes outside",
            f"PASS {role}: cannot reach the egress proxy's socket directly",
        ):
            assert want in lines, (want, done.stdout)
    for want in (
        "PASS implementer: reaches its own push helper",
        "PASS implementer: sees no other launch's push directory",
        f"PASS the push helper runs as {names['push']} with only its own ids",
        "PASS the push socket is 0660 push:implementer in a 2750 directory",
        "PASS the reviewer account cannot reach the push socket",
        "PASS an implementer process outside the launch is refused by its helper",
    ):
        assert want in lines, (want, done.stdout)
    # Everything the check made is gone: the dummy tokens, the stand-ins, the runs.
    assert tree(real.root) - before == set()
    assert not real.path("/var/lib/agentc/impl/claude-token").exists()


def test_json_and_exit_1_on_a_failure(real: RealHost) -> None:
    impl = real.path("/var/lib/agentc/impl")
    os.chmod(impl, 0o755)  # noqa: S103 - the role's parent open to every account: a FAIL
    dummy = real.path("/var/lib/agentc/rev/claude-token")
    dummy.write_text("agentc-check-dummy-token-0123abcd\n")  # one an interrupted check left
    try:
        done = real.run("check", "--json")
    finally:
        os.chmod(impl, 0o750)  # noqa: S103 - the seed's mode again
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False
    failed = {c["name"]: c["detail"] for c in report["checks"] if not c["pass"]}
    assert (
        "has mode 0755, expected 0750"
        in failed["host: the state tree has the seed's owners and modes"]
    )
    assert "was one (removed)" in failed["reviewer: no dummy token left by an interrupted check"]
    assert not dummy.exists()
    passed = [c for c in report["checks"] if c["pass"]]
    assert len(passed) > 20, report


def test_uninstall_after_a_release_leaves_nothing_of_agentc(real: RealHost) -> None:
    done = host(real.config, "setup", "--uninstall")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "removed /" in done.stdout and f"retired the account {real.names['push']}" in done.stdout
    for name in real.names.values():
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
    # The host's own parents of the paths (made for the test, as /var or /opt are on a host).
    assert tree(real.root) == {"host.toml", "etc", "opt", "var", "var/lib"}, tree(real.root)
