"""``agentc-host setup --prefix DIR``: the whole host generated into a folder without root, every
file, recorded owner, mode and unit checked; idempotent; settings files a person edited kept;
seeds replaced by fresh inodes; refusals that change nothing; ``--uninstall``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentc.core.roles import claude_settings
from agentc.host.seeds import CLAUDE_MD
from agentc.supervisor.config import SupervisorConfig
from tests.host.kit import host, mode, record, tree, write_settings

UNITS = [
    "agentc-attention-check.service",
    "agentc-attention-check.timer",
    "agentc-attention-digest.service",
    "agentc-attention-digest.timer",
    "agentc-egress.service",
    "agentc-gateway.service",
    "agentc-integrator.service",
    "agentc-run.service",
    "agentc-update.service",
    "agentc-update.timer",
]
PROGRAMS = [
    "agent-coordinator",
    "agentc-attention",
    "agentc-host",
    "agentc-integrator",
    "agentc-push",
    "agentc-supervisor",
]
# Every directory setup lays out: owner, group, mode.
DIRS = {
    "/var/lib/agentc": ("root", "root", 0o755),
    "/var/lib/agentc/impl": ("root", "agentc-impl", 0o750),
    "/var/lib/agentc/impl/runs": ("agentc-impl", "agentc-impl", 0o700),
    "/var/lib/agentc/impl/clones": ("agentc-impl", "agentc-impl", 0o700),
    "/var/lib/agentc/impl/home": ("agentc-impl", "agentc-impl", 0o700),
    "/var/lib/agentc/impl/claude-config": ("root", "agentc-impl", 0o750),
    "/var/lib/agentc/rev": ("root", "agentc-rev", 0o750),
    "/var/lib/agentc/rev/runs": ("agentc-rev", "agentc-rev", 0o700),
    "/var/lib/agentc/rev/clones": ("agentc-rev", "agentc-rev", 0o700),
    "/var/lib/agentc/rev/home": ("agentc-rev", "agentc-rev", 0o700),
    "/var/lib/agentc/rev/claude-config": ("root", "agentc-rev", 0o750),
    "/var/lib/agentc/push": ("root", "root", 0o711),
    "/var/lib/agentc/loop": ("root", "root", 0o700),
    "/var/lib/agentc/attention": ("root", "root", 0o700),
    "/var/lib/agentc/egress": ("agentc-egress", "agentc-egress", 0o700),
    "/etc/agentc": ("root", "root", 0o755),
    "/etc/agentc/impl": ("root", "root", 0o700),
    "/etc/agentc/rev": ("root", "root", 0o700),
    "/opt/agentc": ("root", "root", 0o755),
    "/opt/agentc/bin": ("root", "root", 0o755),
    "/opt/agentc/releases": ("root", "root", 0o755),
}


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    return tmp_path / "host"


def _settings(tmp_path: Path, init: str = "systemd", extra: str = "") -> Path:
    return write_settings(tmp_path / "host.toml", extra, init=init)


def _setup(config: Path, prefix: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return host(config, "setup", "--prefix", str(prefix), *more)


def _at(prefix: Path, path: str) -> Path:
    return prefix / path.lstrip("/")


def test_setup_writes_the_whole_host_with_its_owners_and_modes(tmp_path: Path, prefix: Path):
    config = _settings(tmp_path)
    done = _setup(config, prefix)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    rec = record(prefix)
    # The accounts: a recorded plan, each a system account of its own with no login.
    assert rec["accounts"] == {
        "agentc-impl": {"key": "implementer", "created": True, "home": "/var/lib/agentc/impl/home"},
        "agentc-rev": {"key": "reviewer", "created": True, "home": "/var/lib/agentc/rev/home"},
        "agentc-push": {"key": "push", "created": True, "home": "/nonexistent"},
        "agentc-egress": {"key": "egress", "created": True, "home": "/nonexistent"},
    }
    assert "useradd --system --user-group --no-create-home --home-dir /nonexistent" in done.stdout
    for path, (owner, group, want) in DIRS.items():
        entry = rec["paths"][path]
        assert (entry["owner"], entry["group"], entry["mode"]) == (owner, group, f"{want:04o}")
        assert entry["type"] == "dir" and entry["created"] is True
        assert mode(_at(prefix, path)) == want, path
    # The protected seeds: root 0444, exactly the generated content, nothing else there.
    for slug in ("impl", "rev"):
        folder = _at(prefix, f"/var/lib/agentc/{slug}/claude-config")
        assert sorted(os.listdir(folder)) == ["CLAUDE.md", "settings.json"]
        assert (folder / "settings.json").read_text() == claude_settings(slug)
        assert json.loads((folder / "settings.json").read_text())["permissions"]["allow"]
        assert (folder / "CLAUDE.md").read_text() == CLAUDE_MD
        for name in ("settings.json", "CLAUDE.md"):
            entry = rec["paths"][f"/var/lib/agentc/{slug}/claude-config/{name}"]
            assert (entry["owner"], entry["group"], entry["mode"], entry["kind"]) == (
                "root", "root", "0444", "seed")  # fmt: skip
            assert mode(folder / name) == 0o444
    # supervisor.toml: the host keys, as the supervisor itself loads them.
    toml = _at(prefix, "/etc/agentc/supervisor.toml")
    assert mode(toml) == 0o644 and rec["paths"]["/etc/agentc/supervisor.toml"]["kind"] == "settings"
    loaded = SupervisorConfig.load(toml)
    assert loaded.mode == "host" and loaded.state_dir == Path("/var/lib/agentc")
    assert (loaded.implementer_user, loaded.reviewer_user) == ("agentc-impl", "agentc-rev")
    assert loaded.push_helper.user == "agentc-push"
    assert loaded.push_helper.program == ["/opt/agentc/bin/agentc-push"]
    assert loaded.egress_socket == Path("/run/agentc-egress/proxy.sock")
    assert loaded.masks == [Path("/etc/agentc")] and loaded.run.binding is None
    # The programs: links into the live release.
    for name in PROGRAMS:
        link = _at(prefix, f"/opt/agentc/bin/{name}")
        assert os.readlink(link) == f"../current/venv/bin/{name}"
    # The units: every one, each a root 0644 file; nothing enabled before a release exists.
    systemd = _at(prefix, "/etc/systemd/system")
    assert sorted(p.name for p in systemd.iterdir() if p.is_file()) == UNITS
    for unit in UNITS:
        assert mode(systemd / unit) == 0o644
        entry = rec["paths"][f"/etc/systemd/system/{unit}"]
        assert (entry["owner"], entry["mode"], entry["kind"]) == ("root", "0644", "generated")
    run = (systemd / "agentc-run.service").read_text()
    assert f"ExecStart=/opt/agentc/bin/agentc-host --config {config} service loop" in run
    assert "KillMode=mixed" in run and "WantedBy=multi-user.target" in run
    update = (systemd / "agentc-update.timer").read_text()
    assert "OnCalendar=daily" in update and "Persistent=true" in update
    assert "RandomizedDelaySec=1h" in update
    assert rec["enabled"] == [] and not (systemd / "multi-user.target.wants").exists()
    assert "waiting: agentc-run.service: waits for a release in /opt/agentc/current" in done.stdout
    # Credentials: never made, only named as the owner's next steps.
    assert (
        "next: place the implementer's Claude token at /var/lib/agentc/impl/claude-token "
        "(install -o root -g agentc-impl -m 0440 /dev/stdin /var/lib/agentc/impl/claude-token)"
    ) in done.stdout
    assert "install -o agentc-push -g agentc-push -m 0400 /dev/stdin /etc/agentc/push-key" in (
        done.stdout
    )
    assert not _at(prefix, "/etc/agentc/push-key").exists()
    assert done.stdout.rstrip().endswith("change(s)")
    _verify_units(systemd, tmp_path)


def _verify_units(systemd: Path, tmp_path: Path) -> None:
    """systemd itself accepts every unit (the programs stand in for /bin/true)."""
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze verifies the units (apt-get install systemd)"
    out = tmp_path / "verify"
    out.mkdir()
    for unit in systemd.iterdir():
        if unit.is_file():
            text = unit.read_text().replace("/opt/agentc/bin/agentc-host", "/bin/true")
            text = text.replace("/opt/agentc/bin/agentc-attention", "/bin/true")
            name = unit.name.replace("@.", "@claude.")
            (out / name).write_text(text)
    done = subprocess.run(
        [analyze, "verify", "--man=no", *map(str, sorted(out.iterdir()))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _configure(prefix: Path, tmp_path: Path) -> None:
    """A release, and everything each unit waits for."""
    (_at(prefix, "/opt/agentc/releases/1.0/venv")).mkdir(parents=True)
    os.symlink("releases/1.0", _at(prefix, "/opt/agentc/current"))
    etc = _at(prefix, "/etc/agentc")
    with open(etc / "supervisor.toml", "a") as handle:
        handle.write('\n[run.binding]\nservice_url = "https://c.example"\nproject_id = "p"\n')
    (etc / "gateway.toml").write_text("# the gateway's\n")
    (etc / "integrator.toml").write_text("# the integrator's\n")
    token = etc / "attention-token"
    token.write_text("tok\n")
    os.chmod(token, 0o600)
    (etc / "attention.toml").write_text(
        'origin = "https://c.example"\nproject_id = "p"\ntoken_file = "/etc/agentc/attention-token"'
        '\n[canary]\nharnesses = ["claude", "codex"]\n'
    )
    (etc / "update-signers").write_text("release@agentc ssh-ed25519 AAAA\n")


def test_units_are_enabled_once_what_they_need_is_configured(tmp_path: Path, prefix: Path):
    config = _settings(tmp_path, extra='[update]\nindex = "https://releases.example/agentc"\n')
    assert _setup(config, prefix).returncode == 0
    _configure(prefix, tmp_path)
    done = _setup(config, prefix)
    assert done.returncode == 0, done.stderr
    wants = _at(prefix, "/etc/systemd/system/multi-user.target.wants")
    assert sorted(os.listdir(wants)) == [
        "agentc-egress.service", "agentc-gateway.service", "agentc-integrator.service",
        "agentc-run.service",
    ]  # fmt: skip
    assert os.readlink(wants / "agentc-run.service") == "/etc/systemd/system/agentc-run.service"
    timers = _at(prefix, "/etc/systemd/system/timers.target.wants")
    assert sorted(os.listdir(timers)) == [
        "agentc-attention-canary@claude.timer", "agentc-attention-canary@codex.timer",
        "agentc-attention-check.timer", "agentc-attention-digest.timer", "agentc-update.timer",
    ]  # fmt: skip
    canary = "agentc-attention-canary@claude.timer"
    assert os.readlink(timers / canary) == "/etc/systemd/system/agentc-attention-canary@.timer"
    assert "enabled agentc-run.service" in done.stdout and "waiting" not in done.stdout
    # The edited supervisor.toml is the person's now: kept, and said so.
    assert "kept /etc/agentc/supervisor.toml: it is not the one setup wrote" in done.stdout
    assert "[run.binding]" in _at(prefix, "/etc/agentc/supervisor.toml").read_text()
    # The attention token was 0600: held at root 0400.
    assert "held /etc/agentc/attention-token at root:root 0400" in done.stdout
    assert mode(_at(prefix, "/etc/agentc/attention-token")) == 0o400
    entry = record(prefix)["paths"]["/etc/agentc/attention-token"]
    assert (entry["owner"], entry["group"], entry["mode"]) == ("root", "root", "0400")
    # A configuration removed: its unit is disabled again; a harness dropped: its timer goes.
    _at(prefix, "/etc/agentc/gateway.toml").unlink()
    attention = _at(prefix, "/etc/agentc/attention.toml")
    attention.write_text(attention.read_text().replace(', "codex"', ""))
    done = _setup(config, prefix)
    assert done.returncode == 0, done.stderr
    assert "disabled agentc-gateway.service" in done.stdout
    assert "disabled agentc-attention-canary@codex.timer" in done.stdout
    assert not (wants / "agentc-gateway.service").exists()
    assert not (timers / "agentc-attention-canary@codex.timer").exists()
    assert "waiting: agentc-gateway.service: waits for /etc/agentc/gateway.toml" in done.stdout


def test_a_second_run_changes_nothing_and_says_so(tmp_path: Path, prefix: Path):
    config = _settings(tmp_path)
    assert _setup(config, prefix).returncode == 0
    before = {p: os.lstat(p) for p in prefix.rglob("*")}
    done = _setup(config, prefix)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("nothing changed")
    assert "made " not in done.stdout and "wrote " not in done.stdout
    after = {p: os.lstat(p) for p in prefix.rglob("*")}
    assert after.keys() == before.keys()
    for path, info in before.items():  # not one inode replaced or rewritten
        assert (after[path].st_ino, after[path].st_mtime_ns) == (info.st_ino, info.st_mtime_ns)


def test_cron_entries_on_a_host_without_systemd(tmp_path: Path, prefix: Path):
    config = _settings(tmp_path, "cron", '[update]\nindex = "/srv/releases"\n')
    assert _setup(config, prefix).returncode == 0
    cron = _at(prefix, "/etc/cron.d/agentc-host")
    first = cron.read_text()
    assert mode(cron) == 0o644 and "service" not in first and "attention" not in first
    assert not _at(prefix, "/etc/systemd/system").exists()
    _configure(prefix, tmp_path)
    done = _setup(config, prefix)
    assert done.returncode == 0, done.stderr
    lines = cron.read_text().splitlines()
    command = f"/opt/agentc/bin/agentc-host --config {config}"
    for name in ("egress", "loop", "gateway", "integrator"):
        want = f"* * * * * root {command} service {name} >> /var/log/agentc-{name}.log 2>&1"
        assert want in lines
    attention = "/opt/agentc/bin/agentc-attention --config /etc/agentc/attention.toml"
    assert f"*/10 * * * * root {attention} check >> /var/log/agentc-attention-check.log 2>&1" in (
        lines
    )
    assert any(
        line.startswith(f"0 0 * * * root {attention} canary --harness codex") for line in lines
    )
    assert f"0 0 * * * root {command} update >> /var/log/agentc-update.log 2>&1" in lines
    assert record(prefix)["init"] == "cron"


def test_a_schedule_cron_cannot_take_is_refused(tmp_path: Path, prefix: Path):
    extra = '[timers]\nupdate_calendar = "Mon *-*-* 03:00"\n[update]\nindex = "/srv/r"\n'
    config = _settings(tmp_path, "cron", extra)
    assert _setup(config, prefix).returncode == 0
    _configure(prefix, tmp_path)
    done = _setup(config, prefix)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "update_calendar 'Mon *-*-* 03:00': cron takes hourly, daily, weekly" in done.stderr


def test_a_person_s_edit_is_kept_and_an_unedited_file_is_brought_up_to_date(tmp_path, prefix):
    config = _settings(tmp_path)
    assert _setup(config, prefix).returncode == 0
    toml = _at(prefix, "/etc/agentc/supervisor.toml")
    written = toml.read_text()
    # A file an earlier setup wrote, nobody edited since: brought up to date.
    older = written.replace("# Setup never rewrites", "# (older) Setup never rewrites")
    toml.write_text(older)
    path = prefix / "var/lib/agentc/host-setup.json"
    rec = json.loads(path.read_text())
    import hashlib

    rec["paths"]["/etc/agentc/supervisor.toml"]["sha256"] = hashlib.sha256(
        older.encode()
    ).hexdigest()
    path.write_text(json.dumps(rec))
    done = _setup(config, prefix)
    assert "updated /etc/agentc/supervisor.toml (nobody had edited it)" in done.stdout
    assert toml.read_text() == written
    # Edited by a person: never overwritten.
    edited = written + "\n[limits]\nmemory_mib = 4096\n"
    toml.write_text(edited)
    done = _setup(config, prefix)
    assert done.returncode == 0, done.stderr
    assert toml.read_text() == edited and "kept /etc/agentc/supervisor.toml" in done.stdout
    assert done.stdout.rstrip().endswith("nothing changed")


def test_seeds_are_fresh_root_inodes_and_a_retired_login_goes(tmp_path: Path, prefix: Path):
    config = _settings(tmp_path)
    assert _setup(config, prefix).returncode == 0
    seed = _at(prefix, "/var/lib/agentc/impl/claude-config/settings.json")
    inode = os.lstat(seed).st_ino
    os.chmod(seed, 0o644)
    seed.write_text('{"permissions": {"allow": ["Bash", "WebFetch"]}}')
    os.chmod(seed, 0o444)
    login = seed.parent / ".credentials.json"
    login.write_text('{"claudeAiOauth": "secret"}')
    done = _setup(config, prefix)
    assert done.returncode == 0, done.stderr
    assert "replaced /var/lib/agentc/impl/claude-config/settings.json with a fresh" in done.stdout
    assert seed.read_text() == claude_settings("impl") and os.lstat(seed).st_ino != inode
    assert mode(seed) == 0o444 and not login.exists()
    assert "removed the retired claude login" in done.stdout
    # Even unchanged content on an inode setup did not make is replaced.
    os.unlink(seed)
    seed.write_text(claude_settings("impl"))
    os.chmod(seed, 0o444)
    done = _setup(config, prefix)
    assert "replaced /var/lib/agentc/impl/claude-config/settings.json" in done.stdout
    assert _setup(config, prefix).stdout.rstrip().endswith("nothing changed")


def _refused(config: Path, prefix: Path, needle: str) -> None:
    before = {p: os.lstat(p).st_mtime_ns for p in prefix.rglob("*")}
    done = _setup(config, prefix)
    assert done.returncode == 1, done.stdout + done.stderr
    assert needle in done.stderr, done.stderr
    assert "nothing was changed" in done.stderr and "Traceback" not in done.stderr
    assert {p: os.lstat(p).st_mtime_ns for p in prefix.rglob("*")} == before


def test_refusals_change_nothing(tmp_path: Path, prefix: Path):
    config = _settings(tmp_path)
    # Before anything exists: a symlink where the state tree goes is never followed.
    outside = tmp_path / "outside"
    outside.mkdir()
    _at(prefix, "/var/lib").mkdir(parents=True)
    os.symlink(outside, _at(prefix, "/var/lib/agentc"))
    _refused(config, prefix, "/var/lib/agentc is a symlink, not a directory")
    assert list(outside.iterdir()) == []
    os.unlink(_at(prefix, "/var/lib/agentc"))
    assert _setup(config, prefix).returncode == 0
    etc = _at(prefix, "/etc/agentc")
    config_dir = _at(prefix, "/var/lib/agentc/rev/claude-config")
    # An entry a role could have planted among the protected seeds.
    (config_dir / "hooks.json").write_text("{}")
    _refused(config, prefix, "claude-config/hooks.json: unexpected entry in a protected")
    (config_dir / "hooks.json").unlink()
    # A hard-linked seed (another name could change it).
    os.link(config_dir / "CLAUDE.md", tmp_path / "second-name")
    _refused(config, prefix, "CLAUDE.md is a file with 2 link(s), not a plain file")
    (tmp_path / "second-name").unlink()
    # Credentials another account could have read, replaced, or reached through a link.
    token = etc / "attention-token"
    for perm, needle in ((0o644, "readable by other accounts (mode 0644)"),
                         (0o640, "readable by other accounts (mode 0640)"),
                         (0o620, "writable by other accounts (mode 0620)")):  # fmt: skip
        token.write_text("tok\n")
        os.chmod(token, perm)
        _refused(
            config,
            prefix,
            f"/etc/agentc/attention-token (the attention jobs' coordinator "
            f"token (attention.toml token_file)) is {needle}",
        )
        token.unlink()
    os.symlink(tmp_path / "elsewhere", token)
    _refused(config, prefix, "/etc/agentc/attention-token (the attention jobs' coordinator "
             "token (attention.toml token_file)) is a symlink")  # fmt: skip
    token.unlink()
    # A supervisor.toml that names other accounts than host.toml.
    toml = etc / "supervisor.toml"
    text = toml.read_text()
    toml.write_text(text.replace('implementer_user = "agentc-impl"', 'implementer_user = "nobody"'))
    _refused(config, prefix, "implementer_user is 'nobody', but host.toml makes it 'agentc-impl'")
    toml.write_text(text)
    os.chmod(toml, 0o666)  # noqa: S103 - the refused mode
    _refused(config, prefix, "supervisor.toml is writable by other accounts")
    os.chmod(toml, 0o644)
    # The seed that had a second name is replaced (its inode changed), then all is settled.
    done = _setup(config, prefix)
    assert "replaced /var/lib/agentc/rev/claude-config/CLAUDE.md with a fresh" in done.stdout
    assert _setup(config, prefix).stdout.rstrip().endswith("nothing changed")


def test_bad_settings_are_one_line(tmp_path: Path, prefix: Path):
    config = write_settings(tmp_path / "host.toml", "[accounts]\nreviewer = \"agentc-impl\"\n",
                            init="upstart")  # fmt: skip
    done = _setup(config, prefix)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "init: must be one of 'auto', 'systemd', 'cron', got 'upstart'" in done.stderr
    assert "accounts.reviewer: agentc-impl is also the implementer's account" in done.stderr
    assert not prefix.exists()
    missing = host(tmp_path / "nope.toml", "setup", "--prefix", str(prefix))
    assert missing.returncode == 2 and "no such host settings file" in missing.stderr


def test_uninstall_removes_what_setup_made_and_keeps_the_owner_s_secrets(tmp_path, prefix):
    config = _settings(tmp_path, extra='[update]\nindex = "/srv/releases"\n')
    assert _setup(config, prefix).returncode == 0
    _configure(prefix, tmp_path)
    key = _at(prefix, "/etc/agentc/push-key")
    key.write_text("a key\n")
    os.chmod(key, 0o600)
    assert _setup(config, prefix).returncode == 0
    run = _at(prefix, "/var/lib/agentc/impl/runs/left-over")
    run.mkdir()
    (run / "log").write_text("x")
    done = _setup(config, prefix, "--uninstall")
    assert done.returncode == 0, done.stderr
    assert "kept /etc/agentc/push-key (yours: now root 0400)" in done.stdout
    assert "kept /etc/agentc/supervisor.toml: it was edited after setup wrote it" in done.stdout
    left = tree(prefix)
    # What stays: the owner's secrets and trust anchor, the configurations the owner wrote
    # (setup never made them), and the folders that hold them.
    assert left == {
        "etc", "etc/agentc", "etc/agentc/push-key", "etc/agentc/attention-token",
        "etc/agentc/update-signers", "etc/agentc/supervisor.toml", "etc/agentc/attention.toml",
        "etc/agentc/gateway.toml", "etc/agentc/integrator.toml", "etc/systemd", "var", "var/lib",
        "opt",
    }, left  # fmt: skip
    assert mode(key) == 0o400 and mode(_at(prefix, "/etc/agentc/update-signers")) == 0o644
    assert not _at(prefix, "/var/lib/agentc/host-setup.json").exists()
    again = _setup(config, prefix, "--uninstall")
    assert again.returncode == 0 and "nothing to remove" in again.stdout
