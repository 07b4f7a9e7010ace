"""The console's project settings, cost and canary charts, and attention digest pages."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from agentc.core import model as m
from agentc.service.api import runtime_of
from agentc.service.auth import visible_projects
from agentc.service.console.charts import Chart, bars, columns
from agentc.service.console.render import Viewer, html, page, router
from agentc.service.ops import JsonObject
from agentc.service.work import attention, digest_link, model_policy, spend
from agentc.service.work.views import project_row, project_view
from agentc.store.tx import Tx

MONEY = "${:,.2f}"
SAVED = {"1": "The policy was saved.", "model-policy": "The model policy was saved."}
COUNT = "{:,.0f}"


def checks_text(checks: list[JsonObject]) -> str:
    """The required checks as the settings form shows them: one a line, `identity` alone or
    `identity, version, environment`."""
    lines = []
    for c in checks:
        plain = c["version"] == "1" and c["environment"] == "default"
        lines.append(
            c["identity"] if plain else f"{c['identity']}, {c['version']}, {c['environment']}"
        )
    return "\n".join(lines)


@router.get("/console/projects/{project_id}/settings")
async def settings_page(request: Request, project_id: str, saved: str = "") -> Response:
    def build(tx: Tx, _v: Viewer) -> tuple[str, dict[str, Any]]:
        project = project_view(project_row(tx.conn, project_id))
        return "settings.html", {
            "project": project,
            "checks_text": checks_text(project["policy"]["required_checks"]),
            "review_modes": [r.value for r in m.ReviewMode],
            "lease_range": (m.LEASE_SECONDS_MIN, m.LEASE_SECONDS_MAX),
            "attempt_range": (m.MAX_ATTEMPT_SECONDS_MIN, m.MAX_ATTEMPT_SECONDS_MAX),
            "park_range": (m.PARK_AFTER_MIN, m.PARK_AFTER_MAX),
            "message": SAVED.get(saved),
            "policy_level": model_policy.project_policy(tx, project_id),
            "policy_effective": None,
            "policy_sources": None,
        }

    return await page(request, build)


def cost_charts(costs: JsonObject, canaries: JsonObject) -> list[Chart]:
    days = [d["day"] for d in costs["by_day"]]
    span = f"the {costs['window_days']} days from {days[0]} to {days[-1]} (UTC)"
    costliest = max(costs["by_day"], key=lambda d: d["usd"])
    per_day = columns(
        "cost-day",
        "Cost per day",
        f"Dollars reported per day over {span}: {MONEY.format(costs['total_usd'])} in all "
        f"from {costs['rows']} cost rows ({costs['unpriced_rows']} without a price)"
        + (
            f"; the costliest day was {costliest['day']} at {MONEY.format(costliest['usd'])}."
            if costliest["usd"] > 0
            else "."
        ),
        days,
        [("dollars", "bar", [d["usd"] for d in costs["by_day"]])],
        MONEY,
    )
    tasks = [(t["title"], t["usd"], str(t["rows"])) for t in costs["by_task"]]
    per_task = bars(
        "cost-task",
        "Cost per task",
        f"Dollars per task over {span}, the costliest first ({len(tasks)} shown)"
        + (f"; the costliest is {tasks[0][0]} at {MONEY.format(tasks[0][1])}." if tasks else "."),
        tasks,
        MONEY,
        "Task",
    )
    hosts = [(h["host"], h["usd"], str(h["rows"])) for h in costs["by_host"]]
    per_host = bars(
        "cost-host",
        "Cost per host",
        f"Dollars per reporting host over {span}: {len(hosts)} host(s).",
        hosts,
        MONEY,
        "Host",
    )
    passed = [d["passed"] for d in canaries["by_day"]]
    failed = [d["failed"] for d in canaries["by_day"]]
    canary = columns(
        "canary-day",
        "Canary results per day",
        f"Canary runs per day over {span}, passed and failed stacked: {sum(passed)} passed, "
        f"{sum(failed)} failed.",
        days,
        [
            ("passed", "pass", [float(v) for v in passed]),
            ("failed", "fail", [float(v) for v in failed]),
        ],
        COUNT,
    )
    pairs = [
        (f"{r['host']} · {r['harness']}", float(r["passed"]), f"{r['failed']}")
        for r in canaries["by_host_harness"]
    ]
    per_pair = bars(
        "canary-host",
        "Canary runs per host and harness",
        f"Canary runs that passed per host and harness over {span}: {len(pairs)} pair(s)"
        + (
            f"; {sum(r['failed'] for r in canaries['by_host_harness'])} failed in all."
            if pairs
            else "."
        ),
        pairs,
        COUNT,
        "Host · harness",
        ("Passed", "Failed"),
    )
    return [per_day, per_task, per_host, canary, per_pair]


@router.get("/console/projects/{project_id}/costs")
async def costs_page(request: Request, project_id: str) -> Response:
    def build(tx: Tx, _v: Viewer) -> tuple[str, dict[str, Any]]:
        project = project_view(project_row(tx.conn, project_id))
        costs = spend.cost_report(tx.conn, project_id, tx.now)
        canaries = spend.canary_report(tx.conn, project_id, tx.now)
        return "costs.html", {
            "project": project,
            "costs": costs,
            "canaries": canaries,
            "charts": cost_charts(costs, canaries),
        }

    return await page(request, build)


@router.get("/console/attention")
async def attention_page(request: Request) -> Response:
    budget = runtime_of(request).settings.agent_task_weekly_budget

    def build(tx: Tx, v: Viewer) -> tuple[str, dict[str, Any]]:
        shown = visible_projects(tx.conn, v.actor)
        digests = [attention.digest(tx.conn, p.id, tx.now, budget) for p in shown]
        return "attention.html", {"digests": digests, "single": False}

    return await page(request, build)


@router.get("/console/projects/{project_id}/attention")
async def project_attention_page(request: Request, project_id: str) -> Response:
    """The project's digest; a person opening it has read it (the neglect page's clock)."""
    rt = runtime_of(request)
    budget = rt.settings.agent_task_weekly_budget
    readers: list[str] = []

    def build(tx: Tx, v: Viewer) -> tuple[str, dict[str, Any]]:
        found = attention.digest(tx.conn, project_id, tx.now, budget)
        readers.append(v.actor.principal_id)
        return "attention.html", {"digests": [found], "single": True}

    shown = await page(request, build)
    if readers and shown.status_code == 200:

        def read(tx: Tx) -> None:
            attention.record_read(tx.conn, tx.now, project_id, readers[0], "console")

        await rt.executor.write_async(read)
    return shown


@router.get("/console/digest-read/{token}")
async def digest_read_page(request: Request, token: str) -> Response:
    """A mailed digest's link: only a button (a mail scanner fetching it records nothing)."""
    rt = runtime_of(request)
    try:
        shown = await run_in_threadpool(
            rt.executor.read, lambda tx: digest_link.view(tx.conn, token, tx.now)
        )
    except digest_link.BadLink as bad:
        return html("digest_read.html", 404, project={"name": "a project"}, problem=str(bad))
    return html("digest_read.html", project=shown["project"], problem=None, recorded=False)


@router.post("/console/digest-read/{token}")
async def digest_read(request: Request, token: str) -> Response:
    """*I read this*: the read is recorded under the principal that minted the link."""
    rt = runtime_of(request)
    try:
        done = await rt.executor.write_async(lambda tx: digest_link.record(tx.conn, token, tx.now))
    except digest_link.BadLink as bad:
        return html("digest_read.html", 404, project={"name": "a project"}, problem=str(bad))
    return html("digest_read.html", project=done["project"], problem=None, recorded=True)
