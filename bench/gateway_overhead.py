"""Added latency of the model gateway: through the gateway vs straight to the scripted provider.

Starts the scripted provider and the gateway as separate processes on 127.0.0.1 (so neither
shares the client's interpreter), issues a sentinel over the control socket, then sends
streamed Messages API calls at 1 and at 32 concurrent streams, alternating direct and gateway
rounds. Prints time to first byte and total time (p50/p95) per mode, the added milliseconds,
the ratios against the direct baseline of the same run, the throughput at each concurrency,
and the gateway process's CPU time per call (the figure that shared cores disturb least).

    uv run python bench/gateway_overhead.py [--requests 200] [--rounds 8] [--plain]

By default the sentinel carries a model policy (allowed models, an output limit, turns and
dollars per attempt), the loop breakers are on (their defaults) and every call goes to the
launch's event log, as in a real launch; ``--plain`` turns all three off.

Bounded: a fixed number of requests, all to loopback; it stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from agentc.testing.gateway import ControlClient

TEXT = "lorem ipsum dolor sit amet " * 80  # ~2 KB of answer text
BODY = {
    "model": "claude-sonnet-5",
    "stream": True,
    "max_tokens": 1024,
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "x" * 20_000}],  # a realistic request size
}


# Every call inside it: the policy reads each body (model, output limit) and counts turns.
POLICY = {
    "allowed_models": ["claude-*"],
    "max_output_tokens": 4096,
    "max_turns": 1_000_000,
    "max_usd": 1_000_000,
}


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)


async def _one(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, json=BODY, headers=headers) as response:
        async for _chunk in response.aiter_raw():
            if not first:
                first = time.perf_counter()
        if response.status_code != 200:
            raise RuntimeError(f"status {response.status_code}")
    end = time.perf_counter()
    return (first - start) * 1000, (end - start) * 1000


async def _phase(
    url: str, headers: dict[str, str], concurrency: int, total: int
) -> tuple[list[float], list[float], float]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60, trust_env=False) as client:
        await asyncio.gather(*(_one(client, url, headers) for _ in range(concurrency)))  # warm
        sem = asyncio.Semaphore(concurrency)

        async def guarded() -> tuple[float, float]:
            async with sem:
                return await _one(client, url, headers)

        start = time.perf_counter()
        results = await asyncio.gather(*(guarded() for _ in range(total)))
        elapsed = time.perf_counter() - start
    return [r[0] for r in results], [r[1] for r in results], total / elapsed


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


async def _bench(direct: str, gateway: str, sentinel: str, requests: int, rounds: int) -> None:
    print(
        f"{'conc':>4} {'mode':>8} {'ttfb p50':>9} {'ttfb p95':>9} {'total p50':>10} "
        f"{'total p95':>10} {'req/s':>8}"
    )
    for concurrency in (1, 32):
        per_round = max(concurrency, requests // rounds)
        data: dict[str, tuple[list[float], list[float], list[float]]] = {
            "direct": ([], [], []),
            "gateway": ([], [], []),
        }
        for _ in range(rounds):  # alternate so drift hits both modes alike
            for mode, base, headers in (
                ("direct", direct, {"x-api-key": "direct"}),
                ("gateway", gateway, {"x-api-key": sentinel}),
            ):
                ttfb, total, rps = await _phase(
                    f"{base}/v1/messages", headers, concurrency, per_round
                )
                data[mode][0].extend(ttfb)
                data[mode][1].extend(total)
                data[mode][2].append(rps)
        summary: dict[str, dict[str, float]] = {}
        for mode, (ttfbs, totals, rates) in data.items():
            summary[mode] = {
                "ttfb50": _pct(ttfbs, 50),
                "ttfb95": _pct(ttfbs, 95),
                "total50": _pct(totals, 50),
                "total95": _pct(totals, 95),
                "rps": statistics.median(rates),
            }
            s = summary[mode]
            print(
                f"{concurrency:>4} {mode:>8} {s['ttfb50']:>9.2f} {s['ttfb95']:>9.2f} "
                f"{s['total50']:>10.2f} {s['total95']:>10.2f} {s['rps']:>8.1f}"
            )
        d, g = summary["direct"], summary["gateway"]
        print(
            f"{concurrency:>4}    added: ttfb p50 +{g['ttfb50'] - d['ttfb50']:.2f} ms "
            f"(x{g['ttfb50'] / d['ttfb50']:.2f}), total p50 +{g['total50'] - d['total50']:.2f} ms "
            f"(x{g['total50'] / d['total50']:.2f}), throughput x{g['rps'] / d['rps']:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=320, help="requests per mode and level")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument(
        "--plain", action="store_true", help="no model policy, loop breakers or event log"
    )
    args = parser.parse_args()
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="gw-bench-") as tmp_name:
        tmp = Path(tmp_name)
        # Text and a tool call, as an agent's turn: the no-progress breaker sees progress.
        after = {"text": TEXT, "tool_calls": [{"tool": "run", "command": "true"}]}
        (tmp / "script.json").write_text(json.dumps({"after": after}))
        cred = tmp / "key"
        cred.write_text("sk-bench-real\n")
        os.chmod(cred, 0o600)
        provider = _start(
            [sys.executable, "-m", "agentc.testing.provider", "--script", str(tmp / "script.json")],
            env,
        )
        gateway: subprocess.Popen[str] | None = None
        try:
            assert provider.stdout is not None
            direct = provider.stdout.readline().strip()
            extra = (
                "[breakers]\nsame_request = 0\nno_progress = 0\ncache_storm_calls = 0\n"
                if args.plain
                else f'launch_logs = "{tmp}/launch-logs"\n'
            )
            (tmp / "gateway.toml").write_text(
                'host = "127.0.0.1"\nport = 0\n'
                f'control_socket = "{tmp}/control.sock"\nledger = "{tmp}/ledger.jsonl"\n'
                f'vendors = "{tmp}/vendors.json"\nlog = "{tmp}/gateway.log"\n'
                # One sentinel carries all 32 streams (the default allows 16 per launch).
                "launch_concurrency = 64\n"
                f"{extra}"
                f'[upstreams.claude]\napi = "anthropic"\nbase_url = "{direct}"\n'
                f'credential_file = "{cred}"\n'
            )
            port_file = tmp / "port"
            gateway = _start(
                [sys.executable, "-c", _GATEWAY_MAIN, str(tmp / "gateway.toml"), str(port_file)],
                env,
            )
            deadline = time.monotonic() + 20
            while not port_file.exists() or not (tmp / "control.sock").exists():
                if time.monotonic() > deadline or gateway.poll() is not None:
                    raise SystemExit("the gateway did not start")
                time.sleep(0.05)
            url = f"http://127.0.0.1:{port_file.read_text().strip()}"
            sentinel = ControlClient(tmp / "control.sock").issue(
                session="bench",
                attempt="bench",
                generation=1,
                upstream="claude",
                **({} if args.plain else {"policy": POLICY}),
            )
            cpu_before = _cpu_seconds(gateway.pid)
            asyncio.run(_bench(direct, url, sentinel, args.requests, args.rounds))
            cpu = _cpu_seconds(gateway.pid) - cpu_before
            rows = (tmp / "ledger.jsonl").read_text().count("\n")
            lines = [json.loads(x) for x in (tmp / "gateway.log").read_text().splitlines()]
            # CPU time is what the gateway costs the host, and unlike latency it hardly moves
            # when other work shares the cores.
            print(f"gateway CPU per call (user+sys): {cpu / len(lines) * 1000:.3f} ms")
            own = statistics.median(x["ms"] for x in lines)
            own_ttfb = statistics.median(x["ttfb_ms"] for x in lines)
            print(
                f"ledger rows: {rows}; the gateway's own view (request in -> upstream first "
                f"byte / last byte, incl. upstream time) p50: {own_ttfb:.2f} / {own:.2f} ms"
            )
        finally:
            for proc in (gateway, provider):
                if proc is not None:
                    proc.terminate()
                    proc.wait(10)
                    if proc.stdout is not None:
                        proc.stdout.close()


# The gateway on an ephemeral port, reporting the port through a file (bench only).
_GATEWAY_MAIN = """
import sys
from pathlib import Path
from agentc.gateway.app import Gateway
from agentc.gateway.config import load_config
from agentc.gateway.server import serve_forever

cfg = load_config(Path(sys.argv[1]))
gateway = Gateway(cfg, log=open(cfg.log, "a"))
serve_forever(gateway, on_ready=lambda port: Path(sys.argv[2]).write_text(str(port)))
"""

if __name__ == "__main__":
    main()
