"""Wire shapes of the two model APIs the scripted provider speaks.

Anthropic Messages (Claude Code, Pi) and OpenAI Responses (Codex): SSE event sequences for a
scripted turn, the non-streamed body, and each API's error body. Shapes follow what the real
harnesses accept (see docs/gateway.md and the harness-offline reference).
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterable
from typing import Any

from agentc.testing.script import RawCall, RunCall, Turn, Usage, WriteCall

Event = tuple[str, dict[str, Any]]


def sse_bytes(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def tool_names(body: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            names.add(tool["name"])
    return names


# ---------------------------------------------------------------- Anthropic Messages


def anthropic_tool(call: RunCall | WriteCall | RawCall, names: set[str]) -> tuple[str, object]:
    """Map a neutral call onto Claude Code's (``Bash``/``Write``) or Pi's (``bash``/``write``)."""
    if isinstance(call, RawCall):
        return call.name, call.input
    if isinstance(call, RunCall):
        if "bash" in names and "Bash" not in names:
            return "bash", {"command": call.command}
        return "Bash", {"command": call.command, "description": call.description}
    if "write" in names and "Write" not in names:
        return "write", {"path": call.path, "content": call.content}
    return "Write", {"file_path": call.path, "content": call.content}


def anthropic_usage(usage: Usage, *, output: int) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": output,
    }


def anthropic_blocks(turn: Turn, names: set[str], ids: Iterable[str]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.text is not None or not turn.tool_calls:
        blocks.append({"type": "text", "text": turn.text or ""})
    id_iter = iter(ids)
    for call in turn.tool_calls:
        name, tool_input = anthropic_tool(call, names)
        blocks.append({"type": "tool_use", "id": next(id_iter), "name": name, "input": tool_input})
    return blocks


def anthropic_events(
    turn: Turn, model: str, msg_id: str, blocks: list[dict[str, Any]]
) -> list[Event]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    start_usage = anthropic_usage(turn.usage, output=min(1, turn.usage.output_tokens))
    events: list[Event] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        )
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": anthropic_usage(turn.usage, output=turn.usage.output_tokens),
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_message(
    turn: Turn, model: str, msg_id: str, blocks: list[dict[str, Any]]
) -> dict[str, Any]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": anthropic_usage(turn.usage, output=turn.usage.output_tokens),
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_model(model: str) -> dict[str, Any]:
    """One entry of ``GET /v1/models`` (and the body of ``GET /v1/models/{id}``)."""
    return {
        "type": "model",
        "id": model,
        "display_name": model,
        "created_at": "2026-01-01T00:00:00Z",
    }


def anthropic_models(models: list[str]) -> dict[str, Any]:
    return {
        "data": [anthropic_model(m) for m in models],
        "has_more": False,
        "first_id": models[0] if models else None,
        "last_id": models[-1] if models else None,
    }


# ---------------------------------------------------------------- OpenAI Responses


def openai_tool(call: RunCall | WriteCall | RawCall, names: set[str]) -> tuple[str, object]:
    """Map a neutral call onto Codex's ``exec_command`` (or the older ``shell``)."""
    if isinstance(call, RawCall):
        return call.name, call.input
    if isinstance(call, RunCall):
        command = call.command
    else:
        parent = shlex.quote(str(_parent(call.path)))
        command = (
            f"mkdir -p {parent} && printf %s {shlex.quote(call.content)} > {shlex.quote(call.path)}"
        )
    if "shell" in names and "exec_command" not in names:
        return "shell", {"command": ["bash", "-lc", command]}
    return "exec_command", {"cmd": command}


def _parent(path: str) -> str:
    head, _, _ = path.rpartition("/")
    return head or "."


def openai_usage(usage: Usage) -> dict[str, Any]:
    # Responses usage counts cached input inside input_tokens; cache writes have no standard
    # field, so they ride in a non-standard detail the gateway's meter also reads.
    total_in = (
        usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    )
    return {
        "input_tokens": total_in,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_input_tokens,
            "cache_write_tokens": usage.cache_creation_input_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total_in + usage.output_tokens,
    }


def openai_items(turn: Turn, names: set[str], ids: Iterable[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    id_iter = iter(ids)
    if turn.text is not None or not turn.tool_calls:
        items.append(
            {
                "type": "message",
                "id": f"msg_{next(id_iter)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text or "", "annotations": []}],
            }
        )
    for call in turn.tool_calls:
        name, args = openai_tool(call, names)
        ident = next(id_iter)
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{ident}",
                "call_id": f"call_{ident}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        )
    return items


def openai_response(
    resp_id: str,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "id": resp_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
    }


def openai_events(turn: Turn, model: str, resp_id: str, items: list[dict[str, Any]]) -> list[Event]:
    events: list[Event] = [
        (
            "response.created",
            {
                "type": "response.created",
                "response": openai_response(resp_id, model, "in_progress", [], None),
            },
        )
    ]
    for index, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            added = dict(item, status="in_progress", content=[])
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": added},
                )
            )
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                    },
                )
            )
            events.append(
                (
                    "response.output_text.done",
                    {
                        "type": "response.output_text.done",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "text": text,
                    },
                )
            )
        else:
            added = dict(item, status="in_progress", arguments="")
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": added},
                )
            )
            events.append(
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "delta": item["arguments"],
                    },
                )
            )
            events.append(
                (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item["id"],
                        "output_index": index,
                        "arguments": item["arguments"],
                    },
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    final = openai_response(resp_id, model, "completed", items, openai_usage(turn.usage))
    events.append(("response.completed", {"type": "response.completed", "response": final}))
    for seq, (_, data) in enumerate(events):
        data["sequence_number"] = seq
    return events


def openai_model(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": 1767225600, "owned_by": "scripted"}


def openai_models(models: list[str]) -> dict[str, Any]:
    return {"object": "list", "data": [openai_model(m) for m in models]}


def openai_error(
    kind: str, message: str, *, code: str | None = None, resets_at: int | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message, "param": None, "code": code}
    if resets_at is not None:
        error["resets_at"] = resets_at
    return {"error": error}
