"""``agentc-attention digest``: the project's attention digest as text, printed (for the journal)
and, with ``[mail]``, mailed to the project's people with a signed *I read this* link.

The text printed carries no link; only the mail does. The link is asked for with ``POST
.../digest/read-link`` (only a person or the designated digest sender gets one); without it the
mail says so and a line on standard error names why.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from agentc.attention import mail
from agentc.attention.checks import Coordinator
from agentc.attention.config import AttentionConfig
from agentc.client.transport import Transport
from agentc.core.errors import AgentcError, CoordinatorError

SHOWN = 10  # items per section in the text


def _items(
    title: str, rows: list[dict[str, Any]], line: Callable[[dict[str, Any]], str]
) -> list[str]:
    if not rows:
        return []
    out = [f"{title} ({len(rows)}):"]
    out += [f"  - {line(r)}" for r in rows[:SHOWN]]
    if len(rows) > SHOWN:
        out.append(f"  ... and {len(rows) - SHOWN} more in the console")
    return out + [""]


def _title(row: dict[str, Any]) -> str:
    return str(row.get("title") or row.get("task_id") or "")


def render(digest: dict[str, Any], ready: int, console: str) -> str:
    """The digest as plain text (the same sections as the console's Attention page)."""
    project = digest["project"]
    read = digest.get("last_read")
    lines = [
        f"agentc attention digest: {project['name']} ({digest['generated_at']})",
        f"{digest['needs_attention']} item(s) need a person.",
        "",
        "Interventions needed:",
        "",
    ]
    lines += _items("Waiting for a human review", digest["human_reviews"], _title)
    lines += _items("Proposed by agents, waiting for approval", digest["proposed_tasks"], _title)
    lines += _items("Blocked", digest["blocked_tasks"], lambda r: f"{_title(r)}: {r.get('reason')}")
    lines += _items("Lease lapsed, nobody recovering", digest["recovery_required"], _title)
    lines += ["Stalled:", ""]
    lines += _items(
        "Parked (attempts kept ending without a submission)",
        digest["parked_tasks"],
        lambda r: f"{_title(r)} ({r.get('fruitless_attempts')} attempts)",
    )
    lines += _items(
        "Attempts that expired or were released",
        digest["ended_attempts"],
        lambda r: f"{_title(r)}: {r.get('state')} {r.get('ended_at')}",
    )
    lines += _items(
        "Stale hosts", digest["stale_hosts"], lambda r: f"{r['host']} (last {r['last_seen']})"
    )
    lines += ["Integrator reports:", ""]
    lines += _items(
        "Sent back",
        digest["send_backs"],
        lambda r: f"{_title(r)}: {r.get('reason_code')}: {r.get('reason')}",
    )
    lines += _items(
        "Landed without a required check",
        digest["unchecked_landings"],
        lambda r: f"{_title(r)}: missing {', '.join(r.get('missing_checks') or [])}",
    )
    lines += _items(
        "The target fails its own checks (integration waits)",
        digest.get("target_red") or [],
        lambda r: f"{r['target_revision']}: {', '.join(r.get('failed_checks') or [])}",
    )
    lines += _items(
        "Flaky checks",
        digest.get("flaky_checks") or [],
        lambda r: f"{r['name']}: {r['count']} time(s), last {r['last_at']}",
    )
    lines += _items(
        "Canaries failing",
        digest["canary_failures"],
        lambda r: f"{r['host']} {r['harness']}: {r['outcome']} ({r['at']})",
    )
    spend = digest["spend"]
    tasks = spend["agent_tasks"]
    lines += [
        "Progress:",
        f"  ready tasks: {ready}",
        f"  last landing: {digest.get('last_landing_at') or 'none yet'}",
        "",
        "Spend:",
        f"  ${spend['last_24h']['usd']:.2f} in the last 24 hours, "
        f"${spend['last_7d']['usd']:.2f} in the last 7 days",
        f"  agent-created tasks this week: {tasks['admitted_this_week']} of "
        f"{tasks['weekly_budget']}",
        "",
        "Last read: " + (f"{read['at']} by {read['by']} ({read['via']})" if read else "never"),
        f"Console: {console}/console/projects/{project['id']}/attention",
    ]
    return "\n".join(lines) + "\n"


def run(config: AttentionConfig, token: str, out: Callable[[str], None] = print) -> int:
    """Print the digest; mail it when ``[mail]`` is set. 0 done, 1 the mail was not sent."""
    with Transport(config.coordinator_origin(), token) as transport:
        coord = Coordinator(transport, config.project_id)
        digest = coord.get("/attention")
        ready = len(coord.tasks("ready"))
        link: str | None = None
        if config.mail is not None:
            try:
                link = str(coord.get("/digest/read-link")["url"])
            except CoordinatorError as exc:
                print(
                    f"agentc-attention: the mail carries no 'I read this' link: {exc.message}",
                    file=sys.stderr,
                )
    text = render(digest, ready, config.origin)
    out(text)
    if config.mail is None:
        return 0
    if link:
        tail = f"Read it? Press the button behind this link (it only records the read):\n{link}\n"
    else:
        tail = "(No 'I read this' link: the sender is not the project's digest sender.)\n"
    body = text + "\n" + tail
    subject = f"agentc digest: {digest['project']['name']}: {digest['needs_attention']} item(s)"
    try:
        mail.send(config.mail, subject, body)
    except (AgentcError, OSError) as exc:
        print(f"agentc-attention: mail not sent ({exc})", file=sys.stderr)
        return 1
    return 0
