"""Every number a request may carry has a range, in the schema and in docs/api.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.service.kit import Clock, running

DOCS = Path(__file__).parents[2] / "docs" / "api.md"


def _numbers(schema: Any, components: dict[str, Any], name: str) -> list[tuple[str, Any]]:
    """(field name, schema) of every integer or number inside schema."""
    if not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        return _numbers(components[schema["$ref"].rsplit("/", 1)[1]], components, name)
    found = [(name, schema)] if schema.get("type") in ("integer", "number") else []
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):
            found += _numbers(option, components, name)
    found += _numbers(schema.get("items"), components, name)
    for field, sub in schema.get("properties", {}).items():
        found += _numbers(sub, components, field)
    return found


def _request_numbers(doc: dict[str, Any]) -> list[tuple[str, str, Any]]:
    components = doc["components"]["schemas"]
    found = []
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            where = f"{method.upper()} {path}"
            for param in op.get("parameters", []):
                found += [
                    (where, n, s) for n, s in _numbers(param["schema"], components, param["name"])
                ]
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                found += [(where, n, s) for n, s in _numbers(body["schema"], components, "")]
    return found


def test_every_request_number_has_a_documented_range(sqlite_database: str) -> None:
    with running(sqlite_database, Clock()) as svc:
        doc = svc.app.openapi()
    numbers = _request_numbers(doc)
    assert len(numbers) > 20
    unbounded = [(w, n) for w, n, s in numbers if "minimum" not in s or "maximum" not in s]
    assert unbounded == []
    ranges = DOCS.read_text().split("## Numbers and ranges", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)`", ranges))
    names = {n for _, n, _ in numbers}
    assert names - documented == set()
    telemetry = {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}
    assert telemetry | {"calls", "usd"} <= documented
