"""The sample repository ``agentc up`` creates when no ``--repo`` is given, and the three demo
tasks ``--seed-demo`` files. Each demo task spells out its change in an ``agentc-example``
block, which the bundled example agent (:mod:`agentc.up.example_agent`) follows; each adds new
files only, so the three land in any order without conflicts."""

from __future__ import annotations

import json
from typing import Any

TEST_CHECK = ["python3", "-m", "unittest", "discover", "-q"]

FILES = {
    "README.md": (
        "# calc\n\nA tiny sample project for agentc. Its tests: "
        "`python3 -m unittest discover -q`.\n"
    ),
    "AGENTS.md": (
        "# Working on calc\n\n- Keep every function small and tested.\n"
        "- Run `python3 -m unittest discover -q` before you submit.\n"
    ),
    "calc.py": '"""Arithmetic."""\n\n\ndef add(a: int, b: int) -> int:\n    return a + b\n',
    "test_calc.py": (
        "import unittest\n\nfrom calc import add\n\n\n"
        "class AddTest(unittest.TestCase):\n"
        "    def test_add(self) -> None:\n        self.assertEqual(add(2, 3), 5)\n\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    ),
}


def _module(name: str, op: str, expected: int) -> dict[str, str]:
    return {
        f"{name}.py": (
            f'"""{name.capitalize()}."""\n\n\ndef {name}(a: int, b: int) -> int:\n'
            f"    return a {op} b\n"
        ),
        f"test_{name}.py": (
            f"import unittest\n\nfrom {name} import {name}\n\n\n"
            f"class {name.capitalize()}Test(unittest.TestCase):\n"
            f"    def test_{name}(self) -> None:\n"
            f"        self.assertEqual({name}(6, 3), {expected})\n"
        ),
    }


def plan_description(text: str, files: dict[str, str], message: str) -> str:
    """A task's description the bundled example agent follows: ``text``, then the change (new
    files and the commit message) as an ``agentc-example`` block."""
    block = json.dumps({"files": files, "message": message}, indent=2)
    return f"{text}\n\n```agentc-example\n{block}\n```\n"


def demo_tasks() -> list[dict[str, Any]]:
    """The bodies of the three demo tasks (``POST /api/v1/projects/{p}/tasks``)."""
    changelog = {"CHANGELOG.md": "# Changelog\n\n- subtract and multiply were added.\n"}
    return [
        {
            "title": "Add subtract to calc",
            "description": plan_description(
                "calc can add; it should also subtract.",
                _module("subtract", "-", 3),
                "Add subtract",
            ),
            "acceptance_criteria": ["subtract(6, 3) returns 3", "the tests pass"],
        },
        {
            "title": "Add multiply to calc",
            "description": plan_description(
                "calc should multiply as well.", _module("multiply", "*", 18), "Add multiply"
            ),
            "acceptance_criteria": ["multiply(6, 3) returns 18", "the tests pass"],
        },
        {
            "title": "Start a changelog",
            "description": plan_description(
                "Record what changed in a CHANGELOG.md.", changelog, "Start a changelog"
            ),
            "acceptance_criteria": ["CHANGELOG.md names the new functions"],
        },
    ]
