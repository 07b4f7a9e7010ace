"""Two launches at once, one hostile to the other (issue 33), in personal and host mode.

The victim keeps a secret in its run and checkout, listens on a loopback port and an abstract
Unix socket, and runs; the attacker, told the victim's launch id, its sandbox's host pid, the
state root and the port, tries to read, signal, see, connect to and exhaust it (its own
processes, memory and file size are its cgroup's and rlimits'). Every try is refused or hits
the attacker's own limit, and the victim, let go afterwards, finds itself unharmed and
submits (tests/kit/pair_agent.py is both agents).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import httpx

from tests.kit.live import LiveServer
from tests.kit.pg import free_port
from tests.supervisor.loop.host_kit import HostLoop
from tests.supervisor.loop.kit import LoopKit, agent_run, make_loop_kit

PAIR_AGENT = Path(__file__).parents[2] / "kit" / "pair_agent.py"
LIMITS = {"memory_mib": 256, "processes": 128, "file_mib": 16}


def _file(loop: LoopKit, title: str, plan: dict[str, Any]) -> str:
    description = "Pair.\n\n```pair\n" + json.dumps(plan) + "\n```\n"
    task: str = loop.task(title, description, ("unharmed",))["id"]
    return task


def _said(loop: LoopKit, record: dict[str, Any]) -> dict[str, Any]:
    """What the launch's agent printed so far, by try."""
    events = loop.state / "impl/runs" / record["launch_id"] / "events.jsonl"
    said: dict[str, Any] = {}
    try:
        lines = events.read_text().splitlines()
    except OSError:
        return said
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("type") == "pair":
            said[item["attempt"]] = item.get("result")
    return said


def _record_of(loop: LoopKit, task: str) -> list[dict[str, Any]]:
    return [r for r in loop.records() if r["task"] == task and r.get("pid")]


def _attack(loop: LoopKit) -> None:
    """Run the victim, then the attacker beside it; check every try; let both go."""
    port = free_port()
    victim_task = _file(loop, "the victim", {"role": "victim", "port": port})
    proc = loop.run_forever()
    try:
        [victim] = loop.wait_for(lambda: _record_of(loop, victim_task), why=loop.log.read_text)
        loop.wait_for(lambda: "ready" in _said(loop, victim), why=loop.log.read_text)
        plan = {
            "role": "attacker",
            "victim": victim["launch_id"],
            "pid": victim["pid"],
            "state": str(loop.state),
            "port": port,
        }
        attacker_task = _file(loop, "the attacker", plan)
        [attacker] = loop.wait_for(lambda: _record_of(loop, attacker_task), why=loop.log.read_text)
        tries = loop.wait_for(
            lambda: "done" in (said := _said(loop, attacker)) and said, why=loop.log.read_text
        )
        assert victim in loop.records()  # the victim ran all along, beside the attacker
        for name in ("impl", "rev"):
            assert tries[f"read the victim's {name} secret"].startswith("denied"), tries
        assert tries["read the victim's checkout"].startswith("denied"), tries
        assert victim["launch_id"] not in tries["list the runs"], tries
        assert tries["signal the victim"] == "denied: ProcessLookupError", tries
        assert tries["see processes"]["victim"] is False and tries["see processes"]["count"] < 20
        assert tries["connect to the victim's port"].startswith("refused"), tries
        assert tries["connect to the victim's socket"].startswith("refused"), tries
        made, errno = (int(x) for x in tries["exhaust processes"]["out"].split())
        assert errno == 11 and made < LIMITS["processes"], tries  # EAGAIN: its own limit
        assert tries["exhaust memory"]["status"] != 0, tries  # killed or refused at its own
        assert tries["write a huge file"] == "denied: OSError", tries
        for record in (victim, attacker):
            (loop.state / "impl/runs" / record["launch_id"] / "tmp/go").touch()
        unharmed = loop.wait_for(lambda: _said(loop, victim).get("unharmed"))
        assert unharmed == {"secret": True, "tcp": "victim", "unix": "victim", "forks": True}
        loop.wait_for(lambda: not loop.records(), why=loop.log.read_text)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    assert loop.show(victim_task)["work_status"] == "waiting_review", loop.log.read_text()
    finished = {f["task"]: f for f in loop.records("finished")}
    assert finished[victim_task]["outcome"] == "left as it is (submitted)"
    assert finished[attacker_task]["outcome"] == "released"


def test_in_personal_mode_one_launch_cannot_reach_another(
    server: LiveServer, admin: httpx.Client, short_tmp: Path
) -> None:
    loop = make_loop_kit(short_tmp, server, admin, "#!/bin/sh\nexit 0\n", limits=LIMITS)
    shutil.copyfile(PAIR_AGENT, loop.agent)
    loop.write_config(launches=2, poll_seconds=1)
    _attack(loop)


def test_in_host_mode_one_launch_cannot_reach_another(host: HostLoop) -> None:
    """Both launches run as the one implementer account: the sandbox, not the account,
    keeps them apart."""
    loop = host.loop
    program = host.root / "agent" / "pair.py"
    shutil.copyfile(PAIR_AGENT, program)
    os.chmod(program, 0o755)  # noqa: S103 - the implementer account runs it
    loop.run = agent_run(program, launches=2, poll_seconds=1)
    loop.top["limits"] = LIMITS
    loop.write_config()
    _attack(loop)
