"""Every exception agentc raises on purpose derives from AgentcError (read from the source).

agentns-claude stands alone (it is installed and run on its own, with its own small errors);
``push.server.Stop`` is the helper's way out of its accept loop, not an error.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "agentc"
BUILTIN_ERRORS = frozenset(
    {"Exception", "BaseException", "ValueError", "RuntimeError", "OSError", "KeyError"}
    | {"TypeError", "LookupError", "IOError", "EnvironmentError", "ArithmeticError"}
)
STANDS_ALONE = frozenset({"agentns"})
NOT_ERRORS = frozenset({"push/server.py:Stop"})


def _classes() -> list[tuple[str, str, list[str]]]:
    """(file, class name, base names) of every class in src/agentc."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.split("/", 1)[0] in STANDS_ALONE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                found.append((rel, node.name, bases))
    return found


def test_every_error_class_derives_from_agentc_error() -> None:
    classes = _classes()
    ours = {"AgentcError"}
    grew = True
    while grew:
        before = len(ours)
        ours |= {name for _rel, name, bases in classes if ours.intersection(bases)}
        grew = len(ours) > before
    strays = [
        f"{rel}:{name}({', '.join(bases)})"
        for rel, name, bases in classes
        if BUILTIN_ERRORS.intersection(bases)
        and name not in ours
        and f"{rel}:{name}" not in NOT_ERRORS
    ]
    assert strays == [], "errors outside the tree (derive them from AgentcError): " + "; ".join(
        strays
    )


def test_the_check_sees_a_stray() -> None:
    """The walk above finds classes at all (a broken walk would pass vacuously)."""
    names = {name for _rel, name, _bases in _classes()}
    assert {"AgentcError", "ConfigError", "UnsafeFile", "SettingsError"} <= names
