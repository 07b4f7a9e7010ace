"""A launch's event log: one chain of numbered lines, several writing processes, any change
afterwards found; unsafe directories, names and links refused."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections import Counter
from pathlib import Path

import pytest

from agentc.files import json_line, launchlog
from agentc.files.launchlog import LaunchLogError, LaunchLogs, read_log, summarize


def _write_many(directory: str, source: str, count: int) -> None:
    logs = LaunchLogs(Path(directory), source)
    for i in range(count):
        logs.append("launch-1", {"event": "tick", "i": i})


def test_writers_in_several_processes_keep_one_chain(tmp_path: Path) -> None:
    directory = launchlog.ensure_directory(tmp_path / "logs")
    procs = [
        multiprocessing.get_context("fork").Process(
            target=_write_many, args=(str(directory), f"w{n}", 200)
        )
        for n in range(4)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    read = read_log(directory, "launch-1")
    assert read.problems == []
    assert [e["seq"] for e in read.events] == list(range(1, 801))
    assert Counter(e["source"] for e in read.events) == dict.fromkeys(("w0", "w1", "w2", "w3"), 200)
    assert os.stat(directory / "launch-1.jsonl").st_mode & 0o777 == 0o600


def test_a_change_afterwards_breaks_the_chain(tmp_path: Path) -> None:
    logs = LaunchLogs(launchlog.ensure_directory(tmp_path / "logs"), "gateway")
    for i in range(5):
        logs.append("l1", {"event": "model_call", "usd": 0.01 * i})
    path = tmp_path / "logs/l1.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert read_log(tmp_path / "logs", "l1").problems == []

    edited = json.loads(lines[2])
    edited["usd"] = 0.0
    path.write_bytes(b"".join([*lines[:2], json_line(edited).encode(), *lines[3:]]))
    # The changed line still names its place; the next one no longer chains to it.
    assert read_log(tmp_path / "logs", "l1").problems == [
        "line 4 breaks the chain (changed, moved or removed)"
    ]
    path.write_bytes(b"".join([lines[0], *lines[2:]]))  # one removed
    assert read_log(tmp_path / "logs", "l1").problems[0].startswith("line 2 breaks the chain")
    path.write_bytes(b"".join(lines[:3]) + b'{"seq": 4, "torn')  # a crash mid-line
    logs.append("l1", {"event": "after"})  # chains to the torn bytes, on a line of its own
    read = read_log(tmp_path / "logs", "l1")
    assert read.problems == ["line 4 is not a whole JSON object"]
    assert [e["event"] for e in read.events] == ["model_call"] * 3 + ["after"]


def test_unsafe_directories_names_and_links_are_refused(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o777)
    os.chmod(open_dir, 0o777)  # noqa: S103 - the unsafe directory under test
    with pytest.raises(LaunchLogError, match="writable by no one else"):
        launchlog.check_directory(open_dir)
    (tmp_path / "link").symlink_to(tmp_path)
    with pytest.raises(LaunchLogError, match="not a directory"):
        launchlog.check_directory(tmp_path / "link")
    directory = launchlog.ensure_directory(tmp_path / "logs")
    logs = LaunchLogs(directory, "egress")
    for bad in ("../escape", ".hidden", "a/b", "", "x" * 129):
        assert logs.append(bad, {"event": "x"}) is False
    assert not (tmp_path / "escape.jsonl").exists()
    (directory / "l2.jsonl").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        logs.append("l2", {"event": "x"})
    assert not (tmp_path / "elsewhere").exists()
    assert read_log(directory, "l2").problems  # a link is not read either


def test_a_long_event_is_cut_to_its_kind(tmp_path: Path) -> None:
    logs = LaunchLogs(launchlog.ensure_directory(tmp_path / "logs"), "egress")
    logs.append("l3", {"event": "connection", "reason": "x" * 50_000})
    logs.append("l3", {"event": "next"})
    read = read_log(tmp_path / "logs", "l3")
    assert read.problems == []
    assert read.events[0]["truncated"] is True and "reason" not in read.events[0]


def test_the_summary_names_calls_spend_hosts_denials_and_the_unusual(tmp_path: Path) -> None:
    logs = LaunchLogs(launchlog.ensure_directory(tmp_path / "logs"), "gateway")
    call = {"event": "model_call", "model": "claude-sonnet-5", "outcome": "ok"}
    logs.append("l4", {**call, "usd": 0.5, "input_tokens": 10, "output_tokens": 2})
    logs.append("l4", {**call, "usd": 0.25, "input_tokens": 5, "output_tokens": 1})
    logs.append("l4", {**call, "outcome": "refused_policy", "policy": "model", "usd": None})
    egress = LaunchLogs(tmp_path / "logs", "egress")
    for _ in range(2):
        egress.append("l4", {"event": "connection", "host": "github.com", "port": 443,
                             "allowed": True})  # fmt: skip
        egress.append("l4", {"event": "connection_closed", "host": "github.com", "port": 443,
                             "bytes_up": 100, "bytes_down": 2000})  # fmt: skip
    egress.append("l4", {"event": "connection", "host": "evil.example", "port": 443,
                         "allowed": False, "reason": "host is not on the allowlist"})  # fmt: skip
    loop = LaunchLogs(tmp_path / "logs", "supervisor")
    loop.append("l4", {"event": "push", "ok": False, "ref": None, "error": "a secret"})
    loop.append("l4", {"event": "launch_ended", "exit_code": 0, "limit": "memory",
                       "killed": {"sleep": 2}})  # fmt: skip
    summary = summarize(read_log(tmp_path / "logs", "l4"))
    assert summary["model_calls"] == 3 and summary["usd"] == 0.75
    assert (summary["input_tokens"], summary["output_tokens"]) == (15, 3)
    assert summary["refused_calls"] == {"refused_policy": 1}
    assert summary["hosts"] == [
        {"host": "github.com", "port": 443, "connections": 2, "bytes_up": 200, "bytes_down": 4000}
    ]
    assert summary["denied"] == [
        {"host": "evil.example", "port": 443, "reason": "host is not on the allowlist", "count": 1}
    ]
    assert summary["ended"] == {"exit_code": 0, "limit": "memory", "killed": {"sleep": 2}}
    assert summary["unusual"] == [
        "1 model call(s) refused by the model policy",
        "1 network connection(s) refused by the egress proxy",
        "a push was refused by the push helper",
        "the launch hit its memory limit",
        "the reaper killed 2 leftover process(es)",
    ]


def test_a_held_file_removed_or_replaced_is_opened_again(tmp_path: Path) -> None:
    directory = launchlog.ensure_directory(tmp_path / "logs")
    logs = LaunchLogs(directory, "gateway", keep_open=2)
    for name in ("a", "b", "c", "a"):  # "a" was let go (two kept), then opened again
        logs.append(name, {"event": "x"})
    assert [e["seq"] for e in read_log(directory, "a").events] == [1, 2]
    (directory / "a.jsonl").unlink()
    logs.append("a", {"event": "after removal"})
    (directory / "b.jsonl").rename(directory / "b.old")
    (directory / "b.jsonl").write_text("")  # another file at the path
    logs.append("b", {"event": "after replacement"})
    for name, kind in (("a", "after removal"), ("b", "after replacement")):
        read = read_log(directory, name)
        assert read.problems == [] and [(e["seq"], e["event"]) for e in read.events] == [(1, kind)]
    logs.close()
