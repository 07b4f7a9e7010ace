"""``agentc-host update`` end to end, as root, on a host set up for real: releases are wheels built
from this checkout (``uv build``), published with ``agentc-host release`` into an index served
over loopback HTTPS with a throwaway certificate, signed with a throwaway ssh key; the loop runs
bound to a real coordinator. Shown: a good release promoted (the loop runs from it); a failing
preflight, a failing containment suite (a release that stops masking the state root) and a
failing canary each rolled back, paged and not retried; a bad checksum, a bad signature and a
path escape refused with nothing changed; a running launch defers the run; ``--check``,
``--retry`` and ``--rollback core``; the staged harness step promoted (only ``[pinned]``
rewritten) and rolled back by hand, rolled back on its own when the new harness fails inside a
launch (the core stays), and never renamed into place when it reports another version. The tests
share one host and run in order."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.client.kit import admin_project, issue_token
from tests.host.update_kit import UpdateHost, update_host
from tests.kit.live import LiveServer

# One host for the module's tests, in order (scripts/test keeps a module on one worker).
pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def up(
    tmp_path_factory: pytest.TempPathFactory,
    wheelhouse: Path,
    agentc_010: Path,
    server: LiveServer,
    admin: httpx.Client,
) -> Iterator[UpdateHost]:
    project = admin_project(admin)
    token = issue_token(admin, f"impl-{os.urandom(3).hex()}", project, "supervised")
    with update_host(
        tmp_path_factory.mktemp("update"), wheelhouse, agentc_010, server, project, token
    ) as made:
        made.project = project  # type: ignore[attr-defined]
        yield made


def _unchanged(up: UpdateHost, live: str) -> None:
    assert up.live() == live
    assert up.manager.is_active("loop")
    assert not up.path("/var/lib/agentc/kill-switch").exists()


def test_the_first_release_came_from_the_index(up: UpdateHost) -> None:
    assert up.live() == "0.1.0"
    assert (up.settings.releases / "0.1.0/installed.json").is_file()
    assert "releases/0.1.0/venv/bin/python" in up.loop_release()
    cron = up.path("/etc/cron.d/agentc-host").read_text()
    assert "service loop" in cron and "service egress" in cron  # the new release's setup
    again = up.update()
    assert again.returncode == 0 and "nothing to do: 0.1.0 is live" in again.stdout


def test_check_verifies_and_changes_nothing(up: UpdateHost) -> None:
    up.publish("0.1.1")
    done = up.update("--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "release 0.1.1 verified" in done.stdout and "would update 0.1.0 -> 0.1.1" in done.stdout
    assert not (up.settings.releases / "0.1.1").exists()
    _unchanged(up, "0.1.0")


def _sign(key: Path, data: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", "agentc-release", str(data)],
        check=True, capture_output=True,
    )  # fmt: skip


def _refused(up: UpdateHost, needle: str) -> None:
    releases = sorted(p.name for p in up.settings.releases.iterdir())
    done = up.update()
    assert done.returncode == 2, done.stdout + done.stderr
    assert needle in done.stdout, done.stdout
    assert "nothing changed" in done.stdout
    assert sorted(p.name for p in up.settings.releases.iterdir()) == releases
    _unchanged(up, "0.1.0")
    assert needle in up.pages()[-1]["message"]


def test_a_bad_checksum_a_bad_signature_and_a_path_escape_are_refused(up: UpdateHost) -> None:
    folder = up.index / "0.1.1"
    wheel = folder / "agentc-0.1.1-py3-none-any.whl"
    good = wheel.read_bytes()
    wheel.write_bytes(good[:-10] + b"tampered!!")  # a byte changed in transit or on the index
    _refused(up, "agentc-0.1.1-py3-none-any.whl: its SHA-256 is not the one SHA256SUMS gives")
    wheel.write_bytes(good)
    # Signed by a key the host does not trust.
    sums = (folder / "SHA256SUMS").read_bytes()
    signature = folder / "SHA256SUMS.sig"
    trusted = signature.read_bytes()
    signature.unlink()
    _sign(up.other_key, folder / "SHA256SUMS")
    _refused(up, "the manifest's signature does not verify")
    signature.write_bytes(trusted)
    # A manifest that names a path outside the release, properly signed: still refused.
    escape = sums + f"{hashlib.sha256(b'x').hexdigest()}  ../../etc/cron.d/evil\n".encode()
    (folder / "SHA256SUMS").write_bytes(escape)
    signature.unlink()
    _sign(up.key, folder / "SHA256SUMS")
    _refused(up, "the manifest names '../../etc/cron.d/evil': not a plain relative name")
    assert not Path("/etc/cron.d/evil").exists()
    (folder / "SHA256SUMS").write_bytes(sums)
    signature.write_bytes(trusted)


def _rolled_back(up: UpdateHost, version: str, needle: str) -> None:
    done = up.update()
    assert done.returncode == 1, done.stdout + done.stderr
    assert needle in done.stdout, done.stdout
    _unchanged(up, "0.1.0")
    assert "releases/0.1.0/venv/bin/python" in up.loop_release()
    assert version in up.state()["rejected"]
    page = up.pages()[-1]
    assert page["title"] == f"agentc update to {version} rolled back" and needle in page["message"]
    assert up.results()[-1]["outcome"] == "rolled-back"
    again = up.update()  # not retried
    assert again.returncode == 0 and f"{version} was rejected" in again.stdout, again.stdout


def _break_preflight(source: Path) -> None:
    path = source / "src/agentc/supervisor/commands.py"
    text = path.read_text()
    anchor = "    from agentc.supervisor.launch import preflight, preflight_host\n"
    assert anchor in text
    path.write_text(text.replace(anchor, '    raise SystemExit("preflight is broken")\n' + anchor))


def _unmask_the_state_root(source: Path) -> None:
    path = source / "src/agentc/supervisor/launch/plan.py"
    text = path.read_text()
    anchor = 'wanted = [state_dir, Path("/tmp")'
    assert anchor in text
    path.write_text(text.replace(anchor, 'wanted = [Path("/tmp")'))


def test_a_failing_preflight_is_rolled_back_and_not_retried(up: UpdateHost) -> None:
    up.publish("0.2.0", patch=_break_preflight)
    _rolled_back(up, "0.2.0", "preflight failed")


def test_a_failing_containment_suite_is_rolled_back(up: UpdateHost) -> None:
    up.publish("0.3.0", patch=_unmask_the_state_root)
    _rolled_back(up, "0.3.0", "cannot read its Claude token inside a launch")


def test_a_failing_canary_is_rolled_back(up: UpdateHost) -> None:
    up.publish("0.4.0")
    up.write_settings(canary_harnesses='["claude"]')
    try:
        _rolled_back(up, "0.4.0", "canary claude failed")
    finally:
        up.write_settings()


def test_a_good_release_is_promoted_and_can_be_rolled_back_by_hand(up: UpdateHost) -> None:
    up.publish("0.5.0")
    done = up.update()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "promoted 0.5.0" in done.stdout
    assert up.live() == "0.5.0" and up.manager.is_active("loop")
    assert "releases/0.5.0/venv/bin/python" in up.loop_release()
    assert up.state()["core"] == {"version": "0.5.0", "previous": "0.1.0"}
    assert up.results()[-1]["outcome"] == "promoted"
    installed = sorted(p.name for p in up.settings.releases.iterdir() if not p.name.startswith("."))
    assert installed == ["0.1.0", "0.5.0"]  # the rejected ones are gone
    assert not up.path("/var/lib/agentc/kill-switch").exists()
    back = up.update("--rollback", "core")
    assert back.returncode == 0, back.stdout + back.stderr
    assert up.live() == "0.1.0" and up.manager.is_active("loop")
    assert "0.5.0" in up.state()["rejected"]
    retried = up.update("--retry")  # forgets the rejected releases: 0.5.0 comes back
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert up.live() == "0.5.0"


def _fake_claude(up: UpdateHost, version: str, marker: Path | None = None) -> Path:
    """A harness binary: it reports ``version``; with ``marker``, only while it can see that
    file (a launch masks /tmp, so inside a launch it fails)."""
    path = up.work / f"claude-{version}"
    guard = f"test -e {marker} || exit 3\n" if marker else ""
    path.write_text(f'#!/bin/sh\n{guard}echo "{version} (Claude Code)"\n')
    return path


def test_a_harness_update_is_promoted_then_rolled_back_by_hand(up: UpdateHost) -> None:
    claude = up.path("/opt/agentc/bin/claude")
    toml = up.path("/etc/agentc/supervisor.toml")
    binary, settings = claude.read_bytes(), toml.read_text()
    up.publish("0.7.0", harnesses=(f"claude=2.2.0={_fake_claude(up, '2.2.0')}",))
    done = up.update()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "promoted 0.7.0" in done.stdout and "harness step promoted: claude 2.2.0" in done.stdout
    assert up.live() == "0.7.0" and up.manager.is_active("loop")
    assert b"2.2.0" in claude.read_bytes() and os.stat(claude).st_mode & 0o777 == 0o755
    # Only the pin changed in the person's file.
    assert toml.read_text() == settings.replace('claude = "2.1.0"', 'claude = "2.2.0"')
    assert up.state()["harness"]["release"] == "0.7.0"
    back = up.update("--rollback", "harness")
    assert back.returncode == 0, back.stdout + back.stderr
    assert claude.read_bytes() == binary and toml.read_text() == settings
    assert up.manager.is_active("loop") and "0.7.0" in up.state()["harness_rejected"]
    again = up.update()  # the rejected harness step is not run again
    assert again.returncode == 0 and "harness step" not in again.stdout, again.stdout


def test_a_harness_that_fails_inside_a_launch_is_rolled_back_and_the_core_stays(
    up: UpdateHost,
) -> None:
    claude = up.path("/opt/agentc/bin/claude")
    toml = up.path("/etc/agentc/supervisor.toml")
    binary, settings = claude.read_bytes(), toml.read_text()
    marker = Path(f"/tmp/agentc-harness-marker-{os.urandom(4).hex()}")
    marker.write_text("")
    try:
        up.publish("0.8.0", harnesses=(f"claude=2.3.0={_fake_claude(up, '2.3.0', marker)}",))
        done = up.update()
    finally:
        marker.unlink()
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "promoted 0.8.0" in done.stdout and "harness step failed: preflight failed" in done.stdout
    )
    assert up.live() == "0.8.0" and up.manager.is_active("loop")
    assert claude.read_bytes() == binary and toml.read_text() == settings
    assert "0.8.0" in up.state()["harness_rejected"] and "0.8.0" not in up.state()["rejected"]
    assert up.pages()[-1]["title"] == "agentc harness update of 0.8.0 rolled back"
    assert up.results()[-1]["outcome"] == "harness-rolled-back"


def test_a_harness_that_reports_another_version_is_never_renamed_into_place(
    up: UpdateHost,
) -> None:
    claude = up.path("/opt/agentc/bin/claude")
    binary = claude.read_bytes()
    up.publish("0.8.1", harnesses=(f"claude=2.4.0={_fake_claude(up, '2.3.9')}",))
    done = up.update()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "--version said '2.3.9 (Claude Code)', not '2.4.0'" in done.stdout
    assert claude.read_bytes() == binary and up.live() == "0.8.1"
    assert not list(up.path("/opt/agentc/bin").glob(".claude.new-*"))


def test_the_owner_s_kill_switch_stops_a_run(up: UpdateHost) -> None:
    up.publish("0.9.0")
    switch = up.path("/var/lib/agentc/kill-switch")
    switch.write_text("owner\n")
    try:
        done = up.update()
    finally:
        switch.unlink()
    assert done.returncode == 2 and "the owner's kill switch is set" in done.stdout
    assert up.live() == "0.8.1"


def test_a_running_launch_defers_the_run(up: UpdateHost, admin: httpx.Client) -> None:
    project = up.project  # type: ignore[attr-defined]
    body = {"title": "hang", "acceptance_criteria": ["never done"]}
    made = admin.post(f"/api/v1/projects/{project}/tasks", json=body,
                      headers={"Idempotency-Key": os.urandom(8).hex()})  # fmt: skip
    assert made.status_code == 201, made.text
    for _ in range(600):  # the loop claims it and its agent hangs
        if "launch" in up.heartbeat():
            break
        time.sleep(0.2)
    assert "launch" in up.heartbeat(), up.heartbeat()
    up.write_settings(drain_timeout_minutes="0.1")
    try:
        done = up.update()
    finally:
        up.write_settings()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deferred: a launch still ran" in done.stdout
    assert up.live() == "0.8.1" and up.results()[-1]["outcome"] == "deferred"
    assert "launch" in up.heartbeat()  # never cut off
    assert not up.path("/var/lib/agentc/kill-switch").exists()
