"""Review on the lines, on SQLite and PostgreSQL: a person's line comments on the change page
become the review's findings (file, lines) and reach the next implementer's prompt; an agent
reviewer's findings with file and line are shown on their lines; the criteria and the
submission's evidence stand beside the diff."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentc.supervisor.contracts import implementer_prompt
from agentc.supervisor.loop.feedback import of_workflow
from tests.kit.changes import HOSTILE
from tests.service.console.change_kit import Submitted, agent_review, patch_body, submitted
from tests.service.console.kit import browse_as, form_of, post_form
from tests.service.kit import Service, claim


def _row_then_note(html: str, anchor: str, text: str) -> bool:
    """The diff's row ``anchor`` is followed at once by the notes row holding ``text``."""
    found = re.search(rf'<tr id="{anchor}">.*?</tr>\s*<tr class="notes">(.*?)</tr>', html, re.S)
    return bool(found and text in found.group(1))


def _file_index(html: str, name: str) -> str:
    found = re.search(
        rf'<details class="file" id="file-(\d+)"[^>]*>\s*<summary><span '
        rf'class="fname">(?:[^<]* → )?{re.escape(name)}<',
        html,
    )
    assert found, name
    return found.group(1)


def _review_form(svc: Service, run: Submitted) -> tuple[str, dict[str, Any]]:
    browse_as(svc, svc.admin)
    html = svc.client.get(run.page).text
    action = re.search(r'<form method="post" action="([^"]+/review)"', html)
    assert action, html
    return action.group(1), {
        **form_of(svc, run.page),
        "task_id": run.task["id"],
        "submission_id": run.submission["id"],
        "from": "change",
    }


def test_line_comments_become_findings_for_the_next_attempt(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path)
    run.loop.post(f"{run.at}/artifacts/patch", patch_body(run))
    browse_as(svc, svc.admin)
    html = svc.client.get(run.page).text
    # beside the diff: the criteria with the submission's evidence, and the form
    assert re.search(r'<dl class="evidence" id="criteria"><dt>it works</dt><dd>', html)
    assert 'id="review-form"' in html and html.count('class="comment"') == 5
    assert '<option value="new_name.txt">new_name.txt</option>' in html

    action, hidden = _review_form(svc, run)
    fields = {
        **hidden,
        "decision": "changes_requested",
        "summary": "two things",
        "path": ["app.py", "large.txt", "new_name.txt", "", ""],
        "line": ["2", "3", "1", "", ""],
        "end_line": ["", "5", "", "", ""],
        "severity": ["required", "advisory", "advisory", "required", "required"],
        "remedy": [f"return 1 again {HOSTILE}", "lower case", "rename back", "add a changelog", ""],
    }
    for line in ("two", "²", "1" * 5000):  # "²".isdigit() is true; int() refuses both
        bad = post_form(svc, action, {**fields, "line": [line, "3", "1", "", ""]})
        assert bad.status_code == 422 and "findings.0.line" in bad.text, line
    backwards = {**fields, "end_line": ["", "2", "", "", ""]}
    refused = post_form(svc, action, backwards)
    assert refused.status_code == 422 and "end_line" in refused.text
    done = post_form(svc, action, {**fields, "idempotency_key": "key-ok"})
    assert done.status_code == 303 and done.headers["location"] == run.page

    flow = svc.admin.get(f"/api/v1/projects/{run.pid}/tasks/{run.task['id']}/workflow")
    [review] = flow["reviews"]
    assert review["findings"] == [
        {
            "severity": "required",
            "remedy": f"return 1 again {HOSTILE}",
            "evidence": "",
            "path": "app.py",
            "line": 2,
            "end_line": None,
        },
        {
            "severity": "advisory",
            "remedy": "lower case",
            "evidence": "",
            "path": "large.txt",
            "line": 3,
            "end_line": 5,
        },
        {
            "severity": "advisory",
            "remedy": "rename back",
            "evidence": "",
            "path": "new_name.txt",
            "line": 1,
            "end_line": None,
        },
        {
            "severity": "required",
            "remedy": "add a changelog",
            "evidence": "",
            "path": None,
            "line": None,
            "end_line": None,
        },
    ]
    page = svc.client.get(run.page).text
    app, large = _file_index(page, "app.py"), _file_index(page, "large.txt")
    assert _row_then_note(page, f"f{app}-n2", "return 1 again &lt;script&gt;")
    assert HOSTILE not in page
    assert _row_then_note(page, f"f{large}-n5", "lower case")  # a range: under its end
    assert f'href="#f{large}-n5">large.txt:3–5</a>' in page
    # a pure rename shows no line: the finding is listed, linked to the file list
    assert 'id="elsewhere"' in page and 'href="#file-list">new_name.txt:1</a>' in page
    assert 'id="review-form"' not in page  # decided
    assert _row_then_note(
        svc.client.get(run.page + "?view=split").text, f"f{app}-n2", "return 1 again"
    )

    # The next attempt's prompt carries the findings with their files and lines.
    again = claim(
        run.loop, run.pid, svc.admin.get(f"/api/v1/projects/{run.pid}/tasks/{run.task['id']}")
    )
    feedback = of_workflow(
        run.loop.get(f"/api/v1/projects/{run.pid}/tasks/{run.task['id']}/workflow")
    )
    prompt = implementer_prompt(
        project=run.pid,
        task=again["claim"]["task"],
        session="s",
        attempt="a",
        generation=2,
        checkout="/c",
        instructions={},
        feedback=feedback,
    )
    data = json.loads(
        prompt.split("<task-data>\n")[1].split("\n</task-data>")[0].replace("<\\/", "</")
    )
    first = data["changes_requested"]["reviews"][0]["findings"][0]
    assert first == {
        "severity": "required",
        "remedy": f"return 1 again {HOSTILE}",
        "path": "app.py",
        "line": 2,
    }


def test_an_agent_reviewers_findings_on_their_lines(svc: Service, tmp_path: Path) -> None:
    run = submitted(svc, tmp_path, review_mode="agent")
    run.loop.post(f"{run.at}/artifacts/patch", patch_body(run))
    flow = svc.admin.get(f"/api/v1/projects/{run.pid}/tasks/{run.task['id']}/workflow")
    findings = [
        {"severity": "advisory", "remedy": "a long file", "path": "large.txt", "line": 300},
        {"severity": "advisory", "remedy": "was it needed", "path": "gone.txt", "line": 1},
        {"severity": "advisory", "remedy": "nowhere", "path": "app.py", "line": 999},
    ]
    agent_review(svc.agent(run.pid).post, run.pid, flow, run.submission["id"], "approved", findings)
    browse_as(svc, svc.admin)
    page = svc.client.get(run.page).text
    large, gone = _file_index(page, "large.txt"), _file_index(page, "gone.txt")
    assert f'<details class="file" id="file-{large}" open>' in page  # open: a finding is on it
    assert _row_then_note(page, f"f{large}-n300", "a long file")
    assert _row_then_note(page, f"f{gone}-o1", "was it needed")  # a deleted file: old lines
    assert "by an agent" in page
    assert 'id="elsewhere"' in page and 'href="#file-list">app.py:999</a>' in page
    # the task page names each attempt's role and who reviewed, in words
    task_page = svc.client.get(f"/console/projects/{run.pid}/tasks/{run.task['id']}").text
    assert '<td class="role">implementer</td>' in task_page
    assert '<td class="role">reviewer</td>' in task_page
    assert "approved by an agent" in task_page and "by a agent" not in task_page
    board = svc.client.get(f"/console/projects/{run.pid}").text
    assert "reviewed by an agent" in board
    settings = svc.client.get(f"/console/projects/{run.pid}/settings").text
    assert (
        '<option value="either" >an agent or a person, whoever takes it first</option>' in settings
    )
