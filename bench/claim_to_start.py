"""Claim to start: from a task becoming ready to the harness's first instruction, step by step.

Run as root: ``uv run python bench/claim_to_start.py [--rounds 5] [--repo-mb 50]``. A real
coordinator (SQLite) runs in a subprocess; the project's repository is a local bare repository
of ``--repo-mb`` MB (incompressible files in one commit). Each round creates a ready task, then
runs, in this process, the loop's own steps with the loop's own functions
(:mod:`agentc.supervisor.loop`): ``next``, connect and claim, mirror update, clone, worktree
(add and register), the launch's attempt credential (minted), prompt (render and write, the
credential handed over), sandbox start (plan, launch preflight,
``launch_execute.start``) and the harness's first instruction: a ``command:`` agent whose first
act prints ``date +%s%N``. Then it measures the loop's launch of ``/bin/true`` from this warm
process (start and finish: markers, sealed prompt, syscall filter, limits, reaping) against
bare ``bwrap --ro-bind / / true``, interleaved round by round.

Revoking the credential after the launch is timed as well (off the path to the first
instruction). Prints the median of each step in milliseconds, ready-to-first-instruction, what
the attempt credential adds, and the ratio of
the loop's launch to bare bwrap. Targets: ready to first instruction under 1 s; the loop's launch
at most 30 ms over bare bwrap.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.client.kit import admin_project, issue_token, write_credentials  # noqa: E402
from tests.kit.live import live_server  # noqa: E402
from tests.supervisor.kit import make_kit  # noqa: E402

from agentc.supervisor.config import load_config  # noqa: E402
from agentc.supervisor.contracts import implementer_prompt  # noqa: E402
from agentc.supervisor.launch import agentsession, preflight  # noqa: E402
from agentc.supervisor.launch import execute as launch_execute  # noqa: E402
from agentc.supervisor.launch import plan as launch_plan  # noqa: E402
from agentc.supervisor.launch.request import CoordinatorAccess, LaunchRequest  # noqa: E402
from agentc.supervisor.launch.rundir import RunLayout, prepare  # noqa: E402
from agentc.supervisor.loop import coordinator, repo  # noqa: E402
from agentc.supervisor.loop.implementer import BINDING_COPY, layout_of  # noqa: E402
from agentc.supervisor.loop.run import Loop  # noqa: E402

T = TypeVar("T")
AGENT = "#!/bin/sh\ndate +%s%N\nexec cat > /dev/null\n"
STEPS = (
    "next",
    "claim",
    "mirror",
    "clone",
    "worktree",
    "credential",
    "prompt",
    "sandbox start",
    "first",
)


def make_origin(root: Path, megabytes: int) -> Path:
    work, origin = root / "work", root / "origin.git"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    for i in range(megabytes):
        (work / f"blob{i:03}.bin").write_bytes(os.urandom(1 << 20))
    (work / "AGENTS.md").write_text("Run the tests.\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x.invalid"}
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "repo"], check=True, env=env)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(origin)], check=True)
    return origin


class Round:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    def step(self, name: str, call: Callable[[], T]) -> T:
        start = time.perf_counter()
        value = call()
        self.ms[name] = (time.perf_counter() - start) * 1000
        return value


def one_round(loop: Loop, admin: Any, project: str, url: str) -> tuple[Round, float]:
    resp = admin.post(
        f"/api/v1/projects/{project}/tasks",
        json={"title": "bench", "acceptance_criteria": ["done"]},
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    resp.raise_for_status()
    ready_ns = time.time_ns()
    r = Round()
    with loop.client() as client:
        action = r.step("next", client.next)["action"]
    launch_id = str(uuid.uuid4())
    layout: RunLayout = layout_of(loop, launch_id)
    private = loop.records.sessions / launch_id
    with coordinator.session_client(loop.binding, private, launch_id) as client:

        def claim() -> dict[str, Any]:
            client.connect(harness="agentc-supervisor-bench", new=True)
            out: dict[str, Any] = client.claim(action["task_id"], action["task_revision"]).data
            return out

        got = r.step("claim", claim)["claim"]
        head = r.step("mirror", lambda: repo.update_mirror(loop.mirror, url, "main"))
        for path in (layout.run, layout.clone):
            path.mkdir(mode=0o700)
        cfg = loop.config.run
        r.step(
            "clone",
            lambda: repo.clone(
                loop.mirror,
                head,
                layout.clone,
                origin_url=url,
                name=cfg.git_name,
                email=cfg.git_email,
            ),
        )
        checkout = layout.clone / "agentc-checkout"
        r.step("worktree", lambda: client.prepare_worktree(str(layout.clone), str(checkout), head))
        attempt = got["attempt"]
        token = r.step(
            "credential",
            lambda: coordinator.mint_launch_credential(
                client, attempt["id"], attempt["generation"]
            ),
        )

        def prompt() -> None:
            text = implementer_prompt(
                project=project,
                task=got["task"],
                session=launch_id,
                attempt=attempt["id"],
                generation=attempt["generation"],
                checkout=str(checkout),
                instructions=repo.instruction_files(loop.mirror, head),
            )
            layout.prompt.write_text(text)
            shutil.copyfile(loop.binding.repo_config, layout.run / BINDING_COPY)
            prepare(layout)
            coordinator.hand_over(
                client, loop.binding, layout.run / "state/coordinator", launch_id, token
            )

        r.step("prompt", prompt)
        access = CoordinatorAccess(launch_id, layout.run / BINDING_COPY, True)
        request = LaunchRequest(
            role="implementer",
            harness=loop.config.run.harness,
            run=layout.run,
            clone=layout.clone,
            launch_id=launch_id,
            attempt=attempt["id"],
            generation=attempt["generation"],
            coordinator=access,
        )

        def start() -> launch_execute.RunningLaunch:
            session = agentsession.ensure(loop.config, "implementer")
            plan = launch_plan.plan(
                loop.config, dataclasses.replace(request, agent_session=session)
            )
            problems = preflight.launch_problems(loop.config, plan)
            assert not problems, problems
            return launch_execute.start(plan)

        spawned_ns = time.time_ns()
        running = r.step("sandbox start", start)
        events = layout.run / "events.jsonl"
        while not events.read_text().strip():
            time.sleep(0.001)
        first_ns = int(events.read_text().split()[0])
        r.ms["sandbox start"] = (first_ns - spawned_ns) / 1e6  # up to the first instruction
        running.proc.kill()
        launch_execute.finish(running)
        r.step(
            "revoke",
            lambda: coordinator.revoke_launch_credentials(
                client, attempt["id"], attempt["generation"]
            ),
        )
        client.release("bench", attempt_id=attempt["id"], generation=attempt["generation"])
    for path in (layout.run, layout.clone, private):
        shutil.rmtree(path, ignore_errors=True)
    return r, (first_ns - ready_ns) / 1e6


def _launch_true(loop: Loop, config: Any, session: Any) -> float:
    launch_id = str(uuid.uuid4())
    layout = layout_of(loop, launch_id)
    for path in (layout.run, layout.clone):
        path.mkdir(mode=0o700)
    layout.prompt.write_text("")
    request = LaunchRequest(
        role="implementer",
        harness="command:/bin/true",
        run=layout.run,
        clone=layout.clone,
        launch_id=launch_id,
        agent_session=session,
    )
    start = time.perf_counter()
    plan = launch_plan.plan(config, request)
    outcome = launch_execute.finish(launch_execute.start(plan))
    took = (time.perf_counter() - start) * 1000
    assert outcome.exit_code == 0, outcome
    for path in (layout.run, layout.clone):
        shutil.rmtree(path)
    return took


def bare_vs_loop(loop: Loop, rounds: int) -> dict[str, list[float]]:
    """Bare bwrap, the loop's launch without relays, and with the coordinator relay (whose
    in-sandbox half, ``agentc-supervisor netns-relay``, is a Python process)."""
    bwrap = str(loop.config.bubblewrap)
    times: dict[str, list[float]] = {"bare bwrap": [], "loop launch": [], "with relay": []}
    plain = dataclasses.replace(loop.config, coordinator_listen=None)
    session = agentsession.ensure(loop.config, "implementer")
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run([bwrap, "--ro-bind", "/", "/", "true"], check=True)
        times["bare bwrap"].append((time.perf_counter() - start) * 1000)
        times["loop launch"].append(_launch_true(loop, plain, session))
        times["with relay"].append(_launch_true(loop, loop.config, session))
    return times


def _phases(loop: Loop, config: Any, session: Any, launches: int) -> None:
    """Wall-clock medians of the launch's phases (no profiler: it would slow the child)."""
    import subprocess as sp

    from agentc.sandbox import reaper
    from agentc.sandbox.limits import LaunchLimits

    spans: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spans.setdefault(name, []).append((time.perf_counter() - t) * 1000)

        return wrapper

    patches = [
        (launch_plan, "plan"),
        (launch_execute, "start"),
        (launch_execute, "finish"),
        (sp.Popen, "__init__"),
        (sp.Popen, "wait"),
        (reaper, "reap_leftovers"),
        (LaunchLimits, "create"),
        (LaunchLimits, "remove"),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name in patches]
    for obj, name, fn in saved:
        setattr(obj, name, timed(f"{getattr(obj, '__name__', obj)}.{name}", fn))
    try:
        total = [_launch_true(loop, config, session) for _ in range(launches)]
    finally:
        for obj, name, fn in saved:
            setattr(obj, name, fn)
    print(f"total {statistics.median(total):.2f} ms")
    for name, values in spans.items():
        print(f"  {name:<40} {statistics.median(values):7.2f} ms x{len(values)}")


def profile_launch(loop: Loop, launches: int, phases: bool) -> None:
    """cProfile of the loop's launch of ``/bin/true`` (no relays), ``launches`` times; with
    ``phases``, the wall-clock medians of its phases instead."""
    import cProfile
    import pstats

    plain = dataclasses.replace(loop.config, coordinator_listen=None)
    session = agentsession.ensure(loop.config, "implementer")
    _launch_true(loop, plain, session)  # warm caches
    if phases:
        _phases(loop, plain, session, launches)
        return
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(launches):
        _launch_true(loop, plain, session)
    profiler.disable()
    print(f"profile of {launches} launches of /bin/true (cumulative, per call totals):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(30)


def measure(
    config_path: Path,
    url: str,
    project: str,
    origin: str,
    rounds: int,
    profile: int = 0,
    phases: bool = False,
) -> int:
    """The measured part, in a process of its own: a launch reaps every process below the one
    that started it (the child subreaper), which must not include the coordinator."""
    from tests.kit.live import ADMIN_PASSWORD, admin_at

    admin = admin_at(url, url, ADMIN_PASSWORD)
    loop = Loop(load_config(config_path))
    loop.start()
    if profile:
        profile_launch(loop, profile, phases)
        return 0
    results, totals = [], []
    for _ in range(rounds + 1):  # the first round fills caches: not counted
        r, total = one_round(loop, admin, project, origin)
        results.append(r)
        totals.append(total)
    results, totals = results[1:], totals[1:]
    times = bare_vs_loop(loop, max(10, rounds * 4))
    admin.close()
    print(f"rounds: {rounds}; medians in milliseconds")
    for name in STEPS[:-1]:
        print(f"  {name:<14} {statistics.median(r.ms[name] for r in results):8.1f}")
    total = statistics.median(totals)
    print(f"ready -> first instruction: {total:.1f} ms (target: under 1000 ms)")
    minted = statistics.median(r.ms["credential"] for r in results)
    revoked = statistics.median(r.ms["revoke"] for r in results)
    print(
        f"  the attempt credential: minting {minted:.1f} ms on the way "
        f"({minted / total:.1%} of it), revoking {revoked:.1f} ms after the launch"
    )
    base = statistics.median(times["bare bwrap"])
    for name, values in times.items():
        median = statistics.median(values)
        added = median - base
        print(f"  {name:<12} {median:7.1f} ms  ratio {median / base:5.2f}  added {added:+7.1f}")
    print("target: the loop's launch (no relays) at most +30 ms over bare bwrap")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repo-mb", type=int, default=50)
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="cProfile N launches, nothing else"
    )
    parser.add_argument(
        "--phases", action="store_true", help="with --profile: wall-clock phases, no cProfile"
    )
    parser.add_argument("--inner", nargs=4, metavar=("CONFIG", "URL", "PROJECT", "ORIGIN"))
    args = parser.parse_args()
    if args.inner:
        config, url, project, origin = args.inner
        return measure(Path(config), url, project, origin, args.rounds, args.profile, args.phases)
    root = Path(tempfile.mkdtemp(prefix="c2s", dir="/tmp"))
    try:
        with live_server(str(root / "db.sqlite3"), root) as live:
            admin = live.admin_client()
            project = admin_project(admin)
            token = issue_token(admin, "bench", project, "supervised")
            admin.close()
            origin = make_origin(root / "repo", args.repo_mb)
            (root / "agent").mkdir()
            agent = root / "agent/agent.sh"
            agent.write_text(AGENT)
            agent.chmod(0o755)
            kit = make_kit(root / "kit")
            write_credentials(kit.state / "impl/coordinator", live.url, token)
            config_path = root / "supervisor.toml"
            config_path.write_text(
                f'mode = "personal"\nstate_dir = "{kit.state}"\negress_listen = ""\n'
                f'gateway_listen = ""\ncoordinator_listen = "{live.url[7:]}"\n[run]\n'
                f'harness = "command:{agent}"\nallow_insecure_loopback = true\n'
                f'[run.binding]\nservice_url = "{live.url}"\nproject_id = "{project}"\n'
            )
            print(f"repository: {args.repo_mb} MB")
            inner = [str(config_path), live.url, project, str(origin)]
            phases = ["--phases"] if args.phases else []
            argv = [sys.executable, __file__, "--profile", str(args.profile), *phases]
            argv += ["--rounds", str(args.rounds), "--inner", *inner]
            return subprocess.run(argv, check=False).returncode
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
