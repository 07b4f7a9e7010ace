"""Following a harness to every tree it needs: npm prefixes, nvm's node, native installers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentc.sandbox.toolpaths import ToolPathError, program_trees, shebang, which


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def link(path: Path, target: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def nvm_node(home: Path) -> Path:
    return executable(home / ".nvm/versions/node/v22.1.0/bin/node", "\x7fELF")


def test_npm_prefix_in_the_home_with_nvm_node(tmp_path: Path) -> None:
    home = tmp_path / "home"
    node = nvm_node(home)
    package = home / ".npm-global/lib/node_modules/@anthropic-ai/claude-code"
    executable(package / "cli.js", "#!/usr/bin/env node\nconsole.log(1)\n")
    (package / "package.json").write_text("{}")
    program = link(
        home / ".npm-global/bin/claude", "../lib/node_modules/@anthropic-ai/claude-code/cli.js"
    )
    trees = program_trees(program, f"{node.parent}:/usr/bin")
    assert trees == [
        home / ".npm-global/bin",
        package,
        home / ".npm-global/lib/node_modules",
        node.parent,
        node.parent.parent,  # the interpreter's prefix: nvm's version directory
    ]


def test_native_installer_chain(tmp_path: Path) -> None:
    home = tmp_path / "home"
    binary = executable(home / ".local/share/claude/versions/2.1.0", "\x7fELF")
    program = link(home / ".local/bin/claude", str(binary))
    assert program_trees(program, "/usr/bin") == [home / ".local/bin", binary.parent]


def test_every_hop_of_a_symlink_chain_and_symlinked_directories(tmp_path: Path) -> None:
    real = executable(tmp_path / "opt/tool/1.0/bin/tool", "\x7fELF")
    link(tmp_path / "opt/tool/current", "1.0")
    middle = link(tmp_path / "usr/local/bin/tool", str(tmp_path / "opt/tool/current/bin/tool"))
    program = link(tmp_path / "home/bin/tool", str(middle))
    trees = program_trees(program, "")
    assert trees[:3] == [program.parent, middle.parent, tmp_path / "opt/tool/current/bin"]
    assert real.parent in trees


def test_absolute_shebang_interpreter_is_followed(tmp_path: Path) -> None:
    interpreter = executable(tmp_path / "py/venv/bin/python", "\x7fELF")
    (tmp_path / "py/venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    script = executable(tmp_path / "py/venv/bin/agent", f"#!{interpreter}\nprint(1)\n")
    trees = program_trees(script, "")
    assert trees == [interpreter.parent, tmp_path / "py/venv"]


def test_env_with_flags_and_assignments(tmp_path: Path) -> None:
    node = nvm_node(tmp_path)
    script = executable(tmp_path / "x/run", "#!/usr/bin/env -S FOO=1 node --flag\n")
    assert shebang(script) == ["/usr/bin/env", "-S", "FOO=1", "node", "--flag"]
    assert node.parent in program_trees(script, str(node.parent))
    assert which("node", f"relative:{node.parent}") == node


@pytest.mark.parametrize("case", ["missing", "dangling", "loop", "relative"])
def test_unfollowable_programs_are_refused_by_name(tmp_path: Path, case: str) -> None:
    program = tmp_path / "bin/tool"
    if case == "dangling":
        link(program, str(tmp_path / "nowhere"))
    elif case == "loop":
        link(program, str(tmp_path / "bin/other"))
        link(tmp_path / "bin/other", str(program))
    elif case == "relative":
        program = Path("bin/tool")
    with pytest.raises(ToolPathError, match="tool"):
        program_trees(program, "")


def test_the_real_harnesses_resolve(tmp_path: Path) -> None:
    bin_dir = Path(__file__).resolve().parents[2] / "tools/harnesses/node_modules/.bin"
    for name in ("claude", "codex", "pi"):
        program = bin_dir / name
        if not program.exists():
            pytest.skip("the harness binaries are installed by scripts/setup --dev")
        trees = program_trees(program, os.environ.get("PATH", ""))
        assert bin_dir in trees and bin_dir.parent in trees


def test_a_symlinked_directory_along_a_hop_brings_back_its_directory(tmp_path: Path) -> None:
    tools = tmp_path / "home/.local/share/tools"
    executable(tools / "versions/1.0/bin/tool", "\x7fELF")
    link(tools / "current", "versions/1.0")
    program = link(tmp_path / "home/.local/bin/tool", "../share/tools/current/bin/tool")
    trees = program_trees(program, "")
    assert tools in trees  # holds the `current` link itself
