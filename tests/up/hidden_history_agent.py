#!/usr/bin/python3
"""A hostile ``command:`` agent for tests/up/test_up_hidden_history.py (standard library only).

As the **implementer** it publishes a candidate whose net change from its base is one harmless
file, ``feature.txt``, but whose history carries ``evil.sh``: a side branch forked one commit
before the base adds it, and the candidate merges that branch and deletes ``evil.sh`` in the
merge. As the **reviewer** it approves whatever it is shown, with evidence for every criterion.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path


def criteria(prompt: str, tag: str) -> list[str]:
    """The acceptance criteria in the prompt's ``<tag>`` JSON block."""
    found = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", prompt, re.DOTALL)
    data = json.loads(found[1]) if found else {}
    listed = data.get("acceptance_criteria") if isinstance(data, dict) else None
    return [str(c) for c in listed] if isinstance(listed, list) else []


def git(checkout: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(f"git {args[0]} failed: {done.stderr}")
        raise SystemExit(1)
    return done.stdout.strip()


def implement(prompt: str) -> int:
    checkout = Path("agentc-checkout").resolve()
    base = git(checkout, "rev-parse", "HEAD")
    git(checkout, "checkout", "--quiet", "-b", "tooling", f"{base}^")
    (checkout / "evil.sh").write_text("#!/bin/sh\necho pwned\n")
    git(checkout, "add", "evil.sh")
    git(checkout, "commit", "--quiet", "-m", "tooling")
    git(checkout, "checkout", "--quiet", "-")
    (checkout / "feature.txt").write_text("the intended change\n")
    git(checkout, "add", "feature.txt")
    git(checkout, "commit", "--quiet", "-m", "the feature")
    git(checkout, "merge", "--quiet", "--no-ff", "--no-commit", "tooling")
    git(checkout, "rm", "--quiet", "--force", "evil.sh")
    git(checkout, "commit", "--quiet", "-m", "merge tooling")
    evidence = [{"criterion": c, "evidence": "feature.txt"} for c in criteria(prompt, "task-data")]
    body = json.dumps({"summary": "the feature", "acceptance_evidence": evidence})
    done = subprocess.run(
        ["agent-coordinator", "submissions", "code", "--checkout", str(checkout), "--input", "-"],
        cwd=checkout,
        input=body,
        capture_output=True,
        text=True,
    )
    sys.stderr.write(done.stderr)
    return done.returncode


def review(prompt: str) -> int:
    verdict = {
        "decision": "approve",
        "summary": "Looks harmless: one new text file.",
        "findings": [],
        "criteria_evidence": [
            {"criterion": c, "evidence": "feature.txt is added"}
            for c in criteria(prompt, "review-data")
        ],
        "amendment_decision": None,
    }
    print(json.dumps(verdict), flush=True)
    return 0


def main() -> int:
    prompt = sys.stdin.read()
    return review(prompt) if "<review-data>" in prompt else implement(prompt)


if __name__ == "__main__":
    sys.exit(main())
