"""The layering of src/agentc, read from the source: who may import whom, and no import cycles.

Every import counts: module level, inside functions (lazy), under ``TYPE_CHECKING``, and
``importlib.import_module`` of a module named by a string constant. ``from pkg import name``
imports ``pkg.name`` when that is a module, else ``pkg``; importing a module does not count as
importing its parent packages.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "agentc"  # the root package holds the version only: anyone may import it

# layer -> the other layers it may import (every layer may import itself and ROOT)
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "files": frozenset({"core"}),
    "store": frozenset({"core", "files"}),
    "service": frozenset({"store", "core", "files"}),
    # The agent CLI publishes candidates through the push helper's protocol (agentc.push).
    "client": frozenset({"core", "files", "push"}),
    # What starts a confined process (bwrap's arguments, the syscall filter, limits, the reaper,
    # tool paths): shared by launches, the integrator's checks and project setup commands.
    "sandbox": frozenset({"core", "files"}),
    # The model gateway and the egress proxy (with the relays): processes of their own, which
    # know nothing of the supervisor that starts them.
    "gateway": frozenset({"core", "files"}),
    "egress": frozenset({"core", "files"}),
    # The supervisor reaches the coordinator over HTTP through the client, never its internals;
    # a launch uses the sandbox, asks the gateway for a lease and starts the relays.
    "supervisor": frozenset(
        {"client", "core", "files", "agentns", "push", "sandbox", "gateway", "egress"}
    ),
    # agentc-push, the candidate push helper: its own process, its own account in host mode.
    "push": frozenset({"core", "files"}),
    # agentc-integrator: the coordinator through the client, the checks in the sandbox,
    # git's environment from the push helper (one home for it).
    "integrator": frozenset({"client", "core", "files", "sandbox", "push"}),
    # agentc up starts the other programs as processes and reaches the coordinator over HTTP
    # through the client; nothing imports it.
    "up": frozenset({"client", "core", "files", "push", "attention"}),
    # agentc-attention: paging, the digest by mail, the end-to-end canary; the coordinator
    # over HTTP through the client.
    "attention": frozenset({"client", "core", "files"}),
    # agentc-host: a supervised host's setup, containment suite and updater. It lays out what
    # the supervisor, the push helper and the attention jobs run with, and runs their checks.
    "host": frozenset({"client", "core", "files", "supervisor", "attention", "push", "sandbox"}),
    # agentns-claude is installed and run on its own.
    "agentns": frozenset(),
    # Test doubles and harness drivers for tests and benchmarks: they may use anything.
    "testing": frozenset(
        {
            "core",
            "files",
            "store",
            "service",
            "client",
            "supervisor",
            "sandbox",
            "gateway",
            "egress",
            "agentns",
            "push",
            "attention",
        }
    ),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(path): path for path in sorted((SRC / ROOT).rglob("*.py"))}


def _imports(name: str, path: Path) -> Iterator[str]:
    """Every agentc module ``name`` imports (see the module docstring for what counts)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    dynamic = False
    constants: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield submodule if submodule in MODULES else source
        elif isinstance(node, ast.Attribute) and node.attr == "import_module":
            dynamic = True
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            constants.add(node.value)
    if dynamic:
        yield from (value for value in constants if value in MODULES)


GRAPH: dict[str, frozenset[str]] = {
    name: frozenset(
        target for target in _imports(name, path) if target == ROOT or target.startswith(ROOT + ".")
    )
    for name, path in MODULES.items()
}


def _layer(module: str) -> str:
    return module.split(".")[1] if "." in module else ROOT


def _has_code(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return bool(body)


def test_the_graph_sees_every_kind_of_import() -> None:
    commands = GRAPH["agentc.supervisor.commands"]
    assert "agentc.core.errors" in commands  # module level
    assert "agentc.supervisor.launch.root" in commands  # inside a function
    assert "agentc.gateway.cli" in commands  # importlib.import_module
    assert "agentc.supervisor.config" in GRAPH["agentc.supervisor.cli"]  # TYPE_CHECKING


def test_every_import_names_a_module_that_exists() -> None:
    missing = {
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if target not in MODULES
    }
    assert not missing


def test_every_package_with_code_has_a_layer_rule() -> None:
    packages = {_layer(name) for name, path in MODULES.items() if _has_code(path)}
    assert packages - {ROOT} <= ALLOWED.keys()


def test_the_root_package_imports_nothing_of_ours() -> None:
    assert not GRAPH[ROOT]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_what_its_rule_allows(layer: str) -> None:
    allowed = ALLOWED[layer] | {layer, ROOT}
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _layer(module) == layer
        for target in targets
        if _layer(target) not in allowed
    )
    assert not wrong, f"{layer} may import only {sorted(allowed)}"


def test_the_architecture_page_draws_the_same_layers() -> None:
    """docs/architecture.md's package map: one row per layer, naming the same allowed imports."""
    page = (SRC.parent / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|[^|]*\|([^|]*)\|$", page, re.MULTILINE)
    drawn = {name: frozenset(re.findall(r"`(\w+)`", allowed)) for name, allowed in rows}
    assert drawn == ALLOWED


def test_nothing_but_the_tests_imports_agentc_testing() -> None:
    users = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _layer(module) != "testing"
        for target in targets
        if _layer(target) == "testing"
    )
    assert not users


def _cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {
        "a": frozenset({"b"}),
        "b": frozenset({"c"}),
        "c": frozenset({"a", "d"}),
        "d": frozenset(),
        "e": frozenset({"e"}),
    }
    assert _cycles(graph) == [["a", "b", "c"], ["e"]]


def test_no_import_cycles() -> None:
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
