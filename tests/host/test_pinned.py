"""The harness step rewrites only ``[pinned]`` in a person's ``supervisor.toml``: every other
line, comment and value stays as it was; pins it cannot rewrite safely are refused."""

from __future__ import annotations

import pytest

from agentc.core.errors import ConfigError
from agentc.host.update.harness import rewrite_pinned

TEXT = """# my host
mode = "host"  # as setup wrote it

[pinned]
# qualified on 2026-01-02
claude = "2.1.0"   # the old one
codex = "0.9"

[run]
harness = "claude"
"""


def test_only_the_pinned_entries_change() -> None:
    out = rewrite_pinned(TEXT, {"claude": "2.2.0", "pi": "1.0"})
    assert out == TEXT.replace('claude = "2.1.0"   # the old one', 'claude = "2.2.0"').replace(
        'codex = "0.9"\n', 'codex = "0.9"\npi = "1.0"\n'
    )


def test_a_file_without_pins_gets_the_table_at_its_end() -> None:
    text = 'mode = "host"\n\n[run]\nharness = "claude"\n'
    assert rewrite_pinned(text, {"claude": "2.2.0"}) == text + '\n[pinned]\nclaude = "2.2.0"\n'


@pytest.mark.parametrize(
    "text",
    [
        'pinned = { claude = "2.1.0" }\n',  # inline: not a table of lines
        'pinned.claude = "2.1.0"\n',  # dotted keys
        "[pinned\nclaude = 1\n",  # does not parse
    ],
)
def test_pins_it_cannot_rewrite_safely_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        rewrite_pinned(text, {"claude": "2.2.0"})


def test_a_version_with_quotes_is_written_escaped() -> None:
    out = rewrite_pinned("[pinned]\n", {"claude": 'x" = 1\nevil = "y'})
    assert "evil" not in out.split("\n")[1].split("=", 1)[0]
    import tomllib

    assert tomllib.loads(out) == {"pinned": {"claude": 'x" = 1\nevil = "y'}}
