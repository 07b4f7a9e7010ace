"""The real harnesses installed where people install them in a personal-mode user's home run
``--version`` inside a launch as that user, whose home the launch masks.

The packages are the pinned ones in tools/harnesses (``scripts/setup --dev``), placed into the
user's home as npm, nvm and Claude's native installer lay them out (hard links: the same
files, no copies): an npm prefix (``~/.npm-global``), an nvm node with its global packages
(``~/.nvm/versions/node/vX``, on the launch's PATH through ``bin_dir``), a symlink chain through
a symlinked directory (``~/.local/bin/codex`` -> ``share/tools/current`` -> ``versions/X``),
and the native installer's ``~/.local/bin/claude`` -> ``~/.local/share/claude/versions/X``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.supervisor.kit import HARNESS_BIN, cleanup, create_user, delete_user, make_kit

pytestmark = pytest.mark.root

MODULES = HARNESS_BIN.parent
NODE = Path("/usr/bin/node")


@dataclass(frozen=True)
class Install:
    harness: str
    program: Path  # what the configuration names
    settings: dict[str, Any]  # supervisor.toml keys for this layout
    bound: Path  # a tree the launch must bind back for it


def _link_tree(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["cp", "-al", str(src), str(dst)], check=True, capture_output=True)
    except subprocess.CalledProcessError:  # another filesystem: copy
        shutil.copytree(src, dst, symlinks=True)


def npm_prefix(home: Path) -> Install:
    lib = home / ".npm-global/lib/node_modules/@anthropic-ai"
    for name in ("claude-code", "claude-code-linux-x64"):
        _link_tree(MODULES / "@anthropic-ai" / name, lib / name)
    program = home / ".npm-global/bin/claude"
    program.parent.mkdir(parents=True)
    program.symlink_to("../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe")
    return Install("claude", program, {"harness_paths": {"claude": str(program)}}, lib.parent)


def nvm_node(home: Path) -> Install:
    prefix = home / ".nvm/versions/node/v22.1.0"
    (prefix / "bin").mkdir(parents=True)
    _link_tree(NODE, prefix / "bin/node")
    lib = prefix / "lib/node_modules"
    lib.mkdir(parents=True)
    for entry in MODULES.iterdir():
        if entry.name not in ("@openai", "@anthropic-ai", ".bin"):
            _link_tree(entry, lib / entry.name)
    (prefix / "bin/pi").symlink_to("../lib/node_modules/@mariozechner/pi-coding-agent/dist/cli.js")
    # nvm puts its bin on PATH: here bin_dir, the first entry of the launch's PATH, where
    # ``#!/usr/bin/env node`` finds this node
    settings: dict[str, Any] = {
        "bin_dir": str(prefix / "bin"),
        "harness_paths": {"pi": str(prefix / "bin/pi")},
    }
    return Install("pi", prefix / "bin/pi", settings, prefix)


def _codex_version(home: Path) -> Path:
    tools = home / ".local/share/tools"
    for name in ("codex", "codex-linux-x64"):
        _link_tree(
            MODULES / "@openai" / name, tools / "versions/0.171.0/node_modules/@openai" / name
        )
    return tools


def symlink_chain(home: Path) -> Install:
    """``~/.local/bin/codex`` -> ``~/.local/share/tools/codex`` -> ``versions/X/.../codex.js``."""
    tools = _codex_version(home)
    (tools / "codex").symlink_to("versions/0.171.0/node_modules/@openai/codex/bin/codex.js")
    program = home / ".local/bin/codex"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.symlink_to("../share/tools/codex")
    return Install("codex", program, {"harness_paths": {"codex": str(program)}}, tools)


def directory_link(home: Path) -> Install:
    """A hop through a symlinked directory: ``~/.local/bin/codex`` ->
    ``../share/tools/current/.../codex.js`` with ``current`` -> ``versions/X``."""
    tools = _codex_version(home)
    (tools / "current").symlink_to("versions/0.171.0")
    program = home / ".local/bin/codex"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.symlink_to("../share/tools/current/node_modules/@openai/codex/bin/codex.js")
    return Install("codex", program, {"harness_paths": {"codex": str(program)}}, tools)


def native_installer(home: Path) -> Install:
    versions = home / ".local/share/claude/versions"
    _link_tree(MODULES / "@anthropic-ai/claude-code/bin/claude.exe", versions / "2.1.332")
    program = home / ".local/bin/claude"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.symlink_to(versions / "2.1.332")
    return Install("claude", program, {"harness_paths": {"claude": str(program)}}, versions)


LAYOUTS = {
    "npm prefix": npm_prefix,
    "nvm node": nvm_node,
    "symlink chain": symlink_chain,
    "native installer": native_installer,
    "directory link": directory_link,
}


@pytest.fixture
def user_home() -> Iterator[tuple[str, Path]]:
    name = create_user("agentc-h")
    home = Path(pwd.getpwnam(name).pw_dir)
    try:
        yield name, home
    finally:
        delete_user(name)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_harness_installed_in_the_home_runs_inside_a_launch(
    user_home: tuple[str, Path], layout: str
) -> None:
    assert HARNESS_BIN.exists(), "tools/harnesses is not installed: run scripts/setup --dev"
    name, home = user_home
    entry = pwd.getpwnam(name)
    install = LAYOUTS[layout](home)
    (home / "planted.txt").write_text("planted\n")
    (home / ".local/state").mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, _ in os.walk(home):
        for sub in dirnames:
            os.lchown(Path(dirpath) / sub, entry.pw_uid, entry.pw_gid)
    kit = make_kit(home / ".local/state/agentc-kit", user=name, **install.settings)
    try:
        run, clone = kit.new_run("")
        harness = f"--harness={install.harness}"
        plan = kit.launch(run, clone, harness, "--dry-run", "--", "--version", timeout=60)
        assert plan.returncode == 0, plan.stderr
        assert str(install.bound) in plan.stdout, plan.stdout
        assert f" {home} " not in plan.stdout.replace("'", " ")  # never the whole home
        run, clone = kit.new_run("")
        result = kit.launch(run, clone, harness, "--", "--version", timeout=180)
        out = (run / "events.jsonl").read_text() + (run / "stderr.log").read_text()
        assert result.returncode == 0, (result.stderr, out)
        assert any(ch.isdigit() for ch in out), out
        assert "planted" not in out
    finally:
        cleanup(home / ".local/state/agentc-kit")
