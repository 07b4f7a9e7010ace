"""Approved code submissions land on the target branch of a real bare repository, with the
required checks run in the real sandbox, and the coordinator records each landing once."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx

from tests.client.kit import git
from tests.integrator.kit import PASS, clean_env, make_setup
from tests.kit.live import LiveServer


def test_an_approved_task_lands_and_is_done(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    before = s.tip()
    sub = s.approved({"greeting.txt": "hi\n"})
    task_id = sub["task"]["id"]
    candidate = sub["submission"]["candidate_revision"]

    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr

    # The integrator's own commit of the reviewed change, on the target it was built on; the
    # candidate itself never lands.
    tip = s.tip()
    assert tip != candidate and s.tree(tip) == s.tree(candidate)
    s.lands_exactly(tip, before, sub["submission"])
    assert s.trailers(tip)["Agentc-Task"] == task_id
    assert git(s.origin, "log", "-1", "--format=%s", tip) == "change ['greeting.txt']"
    assert s.task(task_id)["work_status"] == "done"
    landing = s.landing(task_id)
    assert (landing["state"], landing["landed_revision"]) == ("completed", tip)
    assert landing["target_revision"] == before
    assert [(c["outcome"], c["exit_code"]) for c in landing["checks"]] == [("passed", 0)]
    assert len(s.landings()) == 1
    [report] = s.reports()
    assert report["event"] == "landed" and report["revision"] == tip
    assert report["reviewed_diff"] == s.trailers(tip)["Agentc-Reviewed-Diff"]
    assert [c["outcome"] for c in report["checks"]] == ["passed"]
    assert "checking" in Path(report["checks"][0]["log"]).read_text()

    # A second poll finds nothing to do and changes nothing.
    again = s.integrator("run", "--once")
    assert again.returncode == 0, again.stderr
    assert s.tip() == tip and len(s.landings()) == 1 and len(s.reports()) == 1


def test_the_polling_loop_lands_work_as_it_is_approved(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    proc = subprocess.Popen(
        s.argv("run"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env()
    )
    try:
        for name in ("one.txt", "two.txt"):
            task_id = s.approved({name: "x\n"})["task"]["id"]
            deadline = time.monotonic() + 120
            while s.task(task_id)["work_status"] != "done":
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "not landed"
                time.sleep(0.2)
            assert name in git(s.origin, "ls-tree", "--name-only", s.tip())
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert len(s.landings()) == 2
