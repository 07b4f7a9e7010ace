"""The request line's parsers (record ids, task cursors): whatever text arrives, each returns
what it holds or refuses it with a 400 naming the field, and never raises anything else."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from agentc.core.errors import CoordinatorError
from agentc.core.model import COUNTER_MAX, ID_MAX
from agentc.core.rules import ID_PATTERN, check_path_id, is_id, parse_task_cursor, task_cursor
from agentc.core.wire import Id

ids = st.from_regex(ID_PATTERN, fullmatch=True)
created = st.integers(min_value=0, max_value=COUNTER_MAX)
_body_id = TypeAdapter(Id)


@given(st.text())
@example("a\x00b")
@example("x" * (ID_MAX + 1))
@example("café")
@example("abc\n")
@example("")
def test_an_id_is_visible_ascii_or_a_400_naming_the_field(text: str) -> None:
    expected = 1 <= len(text) <= ID_MAX and all("!" <= c <= "~" for c in text)
    assert is_id(text) is expected
    if expected:
        assert check_path_id("task_id", text) == text
    else:
        with pytest.raises(CoordinatorError) as info:
            check_path_id("task_id", text)
        assert info.value.status == 400 and info.value.code == "invalid_request"
        assert info.value.message.startswith("task_id: ")
        assert info.value.details == {"field": "task_id"}


@given(st.text())
@example("a\x00b")
@example("abc\n")
def test_a_body_id_follows_the_same_rule(text: str) -> None:
    try:
        _body_id.validate_python(text)
    except ValidationError:
        assert not is_id(text)
    else:
        assert is_id(text)


@given(created, ids)
def test_a_task_cursor_reads_back_what_it_was_made_from(at: int, task_id: str) -> None:
    assert parse_task_cursor(task_cursor(at, task_id)) == (at, task_id)


@given(st.one_of(st.text(), st.builds(lambda a, b: f"{a}:{b}", st.integers(), st.text())))
@example("²:x")
@example("1" * 30 + ":x")
@example(f"{2**63}:x")
@example("-1:x")
@example("01:x")
@example("1:")
@example(":x")
@example("1:a\x00b")
def test_any_text_is_a_cursor_or_a_400_naming_it(text: str) -> None:
    try:
        at, task_id = parse_task_cursor(text)
    except CoordinatorError as err:
        assert err.status == 400 and err.code == "invalid_request"
        assert err.message.startswith("cursor: ") and err.details == {"field": "cursor"}
    else:
        assert 0 <= at <= COUNTER_MAX and is_id(task_id)
        assert task_cursor(at, task_id) == text
