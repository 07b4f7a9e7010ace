"""The typed reads of coordinator answers: checked once where they arrive, extra keys kept, a
wrong shape refused as one BadAnswer naming the read and the place (pure; the loop's tests read
the same shapes from a real coordinator)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentc.client.errors import BadAnswer, TransportFailure, error_code, exit_code
from agentc.client.reads import Offer, Project, Workflow, shaped, tasks
from agentc.files.exits import TRANSPORT
from tests.client.kit import workflow_view

SUBMISSION: dict[str, Any] = {
    "id": "sub_1",
    "task_id": "task_1",
    "attempt_id": "att_1",
    "kind": "code",
    "candidate_ref": "refs/agent-coordinator/candidates/task_1/l1",
    "candidate_revision": "c" * 40,
    "base_revision": "b" * 40,
    "superseded_at": None,
    "ac_amendment": None,
    "acceptance_evidence": [{"criterion": "x", "evidence": "y"}],
}


def view(**changes: Any) -> dict[str, Any]:
    return {
        "phase": "review",
        "work_status": "in_review",
        "submission": SUBMISSION,
        "submissions": [SUBMISSION],
        "activities": [
            {"id": "act_1", "kind": "agent_review", "submission_id": "sub_1", "state": "queued"}
        ],
        "reviews": [],
        **changes,
    }


def test_an_answer_of_the_shape_is_read_whole_with_the_keys_it_does_not_name() -> None:
    flow = shaped(Workflow, view(), "workflow")
    current = flow["submission"]
    assert current is not None and current["candidate_revision"] == "c" * 40
    # Keys the shape does not name are kept, nested ones too: what a caller passes on is whole.
    kept = flow["submissions"][0]["acceptance_evidence"]  # type: ignore[typeddict-item]
    assert kept == SUBMISSION["acceptance_evidence"]
    assert flow["activities"][0]["state"] == "queued"
    assert shaped(Offer, {"role": "reviewer", "action": None}, "next") == {
        "role": "reviewer",
        "action": None,
    }


@pytest.mark.parametrize(
    ("answer", "place"),
    [
        (["not", "an", "object"], "the answer"),
        (view(submissions=None), "submissions"),
        (view(submission={**SUBMISSION, "id": 7}), "submission.id"),  # a number is not text
        (
            view(reviews=[{"submission_id": "sub_1", "decision": "approved"}]),
            "reviews.0.reviewer_kind",
        ),
        (
            view(
                activities=[
                    {
                        "id": "a",
                        "kind": "integration",
                        "state": "queued",
                        "submission_id": "s",
                        "checks": [1],
                    }
                ]
            ),
            "activities.0.checks.0",
        ),
    ],
)
def test_a_wrong_shape_is_one_bad_answer_naming_the_place(answer: Any, place: str) -> None:
    with pytest.raises(BadAnswer) as refused:
        shaped(Workflow, answer, "workflow of task t1")
    assert str(refused.value).startswith(f"the coordinator's workflow of task t1: {place}: ")
    # It is a transport failure to whoever reports it: no definitive answer, try again later.
    assert isinstance(refused.value, TransportFailure)
    assert exit_code(refused.value) == TRANSPORT and error_code(refused.value) == "bad_answer"


def test_the_test_kit_builds_the_views_the_shapes_read() -> None:
    built = workflow_view([{"id": "s1", "candidate_ref": "r1"}], [{"decision": "approved"}])
    assert built["submissions"][0]["candidate_ref"] == "r1" and built["submission"] is None


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
    )
)
def test_any_json_is_read_or_refused_never_a_crash(answer: Any) -> None:
    for shape in (Workflow, Offer, Project):
        try:
            shaped(shape, answer, "anything")
        except BadAnswer:
            pass


def test_the_task_list_is_read_page_after_page() -> None:
    pages = {
        "": {"items": [{"id": "t1", "work_status": "ready"}], "next_cursor": "c/1 2"},
        "&cursor=c%2F1%202": {"items": [{"id": "t2", "work_status": "done"}], "next_cursor": None},
    }
    asked: list[str] = []

    def get(path: str) -> Any:
        asked.append(path)
        return pages[path.removeprefix("/tasks?limit=200&work_status=ready")]

    found = list(tasks(get, "&work_status=ready"))
    assert [t["id"] for t in found] == ["t1", "t2"] and len(asked) == 2
    with pytest.raises(BadAnswer, match=r"task list: items\.0\.work_status"):
        list(tasks(lambda _path: {"items": [{"id": "t"}], "next_cursor": None}))
