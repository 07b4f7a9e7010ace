"""Cost rows: one per launch, from the gateway's ledger, reported to the coordinator once.

The gateway's ledger (one row per model call, keyed by the launch id as ``session``) is the
source of truth; this module only reads it. A launch's calls are summed into one row once the
launch is over (no record of it in ``<state>/loop/launches/``), so its row never changes after
it is first sent. A row's identity is the SHA-256 of its canonical JSON, the same the
coordinator computes: ``<state>/loop/costs.reported`` lists the identities the coordinator
accepted (or already had), so a row is sent until accepted and never again;
``<state>/loop/costs.quarantined`` holds one JSON line per row the coordinator refused as invalid
or whose project it does not know (never resent; the ledger keeps them). Anything else (the
coordinator down, an error) leaves the rows pending for a later pass.

A launch that reached its vendor directly (``token_in_env``: no gateway, so no ledger rows) is
costed from its own event stream instead (:func:`record_harness_cost`): when it ends, the loop
summarizes ``events.jsonl`` (Claude's ``total_cost_usd``; else the usage priced with the
gateway's table and ``[prices]``, marked ``usd_estimated``) into one row of
``<state>/loop/harness-ledger.jsonl``, shaped as a gateway call row, which is reported like the
gateway's rows. The harness reports it, not a meter the loop controls: the gateway stays the
source of truth where it is used.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentc.core.errors import AgentcError, CoordinatorError
from agentc.core.roles import role_slug
from agentc.core.rules import canonical_json, rfc3339, sha256_hex
from agentc.files import JsonLines, json_objects
from agentc.gateway.ledger import add_call, new_usage, read_rows
from agentc.gateway.prices import DEFAULT_PRICES, Price
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.loop.coordinator import SECRET_REFUSED, describe_error
from agentc.supervisor.loop.records import HARNESS_LEDGER, LaunchRecord
from agentc.supervisor.loop.signin import token_opt_in
from agentc.supervisor.loop.steps import summary_of

BATCH = 500


@dataclass
class Summary:
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    quarantined: int = 0
    pending: int = 0
    error: str | None = None  # why some rows stay pending (the last failed batch)

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if k != "error"}

    def plus(self, other: Summary) -> Summary:
        """Both passes' counts (the first error named)."""
        total = Summary(error=self.error or other.error)
        for key, value in self.as_dict().items():
            setattr(total, key, value + getattr(other, key))
        return total


def launch_rows(ledger: Path, running: set[str], default_project: str) -> list[dict[str, Any]]:
    """One row per ended launch: its calls summed as the gateway's live meter sums them
    (:func:`agentc.gateway.ledger.add_call`: dollars null if any call was unpriced)."""
    by_launch: dict[str, dict[str, Any]] = {}
    for call in read_rows(ledger):
        launch = call.get("session")
        if not isinstance(launch, str) or launch in running:
            continue
        row = by_launch.setdefault(
            launch,
            {
                "session_id": launch,
                "project": call.get("project") or default_project,
                "task_id": call.get("task"),
                "attempt_id": call.get("attempt"),
                "generation": call.get("generation"),
                "role": call.get("role"),
                "upstream": call.get("upstream"),
                "models": [],
                **new_usage(),
                "occurred_at_ms": call.get("at_ms"),
            },
        )
        add_call(row, call)
        if call.get("source") == "harness_events":  # costed from the harness's own stream
            for key in ("source", "usd_estimated", "usd_unpriced_reason"):
                if call.get(key) is not None:
                    row[key] = call[key]
        if call.get("canary") is True:  # a dedicated canary project's launch
            row["canary"] = True
        model = call.get("model")
        if isinstance(model, str) and model not in row["models"]:
            row["models"].append(model)
        if isinstance(call.get("at_ms"), int):
            row["occurred_at_ms"] = max(row["occurred_at_ms"] or 0, call["at_ms"])
    return list(by_launch.values())


def price_table(config: SupervisorConfig) -> dict[str, Price]:
    """The gateway's list prices with ``[prices.<model>]`` over them (a cache write at the
    input rate: a stream does not tell cache writes apart)."""
    table = dict(DEFAULT_PRICES)
    for model, p in config.prices.items():
        table[model] = Price(
            input=p.input, output=p.output, cache_write=p.input, cache_read=p.cached_input
        )
    return table


def record_harness_cost(
    config: SupervisorConfig, root: Path, record: LaunchRecord, run: Path, now: int
) -> dict[str, Any] | None:
    """With ``token_in_env``, one ledger row for an ended launch of a direct harness, from its
    ``events.jsonl`` (once per launch; none without events). Returns the row written."""
    harness = record.vendor.get("harness")
    if not isinstance(harness, str) or not token_opt_in(config, harness):
        return None
    ledger = root / HARNESS_LEDGER
    if any(row.get("session") == record.launch_id for row in read_rows(ledger)):
        return None
    summary = summary_of(run, harness, record.vendor.get("model"), price_table(config))
    if summary is None or summary.events == 0:
        return None
    row: dict[str, Any] = {
        "at_ms": now,
        "session": record.launch_id,
        "attempt": record.attempt,
        "generation": record.generation,
        "role": role_slug(record.role),
        "task": record.task,
        "project": record.project,
        "upstream": harness,
        "model": summary.model,
        "input_tokens": summary.usage.input_tokens,
        "cache_write_tokens": 0,
        "cache_read_tokens": summary.usage.cached_input_tokens,
        "output_tokens": summary.usage.output_tokens,
        "usd": summary.usd,
        "usd_for_caps": summary.usd or 0.0,
        "source": "harness_events",
    }
    if summary.usd_estimated:
        row["usd_estimated"] = True
    if summary.unpriced_reason:
        row["usd_unpriced_reason"] = summary.unpriced_reason
    if record.canary:
        row["canary"] = True
    lines = JsonLines.open(ledger)
    try:
        lines.write(row)
    finally:
        lines.close()
    if summary.rate_limited:  # no gateway saw the 429: the stream's reset marks the vendor
        _exhausted(config, harness, summary.reset_ms, now)
    return row


def _exhausted(config: SupervisorConfig, harness: str, reset_ms: int | None, now: int) -> None:
    """Mark ``harness`` exhausted in ``vendors.json`` until the stream's reset, else for
    ``[health] exhausted_minutes`` (the gateway's rule for a 429 without a reset)."""
    from agentc.gateway.vendors import VendorState
    from agentc.supervisor.loop.admission import paths

    until = reset_ms if reset_ms and reset_ms > now else None
    until = until or now + int(config.health.exhausted_minutes * 60_000)
    upstream = config.gateway_upstreams.get(harness, harness)  # admission's key for it
    marked = VendorState(paths(config)[2]).mark_exhausted(upstream, until)
    print(
        f"agentc-supervisor run: {harness} hit a rate limit; exhausted until {rfc3339(marked)}",
        file=sys.stderr,
        flush=True,
    )


def identity(row: dict[str, Any]) -> str:
    return sha256_hex(canonical_json(_wire(row)))


def _wire(row: dict[str, Any]) -> dict[str, Any]:
    """The row as the coordinator stores it (the project is in the path)."""
    return {k: v for k, v in row.items() if k != "project"}


class Reporter:
    def __init__(self, root: Path) -> None:
        self.reported_path = root / "costs.reported"
        self.quarantine_path = root / "costs.quarantined"

    def reported(self) -> set[str]:
        try:
            return set(self.reported_path.read_text(encoding="utf-8").split())
        except FileNotFoundError:
            return set()

    def _quarantined(self) -> set[str]:
        path = self.quarantine_path
        if not path.exists():
            return set()
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return {str(row.get("identity")) for row in json_objects(lines)}

    def _mark(self, identities: Iterable[str]) -> None:
        text = "".join(f"{i}\n" for i in identities)
        if text:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.reported_path, flags, 0o600)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)

    def _quarantine(self, row: dict[str, Any], kind: str, reason: str, now: int) -> None:
        lines = JsonLines.open(self.quarantine_path)
        lines.write(
            {
                "identity": identity(row),
                "kind": kind,
                "reason": reason,
                "project": row["project"],
                "task_id": row.get("task_id"),
                "attempt_id": row.get("attempt_id"),
                "role": row.get("role"),
                "usd": row.get("usd"),
                "occurred_at_ms": row.get("occurred_at_ms"),
                "quarantined_at_ms": now,
            }
        )
        lines.close()

    def report(self, client: Any, rows: list[dict[str, Any]], now: int) -> Summary:
        """Send every unsent row, per project in batches; returns what happened to them."""
        done = self.reported() | self._quarantined()
        todo = [r for r in rows if identity(r) not in done]
        summary = Summary()
        by_project: dict[str, list[dict[str, Any]]] = {}
        for row in todo:
            by_project.setdefault(row["project"], []).append(row)
        for project, items in by_project.items():
            for start in range(0, len(items), BATCH):
                self._batch(client, project, items[start : start + BATCH], summary, now)
        return summary

    def _batch(
        self, client: Any, project: str, rows: list[dict[str, Any]], summary: Summary, now: int
    ) -> None:
        path = f"/api/v1/projects/{project}/telemetry/cost-rows"
        while rows:
            body = {"host": socket.gethostname(), "rows": [_wire(r) for r in rows]}
            try:
                client.retry()  # a batch sent before without an answer is resent as it was
                data = client.request("POST", path, body).data
            except AgentcError as exc:
                if isinstance(exc, CoordinatorError) and exc.code == "project_not_found":
                    for row in rows:
                        self._quarantine(row, "project_not_found", exc.message, now)
                    summary.quarantined += len(rows)
                    return
                if isinstance(exc, CoordinatorError) and exc.code == SECRET_REFUSED:
                    # A row quoting agent output (a model name) carries a secret: kept aside,
                    # the others sent again.
                    rows = self._quarantine_secret(rows, exc, summary, now)
                    continue
                summary.pending += len(rows)
                summary.error = _failed(exc, project, rows)
                return
            self._answered(rows, data, summary, now)
            return

    def _quarantine_secret(
        self, rows: list[dict[str, Any]], exc: CoordinatorError, summary: Summary, now: int
    ) -> list[dict[str, Any]]:
        """Quarantine the row the refusal names (``rows.<index>...``; every row when it names
        none); the rows left to send."""
        parts = str(exc.details.get("field", "")).split(".")
        index = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1
        bad = [rows[index]] if parts[0] == "rows" and 0 <= index < len(rows) else rows
        for row in bad:
            self._quarantine(row, SECRET_REFUSED, exc.message, now)
        summary.quarantined += len(bad)
        return [row for row in rows if all(row is not b for b in bad)]

    def _answered(
        self, rows: list[dict[str, Any]], data: dict[str, Any], summary: Summary, now: int
    ) -> None:
        refused = {int(r["index"]): str(r.get("problem")) for r in data.get("rejected") or []}
        for index, row in enumerate(rows):
            if index in refused:
                self._quarantine(row, "rejected", refused[index], now)
        self._mark(identity(r) for i, r in enumerate(rows) if i not in refused)
        summary.accepted += int(data.get("accepted") or 0)
        summary.duplicates += int(data.get("duplicates") or 0)
        summary.rejected += len(refused)


def _failed(exc: AgentcError, project: str, rows: list[dict[str, Any]]) -> str:
    """``<reason>; project <id>, <n> row(s): <id prefix> (task <id>, attempt <id>); ...``"""
    reason = describe_error(exc)
    shown = "; ".join(
        f"{identity(r)[:12]} (task {r.get('task_id')}, attempt {r.get('attempt_id')})"
        for r in rows[:5]
    )
    return f"{reason}; project {project}, {len(rows)} row(s): {shown}"
