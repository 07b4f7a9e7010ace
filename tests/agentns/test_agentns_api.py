"""The package surface for the supervisor: wrapper argv, --record, variable names, isolation."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

import agentc.agentns as agentns
from agentc.agentns import (
    CHILD_ENV_VARS,
    MODES,
    RECORD_FILENAME,
    RecordError,
    SessionRecord,
    UsageError,
    headless_intent,
    read_record,
    session_from_env,
    wrapper_argv,
)
from tests.agentns.kit import child_env

PACKAGE = Path(agentns.__file__).parent


def test_all_is_sorted_and_complete():
    assert agentns.__all__ == sorted(agentns.__all__, key=lambda n: (not n.isupper(), n))
    public = {n for n in vars(agentns) if not n.startswith("_")}
    modules = {"budget", "errors", "launch", "kernel", "resolve", "enforce", "cli"}
    assert set(agentns.__all__) == public - modules


def test_package_imports_nothing_else_from_agentc():
    for module in PACKAGE.glob("*.py"):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                if name == "agentc" or name.startswith("agentc."):
                    assert name.startswith("agentc.agentns"), f"{module.name} imports {name}"


def test_modules_stay_small():
    for module in PACKAGE.glob("*.py"):
        assert len(module.read_text().splitlines()) < 600, module.name


def test_wrapper_argv_shapes():
    assert wrapper_argv("coder", ["claude", "-p", "x"]) == [
        "agentns-claude",
        "--intent",
        "headless:coder",
        "--",
        "claude",
        "-p",
        "x",
    ]
    argv = wrapper_argv(
        "reviewer", ["pi"], budget="wall=600s", no_unshare=True, record="/run/1/agentns.json"
    )
    assert argv == [
        "agentns-claude",
        "--intent",
        "headless:reviewer",
        "--budget",
        "wall=600s",
        "--no-unshare",
        "--record",
        "/run/1/agentns.json",
        "--",
        "pi",
    ]


@pytest.mark.parametrize("role", ["", "  "])
def test_empty_role_is_refused(role):
    with pytest.raises(UsageError):
        headless_intent(role)


def test_empty_command_is_refused():
    with pytest.raises(UsageError):
        wrapper_argv("coder", [])


def test_names_the_child_sees():
    assert CHILD_ENV_VARS[:3] == ("AGENTNS_SESSION_ID", "AGENTNS_INTENT", "AGENTNS_MODE")
    assert MODES == ("mock", "no-unshare", "synth-fallback", "prctl")
    assert session_from_env({"AGENTNS_SESSION_ID": "a" * 32, "AGENTNS_MODE": "prctl"}) == (
        "a" * 32,
        "prctl",
    )
    assert session_from_env({"AGENTNS_SESSION_ID": "x", "AGENTNS_MODE": "bogus"}) is None
    assert session_from_env({}) is None


def test_wrapped_launch_records_id_and_mode(launcher, base_env, tmp_path):
    # End to end, as the supervisor would: build the argv, launch, read the record back.
    record_path = tmp_path / RECORD_FILENAME
    argv = wrapper_argv("coder", ["env"], budget="wall=60s,syscalls=1e9", record=record_path)
    proc = subprocess.Popen(
        [launcher, *argv[1:]],
        env=base_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    env = child_env(out)
    rec = read_record(record_path)
    assert rec == SessionRecord(
        session_id=env["AGENTNS_SESSION_ID"],
        mode="synth-fallback",
        intent="headless:coder",
        pid=proc.pid,
        budget="wall=60s,syscalls=1e9",
        budget_enforced=("wall",),
        budget_unenforced=("syscalls",),
    )
    assert env["AGENTNS_INTENT"] == "headless:coder"
    doc = json.loads(record_path.read_text())
    assert doc["format"] == 1
    assert not list(tmp_path.glob(".*.tmp")), "temporary file left behind"


def test_record_in_mock_mode(run, tmp_path):
    record_path = tmp_path / "r.json"
    r = run(
        "--intent",
        "t",
        "--record",
        str(record_path),
        "--",
        "true",
        env={"AGENTNS_SESSION_ID_OVERRIDE": "mock-1"},
    )
    assert r.returncode == 0
    rec = read_record(record_path)
    assert (rec.session_id, rec.mode, rec.budget, rec.budget_enforced) == (
        "mock-1",
        "mock",
        None,
        (),
    )


def test_unwritable_record_fails_before_exec(run, tmp_path):
    marker = tmp_path / "ran"
    target = tmp_path / "no-such-dir" / "agentns.json"
    r = run("--intent", "t", "--record", str(target), "--", "touch", str(marker))
    assert r.returncode == 2
    assert f"agentns-claude: --record {target}: No such file or directory" in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "content",
    [
        "",
        "not json",
        "[]",
        '{"format": 2}',
        '{"format": 1, "session_id": "x", "mode": "bogus", "intent": "t", "pid": 1}',
        '{"format": 1, "session_id": "x", "mode": "mock", "intent": "t", "pid": "1"}',
        '{"format": 1, "session_id": "x", "mode": "mock", "intent": "t", "pid": 1,'
        ' "budget_enforced": "wall"}',
    ],
)
def test_read_record_rejects_malformed_files(tmp_path, content):
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(RecordError):
        read_record(path)


def test_read_record_missing_file(tmp_path):
    with pytest.raises(RecordError, match="cannot read agentns record"):
        read_record(tmp_path / "absent.json")


def test_docs_cover_install_usage_mock_mode_and_the_prctl_path(run):  # A-AC10, B-AC8
    docs = (PACKAGE.parents[2] / "docs" / "agentns.md").read_text()
    for needle in (
        "## Install",
        "## Usage",
        "### Mock mode",
        "## Changelog",
        "### 0.1.0",
        "setcap cap_sys_admin+ep",
        "AGENTNS_MODE",
        "synth-fallback",
        "PR_SET_AGENT_NS",
        "AGENTNS_BUDGET_ENFORCED",
    ):
        assert needle in docs, needle
    # Every option of --help is documented.
    for option in ("--intent", "--budget", "--no-unshare", "--verbose", "--record", "--version"):
        assert option in run("--help").stdout
        assert f"`{option}" in docs, option
