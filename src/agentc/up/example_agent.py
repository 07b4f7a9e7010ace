#!/usr/bin/python3
"""The bundled example agent (a ``command:`` harness): deterministic, no model.

As an **implementer** it reads its prompt on standard input, finds the task's data, and looks in
the task's description for one fenced block whose info string is ``agentc-example`` holding a
JSON object ``{"files": {"<relative path>": "<content>"}, "message": "<commit message>"}``. It
writes those files into the attempt's checkout (``agentc-checkout``; only new paths inside it),
runs the repository's tests (``python3 -m unittest discover -q``), commits, and submits through
the agent CLI with evidence for every acceptance criterion. A task without such a block is
released with a handoff that says so.

As a **reviewer** (its prompt holds ``<review-data>``) it runs the candidate's tests through
``$AGENTC_CANDIDATE_SHELL`` (the nested candidate sandbox) and prints its verdict as the last
line of standard output: an approval with evidence for every acceptance criterion when the tests
pass, otherwise a request for changes naming the failure.

Standard library only: it runs with the system's Python inside the launch.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

BLOCK = re.compile(r"```agentc-example[ \t]*\n(.*?)\n```", re.DOTALL)
TEST_COMMAND = "python3 -m unittest discover -q"


def event(step: str, **fields: object) -> None:
    print(json.dumps({"type": "agent", "step": step, **fields}), flush=True)


def quoted(prompt: str, tag: str) -> str | None:
    found = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", prompt, re.DOTALL)
    return found[1] if found else None


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)


def cli(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["agent-coordinator", *args], cwd=cwd, input=stdin, capture_output=True, text=True
    )


def release(checkout: Path, why: str) -> int:
    event("release", reason=why)
    done = cli(["release", "--handoff", f"The example agent did not do this task: {why}"], checkout)
    sys.stderr.write(done.stderr)
    return 0 if done.returncode == 0 else done.returncode


def plan_of(description: str) -> tuple[dict[str, str], str] | str:
    found = BLOCK.search(description)
    if not found:
        return "its description holds no agentc-example block (the change spelled out as JSON)"
    try:
        plan = json.loads(found[1])
    except ValueError as exc:
        return f"its agentc-example block is not JSON ({exc})"
    files = plan.get("files") if isinstance(plan, dict) else None
    if (
        not isinstance(files, dict)
        or not files
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
    ):
        return "its agentc-example block needs files: an object of path to content"
    message = plan.get("message") or "example agent change"
    return files, str(message)


def implement(prompt: str) -> int:
    checkout = Path("agentc-checkout").resolve()
    data = json.loads(quoted(prompt, "task-data") or "{}")
    plan = plan_of(str(data.get("description", "")))
    if isinstance(plan, str):
        return release(checkout, plan)
    files, message = plan
    for name, content in files.items():
        path = (checkout / name).resolve()
        if checkout not in path.parents or path.exists():
            return release(checkout, f"{name} is not a new path inside the checkout")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        event("wrote", path=name)
    tests = run(TEST_COMMAND.split(), checkout)
    event("tested", status=tests.returncode)
    if tests.returncode != 0:
        return release(checkout, f"the tests failed after the change: {tests.stderr[-400:]}")
    run(["git", "add", "--", *files], checkout)
    commit = run(["git", "commit", "--quiet", "-m", message], checkout)
    if commit.returncode != 0:
        return release(checkout, f"git commit failed: {commit.stderr.strip()}")
    evidence = [
        {"criterion": c, "evidence": f"wrote {', '.join(files)}; `{TEST_COMMAND}` passed"}
        for c in data.get("acceptance_criteria", [])
    ]
    body = json.dumps({"summary": message, "acceptance_evidence": evidence})
    done = cli(["submissions", "code", "--checkout", str(checkout), "--input", "-"], checkout, body)
    sys.stderr.write(done.stderr)
    event("submitted" if done.returncode == 0 else "submit failed", status=done.returncode)
    return done.returncode


def review(prompt: str) -> int:
    data = json.loads(quoted(prompt, "review-data") or "{}")
    criteria = [str(c) for c in data.get("acceptance_criteria", [])]
    verdict: dict[str, object]
    shell = os.environ.get("AGENTC_CANDIDATE_SHELL")
    if not shell:
        verdict = {
            "decision": "request_changes",
            "summary": "no candidate shell to test in",
            "findings": ["AGENTC_CANDIDATE_SHELL is not set"],
            "criteria_evidence": [],
            "amendment_decision": None,
        }
        print(json.dumps(verdict), flush=True)
        return 0
    tests = subprocess.run([shell, "-c", TEST_COMMAND], capture_output=True, text=True, check=False)
    event("tested", status=tests.returncode)
    if tests.returncode == 0:
        verdict = {
            "decision": "approve",
            "summary": f"`{TEST_COMMAND}` passes on the candidate.",
            "findings": [],
            "criteria_evidence": [
                {"criterion": c, "evidence": f"`{TEST_COMMAND}` passed on the candidate"}
                for c in criteria
            ],
            "amendment_decision": None,
        }
    else:
        verdict = {
            "decision": "request_changes",
            "summary": "The candidate's tests fail.",
            "findings": [f"`{TEST_COMMAND}` failed: {(tests.stderr or tests.stdout)[-1500:]}"],
            "criteria_evidence": [],
            "amendment_decision": None,
        }
    print(json.dumps(verdict), flush=True)
    return 0


def main() -> int:
    prompt = sys.stdin.read()
    event("start")
    if "<review-data>" in prompt:
        return review(prompt)
    return implement(prompt)


if __name__ == "__main__":
    sys.exit(main())
