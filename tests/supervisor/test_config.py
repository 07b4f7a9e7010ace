"""``supervisor.toml``: the declared settings (agentc.files.settings, no pydantic on the launch
path) check every key, name it in each problem, and report every problem of a file together."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentc.core.errors import ConfigError
from agentc.supervisor.config import SupervisorConfig, load_config


def load(tmp_path: Path, text: str) -> SupervisorConfig:
    path = tmp_path / "supervisor.toml"
    path.write_text(text)
    return load_config(path)


def test_an_empty_file_equals_the_defaults(tmp_path: Path) -> None:
    assert load(tmp_path, "") == SupervisorConfig()


def test_values_are_converted(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        'mode = "personal"\nstate_dir = "/s"\negress_listen = ""\nmasks = ["/m"]\n'
        'token_in_env = true\nwrapper = ["agentns-claude", "--"]\n'
        '[harness_paths]\nclaude = "/opt/claude"\n',
    )
    assert config.mode == "personal" and config.state_dir == Path("/s")
    assert config.egress_listen is None and config.masks == [Path("/m")]
    assert config.harness_paths == {"claude": Path("/opt/claude")}
    assert config.token_in_env is True and config.wrapper == ["agentns-claude", "--"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('moed = "host"\n', "moed: unknown setting"),
        ('mode = "guest"\n', "mode: must be 'host' or 'personal'"),
        ('bin_dir = "opt/bin"\n', "bin_dir: must be an absolute path"),
        ("bubblewrap = 7\n", "bubblewrap: expected a string, got int"),
        ('token_in_env = "yes"\n', "token_in_env: expected true or false"),
        ('masks = ["/a/../b"]\n', "masks: must be absolute paths without '..'"),
        ('expose = "/x"\n', "expose: expected a list"),
        ("wrapper = [1]\n", "wrapper: expected a string"),
        ('supervisor_program = "x"\n', "supervisor_program: expected a list"),
        ('egress_listen = "10.0.0.1:3128"\n', "egress_listen: relay address: 10.0.0.1 is not"),
        ('coordinator_listen = "127.0.0.1:80"\n', "coordinator_listen: relay address: port 80"),
        ("[harness_paths]\nemacs = '/x'\n", "harness_paths: unknown harness 'emacs'"),
        ('gateway_upstreams = "claude"\n', "gateway_upstreams: expected a table"),
        ('implementer_user = ["a"]\n', "implementer_user: expected a string, got list"),
        ('agentns_no_unshare = "yes"\n', "agentns_no_unshare: expected true or false"),
        # The launch establishes its session in process now: no launcher program to name.
        ('agentns_program = ["agentns-claude"]\n', "agentns_program: unknown setting"),
    ],
)
def test_each_problem_names_its_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f": {message}"):
        load(tmp_path, text)


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, 'mode = "x"\nbin_dir = "rel"\ntoolchain_dir = 1\n')
    assert all(k in str(caught.value) for k in ("mode:", "bin_dir:", "toolchain_dir:"))


def test_keyword_construction_is_checked_too() -> None:
    with pytest.raises(ValueError, match="state_dir: must be an absolute path"):
        SupervisorConfig(state_dir=Path("relative"))
    with pytest.raises(AttributeError):
        SupervisorConfig().mode = "personal"  # type: ignore[misc]  # frozen
