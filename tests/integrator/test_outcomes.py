"""Rebase, conflict, a failing check, a red target, the fast-forward policy: each ends with
nothing landed twice and nothing lost."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.client.kit import git
from tests.core.kit import FORMATS
from tests.integrator.kit import NO_BROKEN, PASS, Setup, make_setup
from tests.integrator.kit import run_once as _run
from tests.kit.live import LiveServer


def _files(s: Setup, revision: str) -> set[str]:
    return set(git(s.origin, "ls-tree", "--name-only", revision).split())


def test_a_diverged_candidate_is_rebased_and_lands(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    before = s.tip()
    first = s.approved({"a.txt": "a\n"})
    second = s.approved({"b.txt": "b\n"})  # same base: diverges once the first lands
    _run(s)

    tip = s.tip()
    assert _files(s, tip) == {"README", "a.txt", "b.txt"}
    assert git(s.origin, "rev-list", "--count", "--merges", tip) == "0"  # linear history
    for sub in (first, second):
        assert s.task(sub["task"]["id"])["work_status"] == "done"
    # The first landed on the target it was built on; the second was put on top of the first.
    landed_first = s.landing(first["task"]["id"])["landed_revision"]
    s.lands_exactly(landed_first, before, first["submission"])
    rebased = s.landing(second["task"]["id"])["landed_revision"]
    assert rebased == tip != second["submission"]["candidate_revision"]
    s.lands_exactly(tip, landed_first, second["submission"])
    assert len(s.landings()) == 2


def test_a_conflict_sends_the_candidate_back(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS)
    first = s.approved({"same.txt": "one\n"})
    second = s.approved({"same.txt": "two\n"})
    _run(s)
    tip = s.tip()
    assert tip == s.landing(first["task"]["id"])["landed_revision"]
    assert s.task(second["task"]["id"])["work_status"] == "ready"  # sent back to its implementer
    sent = [r for r in s.reports() if r["event"] == "sent_back"]
    assert [r["task_id"] for r in sent] == [second["task"]["id"]]
    # The conflicting path, the target's commit that changed it (the other side), git's words.
    landed = git(s.origin, "rev-parse", "--short", tip)
    assert sent[0]["reason"].startswith(
        f"conflict with the target in same.txt (changed on the target {tip} by {landed}): "
    )
    assert "CONFLICT (add/add): Merge conflict in same.txt" in sent[0]["reason"]
    assert s.landing(second["task"]["id"])["sent_back"]["reason_code"] == "conflict"
    # Nothing changes until the target moves: the same candidate is not tried again.
    _run(s)
    assert s.tip() == tip
    assert [r["event"] for r in s.reports()].count("sent_back") == 1
    assert len(s.landings()) == 1
    # The integrator's repository is bare: nothing is ever checked out in it.
    assert git(s.work_dir / "repo", "rev-parse", "--is-bare-repository") == "true"


def test_a_failing_check_sends_the_candidate_back_with_the_log_tail(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(NO_BROKEN)
    before = s.tip()
    bad = s.approved({"broken": "x\n"})
    _run(s)
    assert s.tip() == before
    assert s.task(bad["task"]["id"])["work_status"] == "ready"  # sent back to its implementer
    back = s.landing(bad["task"]["id"])["sent_back"]
    assert back["reason_code"] == "check_failed" and back["reason"] == "check unit failed (exit 3)"
    assert back["log_tail"]
    [sent] = s.reports()
    assert sent["event"] == "sent_back"
    assert sent["reason"] == "check unit failed (exit 3)"
    assert "the tree is broken" in sent["tail"]
    assert sent["checks"][0]["outcome"] == "failed"
    assert s.landings() == []


def test_a_red_target_is_reported_not_blamed_on_the_candidate(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(NO_BROKEN)
    good = s.approved({"fine.txt": "x\n"})
    red = s.push_to_target({"broken": "x\n"}, "break the target")
    _run(s)
    assert s.tip() == red
    [report] = s.reports()
    assert report["event"] == "target_red" and report["target"] == red
    assert "the tree is broken" in report["tail"]
    assert s.task(good["task"]["id"])["work_status"] == "waiting_integration"  # not blamed
    # Once the target is repaired, the same candidate lands.
    s.remove_from_target("broken")
    _run(s)
    assert s.task(good["task"]["id"])["work_status"] == "done"
    assert "fine.txt" in _files(s, s.tip()) and "broken" not in _files(s, s.tip())
    assert len(s.landings()) == 1


def test_fast_forward_policy_sends_a_diverged_candidate_back(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    s = make_setup(tmp_path, server.url, admin)
    s.write_config(PASS, merge_policy="fast-forward")
    first = s.approved({"a.txt": "a\n"})
    second = s.approved({"b.txt": "b\n"})
    _run(s)
    assert s.tip() == s.landing(first["task"]["id"])["landed_revision"]
    assert s.task(second["task"]["id"])["work_status"] == "ready"  # sent back to its implementer
    [sent] = [r for r in s.reports() if r["event"] == "sent_back"]
    assert sent["reason"] == (
        "the target moved since the candidate's base; fast-forward lands only changes built on "
        "the current target"
    )


def test_a_check_log_quoting_a_secret_is_sent_back_with_a_note_instead(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    """The candidate's check prints a secret (a GitHub token, as the candidate's code could):
    the coordinator refuses the send-back quoting the log's tail, and the integrator sends it
    back once more with a note in the tail's place, so the candidate is not stuck."""
    s = make_setup(tmp_path, server.url, admin)
    secret = FORMATS["a GitHub token"]()
    check = f"test ! -e c.txt || {{ echo using {secret}; exit 4; }}"
    s.write_config({"unit": ["/bin/sh", "-c", check]})
    bad = s.approved({"c.txt": "c\n"})
    _run(s)
    assert s.task(bad["task"]["id"])["work_status"] == "ready"
    back = s.landing(bad["task"]["id"])["sent_back"]
    assert back["reason"] == "check unit failed (exit 4)"
    assert "refused it" in back["log_tail"] and "a GitHub token" in back["log_tail"]
    assert secret not in str(back)
    [sent] = s.reports()
    assert sent["event"] == "sent_back"


def test_a_landing_whose_check_output_quotes_a_secret_lands_without_the_output(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    """A passing check prints a secret: the landing with the checks' commands and output tails
    is refused, and the integrator records it again without them, so the task is done."""
    s = make_setup(tmp_path, server.url, admin)
    secret = FORMATS["a GitHub token"]()
    s.write_config({"unit": ["/bin/sh", "-c", f"echo using {secret}"]})
    good = s.approved({"d.txt": "d\n"})
    _run(s)
    landing = s.landing(good["task"]["id"])
    assert landing["landed_revision"] == s.tip()
    [check] = landing["checks"]
    assert check["outcome"] == "passed" and check["tail"] == "" and check["command"] == ""
    assert isinstance(check["duration_ms"], int)
