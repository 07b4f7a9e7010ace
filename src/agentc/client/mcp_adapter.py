"""`agent-coordinator-mcp`: the agent workflow as MCP tools over stdio (official `mcp` SDK).

It is the CLI's twin: the same configuration, the same session state file, the same operations
(`agentc.client.ops`) and mutation journal (`agentc.client.journal`), the same error report
(`agentc.client.errors`). Tool calls run one at a time. A mutating tool may carry its own
`idempotency_key` (16-128 of `[A-Za-z0-9-_.:]`); sending the same key again with the same
arguments resends the journaled request, with other arguments it is refused. While a mutation
is unresolved every other mutation is refused until `coordinator_transport_retry` settles it.
The submission and review bodies are the coordinator's own shapes (`agentc.core.wire`), limits
included. Every result is structured content (`{"ok": true, "data": ...}` or `{"ok": false,
"error": {...}}`) plus the same JSON as text.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Annotated, Any

import anyio
import anyio.to_thread
import click
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from agentc import __version__
from agentc.client.config import Options, resolve
from agentc.client.errors import error_report, run
from agentc.client.journal import Outcome
from agentc.client.ops import Agent
from agentc.core.errors import AgentcError, ConfigError
from agentc.core.model import Role, TaskKind
from agentc.core.wire import Review, Submission

KEY = re.compile(r"^[A-Za-z0-9_.:-]{16,128}$")
Key = Annotated[
    str | None,
    Field(description="Idempotency-Key to use (16-128 of A-Za-z0-9-_.:); default: a new one."),
]


def _result(payload: dict[str, Any], error: bool = False) -> CallToolResult:
    text = json.dumps(payload, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=payload,
        is_error=error,
    )


class Adapter:
    """The tools' shared agent, one call at a time (the journal is one slot per session)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.lock = anyio.Lock()

    async def call(self, fn: Callable[[], Any], key: str | None = None) -> CallToolResult:
        if key is not None and not KEY.match(key):
            bad = ConfigError("idempotency_key must be 16-128 of [A-Za-z0-9-_.:]")
            return _result({"ok": False, "error": error_report(bad)}, error=True)
        async with self.lock:
            try:
                self.agent.key = key
                out = await anyio.to_thread.run_sync(fn)
            except AgentcError as exc:
                return _result({"ok": False, "error": error_report(exc)}, error=True)
            finally:
                self.agent.key = None
        if isinstance(out, Outcome):
            return _result({"ok": True, "data": out.data, "replayed": out.replayed})
        return _result({"ok": True, "data": out})


def build(agent: Agent) -> MCPServer:
    """The MCP server with the workflow tools bound to `agent`."""
    server = MCPServer(
        "agent-coordinator",
        version=__version__,
        instructions="Agent coordinator tools: register a session, ask `coordinator_next`, "
        "claim, renew, checkpoint, submit or release; reviewers claim and decide reviews. "
        "If a call fails with a transport error, call coordinator_transport_retry.",
    )
    a = Adapter(agent)
    for add in (_session_tools, _attempt_tools, _review_tools, _transport_tools):
        add(server, a)
    return server


def _session_tools(server: MCPServer, a: Adapter) -> None:
    agent = a.agent

    @server.tool(name="coordinator_session_register")
    async def session_register(
        harness: str = "agent-coordinator-mcp",
        workstation_id: str | None = None,
        capabilities: list[str] | None = None,
        new: bool = False,
        idempotency_key: Key = None,
    ) -> CallToolResult:
        """Open (or reuse) this adapter's agent session. The adapter makes the session id and
        proof and journals them first: after a transport error, coordinator_transport_retry
        (or the same call with the same idempotency_key) recovers the same session. The proof
        stays in the state file."""
        caps = tuple(capabilities or ())
        return await a.call(
            lambda: agent.connect(harness, workstation_id, caps, new), idempotency_key
        )

    @server.tool(name="coordinator_session_get")
    async def session_get() -> CallToolResult:
        """This session as the coordinator sees it, with the attempts it holds
        (held_attempts)."""
        return await a.call(agent.session_show)

    @server.tool(name="coordinator_next")
    async def next_(role: Role = Role.IMPLEMENTER) -> CallToolResult:
        """What to do next: a task to claim or recover (implementer) or a review (reviewer)."""
        return await a.call(lambda: agent.next(role))

    @server.tool(name="coordinator_task_get")
    async def task_get(task_id: str) -> CallToolResult:
        """One task with its attempts and workflow."""
        return await a.call(lambda: agent.task_show(task_id))


def _attempt_tools(server: MCPServer, a: Adapter) -> None:
    agent = a.agent

    @server.tool(name="coordinator_claim")
    async def claim(
        task_id: str | None = None,
        expected_task_revision: int | None = None,
        idempotency_key: Key = None,
    ) -> CallToolResult:
        """Claim a task (or, with no task_id, the next ready one); the attempt is then held."""
        return await a.call(lambda: agent.claim(task_id, expected_task_revision), idempotency_key)

    @server.tool(name="coordinator_attempt_renew")
    async def renew(
        attempt_id: str | None = None, generation: int | None = None, idempotency_key: Key = None
    ) -> CallToolResult:
        """Renew the held attempt's lease (default: the held attempt, from the local state or
        else from the coordinator's list of attempts this session holds)."""
        return await a.call(lambda: agent.renew(attempt_id, generation), idempotency_key)

    @server.tool(name="coordinator_checkpoint")
    async def checkpoint(
        summary: str,
        handoff: str | None = None,
        current_action: str | None = None,
        next_step: str | None = None,
        revision: str | None = None,
        attempt_id: str | None = None,
        generation: int | None = None,
        idempotency_key: Key = None,
    ) -> CallToolResult:
        """Record progress on the held attempt (does not renew the lease)."""
        notes = {
            "handoff": handoff,
            "current_action": current_action,
            "next_step": next_step,
            "revision": revision,
        }
        return await a.call(
            lambda: agent.checkpoint(
                summary, attempt_id=attempt_id, generation=generation, **notes
            ),
            idempotency_key,
        )

    @server.tool(name="coordinator_attempt_release")
    async def release(
        handoff: str,
        blocked: bool = False,
        attempt_id: str | None = None,
        generation: int | None = None,
        idempotency_key: Key = None,
    ) -> CallToolResult:
        """Give the held attempt back, with a handoff for the next agent."""
        return await a.call(
            lambda: agent.release(handoff, blocked, attempt_id, generation), idempotency_key
        )

    @server.tool(name="coordinator_submit")
    async def submit(
        body: Submission,
        attempt_id: str | None = None,
        generation: int | None = None,
        idempotency_key: Key = None,
    ) -> CallToolResult:
        """Submit the held attempt. Code submissions without candidate fields take them from
        the worktree prepared with `agent-coordinator worktree prepare`."""
        fields = body.model_dump(mode="json", exclude_none=True)
        kind = TaskKind(fields.pop("kind"))
        return await a.call(
            lambda: agent.submit(kind, fields, attempt_id=attempt_id, generation=generation),
            idempotency_key,
        )


def _review_tools(server: MCPServer, a: Adapter) -> None:
    agent = a.agent

    @server.tool(name="coordinator_activity_claim")
    async def activity_claim(
        activity_id: str | None = None,
        submission_id: str | None = None,
        idempotency_key: Key = None,
    ) -> CallToolResult:
        """Claim a review: the next one you may take, or activity_id with submission_id."""
        return await a.call(lambda: agent.review_claim(activity_id, submission_id), idempotency_key)

    @server.tool(name="coordinator_review")
    async def review(
        body: Review, activity_id: str | None = None, idempotency_key: Key = None
    ) -> CallToolResult:
        """Decide the held review: approved, or changes_requested with required findings."""
        fields = body.model_dump(mode="json", exclude_none=True)
        return await a.call(lambda: agent.review_decide(fields, activity_id), idempotency_key)


def _transport_tools(server: MCPServer, a: Adapter) -> None:
    agent = a.agent

    @server.tool(name="coordinator_transport_status")
    async def transport_status() -> CallToolResult:
        """The adapter's local state: session, pending mutation, held attempt and review."""
        return await a.call(lambda: {**agent.status(), "durable_mutation_journal": True})

    @server.tool(name="coordinator_transport_retry")
    async def transport_retry() -> CallToolResult:
        """Resend the pending mutation with its original Idempotency-Key."""

        def go() -> Any:
            out = agent.retry()
            return {"retried": None, "message": "nothing is pending"} if out is None else out

        return await a.call(go)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--session", metavar="NAME", help="Session state name (shared with the CLI).")
@click.option("--state-dir", metavar="ABS", help="State directory (absolute).")
@click.option("--repo-config", metavar="PATH", help="The repository binding to use.")
@click.option("--allow-insecure-loopback", is_flag=True, help="Allow http to a loopback host.")
def command(
    session: str | None,
    state_dir: str | None,
    repo_config: str | None,
    allow_insecure_loopback: bool,
) -> None:
    """Serve the coordinator's agent workflow as MCP tools on stdin/stdout."""
    options = Options(state_dir, repo_config, session, allow_insecure_loopback)
    settings = resolve(options)
    settings.require_token()
    with Agent(settings) as agent:
        anyio.run(build(agent).run_stdio_async)


def main() -> None:
    sys.exit(run(command, "agent-coordinator-mcp"))
