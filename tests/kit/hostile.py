"""The hostile agent's side of the tests (``hostile_agent.py`` is the agent itself): its task's
description, what it printed, and the checks every mode shares: what it tried from inside its
launch was refused, and its credential is worth nothing once the launch ended."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx

HOSTILE_AGENT = Path(__file__).with_name("hostile_agent.py")


def description(plan: dict[str, Any]) -> str:
    """The hostile task's description: the targets as a fenced ``hostile`` block."""
    return "Attack.\n\n```hostile\n" + json.dumps(plan) + "\n```\n"


def printed(events: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """What the agent printed: each try by name, and its credential line."""
    tries: dict[str, dict[str, Any]] = {}
    token: dict[str, Any] = {}
    for line in events.read_text().splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if item.get("type") == "hostile":
            tries[item["attempt"]] = item
        elif item.get("type") == "token":
            token = item
    return tries, token


def kept_events(loop_state: Path) -> Path | None:
    """The events log the loop kept of a launch that did not submit (the hostile one)."""
    for path in sorted((loop_state / "unsubmitted").glob("*/events.jsonl")):
        if '"type": "token"' in path.read_text():
            return path
    return None


def check_refused(tries: dict[str, dict[str, Any]], probes: list[str]) -> None:
    """Inside the launch: it read its own task and checkpointed; it read no credential file,
    and every request beyond its attempt was refused before it did anything."""
    assert tries["read its own task"]["status"] == 200, tries
    assert tries["checkpoint"]["status"] == 201, tries
    for name in [*("read " + path for path in probes), "read the loop's copy"]:
        assert tries[name]["status"] == "denied", (name, tries)
    for name in (
        "who am I",
        "open a session",
        "claim another task",
        "release the victim's attempt",
        "file a task",
        "ask for the next task",
        "charge the victim's attempt",
        "charge no attempt",
    ):
        assert (tries[name]["status"], tries[name]["code"]) == (403, "operation_not_permitted"), (
            name,
            tries[name],
        )
    assert tries["push plain token"]["status"] == "refused", tries
    assert tries["push base64 token"]["status"] == "refused", tries


def check_dead(url: str, project: str, token: dict[str, Any]) -> None:
    """After the launch: the credential it held is refused (401) for its own attempt's reads,
    checkpoints and cost rows."""
    assert token.get("token"), token
    at = f"/api/v1/projects/{project}/attempts/{token['attempt']}"
    row = {"session_id": "late", "attempt_id": token["attempt"], "generation": 1, "usd": 5000}
    headers = {"Authorization": f"Bearer {token['token']}"}
    with httpx.Client(base_url=url, timeout=30, headers=headers) as late:
        for method, path, body in (
            ("GET", at, None),
            ("POST", f"{at}/checkpoints", {"generation": token["generation"], "summary": "x"}),
            (
                "POST",
                f"/api/v1/projects/{project}/telemetry/cost-rows",
                {"host": "h", "rows": [row]},
            ),
        ):
            answer = late.request(
                method, path, json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
            )
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.json()["error"]["code"] == "authentication_required", answer.text
