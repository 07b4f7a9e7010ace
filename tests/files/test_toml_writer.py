"""The one TOML writer (agentc.files.toml.dump_toml): whatever it writes reads back unchanged,
whatever the strings hold; and the configs ``agentc up`` writes under a hostile state directory
are read back by each program's own loader with the very paths written."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentc.files.toml import dump_toml, parse_toml
from agentc.gateway.config import load_config as load_gateway
from agentc.integrator.config import load_config as load_integrator
from agentc.supervisor.config import load_config as load_supervisor
from agentc.up.configs import write_integrator, write_supervisor
from agentc.up.gateway import write_gateway
from agentc.up.harnesses import ModelAccess
from agentc.up.layout import Layout

# Each of these broke an interpolated config: a quote ends the string, a backslash escapes
# what follows (a path holding "\n" was read back with a newline), a newline ends the line.
HOSTILE = [
    'quo"te',
    "back\\slash",
    "back\\nslash",
    "new\nline",
    "tab\tand\rreturn",
    "nöñ-ÄSCII ✓ 😀",
    "\x7f\x01\x1b[31m",
    "end\\",
    "[table]",
    "a = 1",
]


@given(
    st.dictionaries(st.text(min_size=1), st.text() | st.lists(st.text()), max_size=4),
    st.text(min_size=1),
)
def test_any_text_reads_back_as_written(table: dict[str, object], name: str) -> None:
    document = dump_toml({(): table, ("outer", name): table})
    assert tomllib.loads(document.decode()) == {**table, "outer": {name: table}}


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_strings_as_keys_values_and_table_names(text: str) -> None:
    value = {"path": Path("/srv") / text, "list": [text, 3, True], "inline": {text: text}}
    document = dump_toml({(): value, ("setup", text): {"x": text}})
    loaded = parse_toml(document, "t.toml")
    assert loaded["path"] == f"/srv/{text}" and loaded["list"] == [text, 3, True]
    assert loaded["inline"] == {text: text} and loaded["setup"] == {text: {"x": text}}


def test_what_it_cannot_write_is_refused() -> None:
    with pytest.raises(TypeError, match="cannot write object as TOML"):
        dump_toml({(): {"x": object()}})
    with pytest.raises(TypeError, match="cannot write float"):
        dump_toml({(): {"x": float("nan")}})


@pytest.fixture(params=HOSTILE[:6], ids=["quote", "backslash", "backslash-n", "newline",
                                          "controls", "non-ascii"])  # fmt: skip
def hostile_root(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    root = tmp_path / f"state {request.param}" / ".agentc"
    root.mkdir(parents=True)
    return root


def test_up_writes_configs_their_programs_read_back(hostile_root: Path) -> None:
    layout = Layout(hostile_root)
    record = {"project_id": "p-1", "branch": "main", "checks": ["make test"]}
    access = ModelAccess("claude", "claude", "anthropic", "https://api.anthropic.com", "sk-x")
    gateway = write_gateway(layout, access)
    read = load_gateway(gateway.config)
    assert read.control_socket == gateway.control and read.ledger == gateway.ledger
    assert read.upstreams["claude"].credential_file == (
        hostile_root.resolve() / "gateway/credentials/claude"
    )
    write_supervisor(layout, record, "http://127.0.0.1:8123", "claude", gateway)
    supervisor = load_supervisor(layout.supervisor_config)
    assert supervisor.state_dir == layout.supervisor_state.resolve()
    assert supervisor.masks == [hostile_root.resolve()]
    assert supervisor.gateway_control == gateway.control
    write_integrator(layout, record, "http://127.0.0.1:8123")
    integrator = load_integrator(layout.integrator_config)
    assert integrator.remote == str(layout.remote.resolve())
    assert integrator.work_dir == layout.integrator_state.resolve()
