"""What a program needs to run: the trees a launch binds back read-only under its masks.

A harness is rarely one file. ``~/.npm-global/bin/claude`` is a symlink into
``~/.npm-global/lib/node_modules/@anthropic-ai/claude-code/cli.js``, whose ``#!/usr/bin/env
node`` names a ``node`` that nvm keeps under ``~/.nvm/versions/node/vX/bin``; Claude's native
installer links ``~/.local/bin/claude`` into ``~/.local/share/claude/versions/``. With the home
masked, each of these must come back, and nothing else of the home.

:func:`program_trees` follows a program and returns, in order: the directory of every hop of
its symlink chain, its package root (the outermost ``node_modules`` holding the target, else
the nearest directory above it with a ``package.json`` or ``pyvenv.cfg``), and the same again
for its interpreter (a ``#!`` line's program, ``env``'s argument resolved on the launch's PATH)
with the interpreter's prefix (the parent of its ``bin``). The launch keeps those under a mask
and refuses one that would re-expose a mask (a harness installed inside the state root).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from agentc.core.errors import AgentcError

MAX_HOPS = 40  # as the kernel's own symlink limit
MAX_DEPTH = 4  # interpreters of interpreters
_MARKERS = ("package.json", "pyvenv.cfg")


class ToolPathError(AgentcError, ValueError):
    """A program cannot be followed (missing, a symlink loop, an unreadable #! line)."""


def _hops(program: Path) -> list[Path]:
    """Every path along the symlink chain, the program itself first, the final target last."""
    chain = [program]
    current = program
    for _ in range(MAX_HOPS):
        try:
            target = os.readlink(current)
        except FileNotFoundError:
            where = "" if current == program else f" (its link target {current})"
            raise ToolPathError(f"{program}: does not exist{where}") from None
        except OSError:
            break  # not a symlink: the end of the chain
        current = Path(os.path.normpath(current.parent / target))
        # a hop through a symlinked directory is resolved too
        chain.append(current)
    else:
        raise ToolPathError(f"{program}: too many levels of symbolic links")
    final = Path(os.path.realpath(current))
    if not final.exists():
        raise ToolPathError(f"{program}: its target {final} does not exist")
    if final != current:
        chain.append(final)
    return chain


def _linked_directories(hops: list[Path]) -> list[Path]:
    """The directories holding a symlinked directory that a hop passes through (``current`` ->
    ``versions/X``): the link itself must exist inside the launch, so its directory comes back."""
    found: list[Path] = []
    for hop in hops:
        for parent in reversed(hop.parents):
            if parent.is_symlink() and parent.parent not in found:
                found.append(parent.parent)
    return found


def _package_root(target: Path) -> Path | None:
    """The outermost ``node_modules`` holding the target (npm hoists dependencies there), else
    the nearest directory above it with a ``package.json`` or ``pyvenv.cfg``."""
    modules = [parent for parent in target.parents if parent.name == "node_modules"]
    if modules:
        return modules[-1]
    for parent in target.parents:
        if parent != parent.parent and any((parent / m).is_file() for m in _MARKERS):
            return parent
    return None


def shebang(target: Path) -> list[str] | None:
    """The ``#!`` line's words, or None for a binary or a script without one."""
    try:
        with target.open("rb") as fh:
            head = fh.read(256)
    except OSError as exc:
        raise ToolPathError(f"{target}: cannot read it ({exc.strerror})") from None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    try:
        return shlex.split(line)
    except ValueError:
        raise ToolPathError(f"{target}: unreadable #! line") from None


def which(name: str, path_env: str) -> Path | None:
    """``name`` on ``path_env`` (the launch's PATH, not this process's), as a shell finds it."""
    for directory in path_env.split(os.pathsep):
        if not directory or not os.path.isabs(directory):
            continue
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _interpreter(words: list[str], path_env: str) -> Path | None:
    program = Path(words[0])
    if program.name == "env":
        args = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return which(args[0], path_env) if args else None
    return program


def program_trees(program: Path, path_env: str, *, _depth: int = 0) -> list[Path]:
    """The directories ``program`` needs, deduplicated, in the order they were found."""
    if not program.is_absolute():
        raise ToolPathError(f"{program}: not an absolute path")
    hops = _hops(program)
    found = [hop.parent for hop in hops]
    found += _linked_directories(hops)
    final = hops[-1]
    root = _package_root(final)
    if root is not None:
        found.append(root)
    words = shebang(final) if final.is_file() else None
    if words and _depth < MAX_DEPTH:
        interpreter = _interpreter(words, path_env)
        if interpreter is not None and interpreter.is_absolute():
            trees = program_trees(interpreter, path_env, _depth=_depth + 1)
            found += trees
            real = Path(os.path.realpath(interpreter))
            if real.parent.name == "bin":
                found.append(real.parent.parent)  # the interpreter's prefix (nvm's node)
    result: list[Path] = []
    for path in found:
        if path not in result:
            result.append(path)
    return result
