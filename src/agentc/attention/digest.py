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
from agentc.core.errors import AgentcError, ConfigError, CoordinatorError
from agentc.files.exits import INVALID_INPUT, TRANSPORT

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


Line = Callable[[dict[str, Any]], str]

# The digest's sections in order (the console's Attention page has the same): a heading, then
# per item kind its title, its key in the digest and how one of its rows reads.
SECTIONS: tuple[tuple[str, tuple[tuple[str, str, Line], ...]], ...] = (
    (
        "Interventions needed:",
        (
            ("Waiting for a human review", "human_reviews", _title),
            ("Proposed by agents, waiting for approval", "proposed_tasks", _title),
            ("Blocked", "blocked_tasks", lambda r: f"{_title(r)}: {r.get('reason')}"),
            ("Lease lapsed, nobody recovering", "recovery_required", _title),
        ),
    ),
    (
        "Stalled:",
        (
            (
                "Parked (attempts kept ending without a submission)",
                "parked_tasks",
                lambda r: f"{_title(r)} ({r.get('fruitless_attempts')} attempts)",
            ),
            (
                "Attempts that expired or were released",
                "ended_attempts",
                lambda r: f"{_title(r)}: {r.get('state')} {r.get('ended_at')}",
            ),
            ("Stale hosts", "stale_hosts", lambda r: f"{r['host']} (last {r['last_seen']})"),
        ),
    ),
    (
        "Integrator reports:",
        (
            (
                "Sent back",
                "send_backs",
                lambda r: f"{_title(r)}: {r.get('reason_code')}: {r.get('reason')}",
            ),
            (
                "Landed without a required check",
                "unchecked_landings",
                lambda r: f"{_title(r)}: missing {', '.join(r.get('missing_checks') or [])}",
            ),
            (
                "The target fails its own checks (integration waits)",
                "target_red",
                lambda r: f"{r['target_revision']}: {', '.join(r.get('failed_checks') or [])}",
            ),
            (
                "Flaky checks",
                "flaky_checks",
                lambda r: f"{r['name']}: {r['count']} time(s), last {r['last_at']}",
            ),
            (
                "Canaries failing",
                "canary_failures",
                lambda r: f"{r['host']} {r['harness']}: {r['outcome']} ({r['at']})",
            ),
        ),
    ),
)


def render(digest: dict[str, Any], ready: int, console: str) -> str:
    """The digest as plain text (the same sections as the console's Attention page)."""
    project = digest["project"]
    read = digest.get("last_read")
    lines = [
        f"agentc attention digest: {project['name']} ({digest['generated_at']})",
        f"{digest['needs_attention']} item(s) need a person.",
        "",
    ]
    for heading, kinds in SECTIONS:
        lines += [heading, ""]
        for title, key, line in kinds:
            lines += _items(title, digest.get(key) or [], line)
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
    """Print the digest; mail it when ``[mail]`` is set.

    0 done, 2 the mail settings are wrong, 7 the mail was not sent (:mod:`agentc.files.exits`)."""
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
    except ConfigError as exc:  # the mail settings are wrong: nothing was sent
        print(f"agentc-attention: mail not sent ({exc})", file=sys.stderr)
        return INVALID_INPUT
    except (AgentcError, OSError) as exc:
        print(f"agentc-attention: mail not sent ({exc})", file=sys.stderr)
        return TRANSPORT
    return 0
