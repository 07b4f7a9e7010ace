"""The refusals the work operations share: one constructor per HTTP meaning."""

from __future__ import annotations

from agentc.core.errors import CoordinatorError


def conflict(code: str, message: str, **details: object) -> CoordinatorError:
    """409: the request does not fit the record's current state."""
    return CoordinatorError(code, message, status=409, details=details)


def invalid(field: str, problem: str, **details: object) -> CoordinatorError:
    """422: one field of the input is wrong; the message names it."""
    return CoordinatorError(
        "invalid_input", f"{field}: {problem}", status=422, details={"field": field, **details}
    )


def not_found(what: str, ident: str) -> CoordinatorError:
    """404 for a record the caller named, with its id under `<what>_id`."""
    return CoordinatorError(
        "record_not_found", f"no {what} {ident}", status=404, details={what + "_id": ident}
    )


def project_not_found(project_id: str) -> CoordinatorError:
    """404 for a project that does not exist or that the caller is not granted: the same
    answer either way, so a project's id says nothing to those outside it."""
    return CoordinatorError(
        "project_not_found",
        f"no project {project_id}",
        status=404,
        details={"project_id": project_id},
    )


def missing(message: str) -> CoordinatorError:
    """404 without details (the message names the record)."""
    return CoordinatorError("record_not_found", message, status=404)


def forbidden(code: str, message: str) -> CoordinatorError:
    """403 with a code of its own (`denied` in auth is the generic one)."""
    return CoordinatorError(code, message, status=403)
