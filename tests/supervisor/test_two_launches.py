"""Two launches of one process: the end of one reaps only its own processes.

The loop's process is a child subreaper and runs launches side by side (issue 33). A launch's
end kills and reaps what is left of *that* launch (its process group and cgroup,
:class:`agentc.sandbox.reaper.Scope`); the other launch, started earlier or later, runs on. The
launches run in a process of their own (it marks itself the subreaper; the test runner must
not), which reports what it saw as JSON.
"""

from __future__ import annotations

import subprocess
import textwrap
import time

from tests.supervisor.kit import Kit, script_report, terminal

SIDE_BY_SIDE = textwrap.dedent(
    """
    import json, os, signal, sys, time, uuid
    from pathlib import Path
    from agentc.sandbox import reaper
    from agentc.supervisor.config import load_config
    from agentc.supervisor.launch import execute
    from agentc.supervisor.launch.plan import plan
    from agentc.supervisor.launch.request import LaunchRequest

    config = load_config(Path(sys.argv[1]))

    def start(run, clone):
        request = LaunchRequest(role="implementer", harness="claude", run=Path(run),
                                clone=Path(clone), launch_id=str(uuid.uuid4()), model="default")
        return execute.start(plan(config, request))

    def comms(running):
        return sorted(p.comm for p in reaper.tree(running.pid).values())

    long = start(sys.argv[4], sys.argv[5])  # started first, ends last
    while not (Path(sys.argv[4]) / "tmp/ready").exists():
        time.sleep(0.02)
    short = start(sys.argv[2], sys.argv[3])
    ended = execute.finish(short)  # it exits by itself, leaving processes behind
    seen = {"short": ended.reason, "long_alive": long.proc.poll() is None,
            "long_tree": comms(long)}
    os.killpg(long.pid, signal.SIGTERM)  # a drain
    seen["long"] = execute.finish(long).reason
    seen["left"] = sorted(p.comm for p in reaper._scan(os.getpid()).values())
    print(json.dumps(seen))
    """
)


def test_one_launch_ends_while_another_runs_and_only_its_own_processes_go(kit: Kit) -> None:
    tag = f"{time.monotonic_ns() % 10**9}"
    # The short launch leaves a setsid'd tree and a double-forked sleep behind when it exits.
    short = kit.new_run(
        f"(setsid sh -c 'sleep 7{tag} & sleep 8{tag}' &) ; (sleep 9{tag} &) ; sleep 0.3; exit 0\n"
    )
    long = kit.new_run("echo ready > $TMPDIR/ready; exec sleep 3000\n")
    seen = script_report(SIDE_BY_SIDE, str(kit.config), *map(str, short), *map(str, long))
    assert seen["short"] == "exited"
    # The other launch was not touched: its sandbox and its harness still ran.
    assert seen["long_alive"] is True and "sleep" in seen["long_tree"], seen
    assert seen["long"] == "killed" and seen["left"] == []
    assert terminal(short[0])["reason"] == "exited" and terminal(long[0])["reason"] == "killed"
    left = subprocess.run(["pgrep", "-f", f"sleep [789]{tag}"], capture_output=True, text=True)
    assert left.stdout == ""
