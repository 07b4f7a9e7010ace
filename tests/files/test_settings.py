"""agentc.files.settings: declared once (check and default per field), every problem together,
each under its dotted key, the file named once in front."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

import pytest

from agentc.core.errors import ConfigError
from agentc.files.settings import (
    Settings,
    SettingsError,
    absolute_path,
    absolute_paths,
    boolean,
    integer,
    list_of,
    number,
    one_of,
    optional,
    path,
    section,
    setting,
    string,
    table_of,
)

Color = Literal["red", "green", "blue"]


class Inner(Settings):
    size: int = setting(integer(minimum=1, maximum=9))
    ratio: float = setting(number(above=0), default=1.0)


class Outer(Settings):
    name: str = setting(string)
    color: Color = setting(one_of(("red", "green", "blue")), default="red")
    root: Path = setting(absolute_path, default=Path("/srv"))
    log: Path | None = setting(optional(path), default=None)
    verbose: bool = setting(boolean, default=False)
    tags: list[str] = setting(list_of(string), default_factory=list)
    inner: Inner = setting(section(Inner), default_factory=lambda: Inner(size=1))
    named: dict[str, Inner] = setting(table_of(section(Inner)), default_factory=dict)
    limits: dict[str, int] = setting(
        table_of(integer(), keys=("cpu", "mem"), kind="limit"), default_factory=dict
    )


def test_defaults_are_written_once_and_values_converted() -> None:
    outer = Outer.from_mapping(
        {"name": "x", "log": "/l", "inner": {"size": 2, "ratio": 3}, "named": {"a": {"size": 4}}}
    )
    assert outer.color == "red" and outer.root == Path("/srv") and outer.tags == []
    assert outer.log == Path("/l") and outer.inner == Inner(size=2, ratio=3.0)
    assert isinstance(outer.inner.ratio, float) and outer.named == {"a": Inner(size=4)}
    assert Outer(name="x") == Outer.from_mapping({"name": "x"})
    # Checks accept what they produce: replace() and keyword construction check again.
    assert dataclasses.replace(outer, verbose=True).inner == outer.inner
    with pytest.raises(dataclasses.FrozenInstanceError):
        outer.name = "y"  # type: ignore[misc]  # frozen


def test_every_problem_is_reported_together_under_its_dotted_key() -> None:
    with pytest.raises(SettingsError) as caught:
        Outer.from_mapping(
            {
                "colour": "red",
                "color": "pink",
                "root": "rel",
                "verbose": "yes",
                "tags": ["a", 1],
                "inner": {"size": 0, "extra": 1},
                "named": {"a": {"ratio": -1}, "b": 3},
                "limits": {"disk": 1},
            }
        )
    assert dict(caught.value.problems) == {
        "colour": "unknown setting",
        "color": "must be one of 'red', 'green', 'blue', got 'pink'",
        "root": "must be an absolute path, got rel",
        "verbose": "expected true or false, got str",
        "tags": "expected a string, got int",
        "inner.size": "must be >= 1, got 0",
        "inner.extra": "unknown setting",
        "named.a.ratio": "must be > 0, got -1",
        "named.a.size": "required, but missing",
        "named.b": "expected a table, got int",
        "limits": "unknown limit 'disk' (known: cpu, mem)",
        "name": "required, but missing",
    }
    assert str(caught.value).startswith("colour: unknown setting; color: must be one of")


def test_keyword_construction_is_checked() -> None:
    with pytest.raises(ValueError, match=r"^name: expected a string, got int; root: must be"):
        Outer(name=1, root=Path("rel"))  # type: ignore[arg-type]  # the check refuses it
    with pytest.raises(ValueError, match="size: expected an integer, got bool"):
        Inner(size=True)


def test_load_and_parse_name_the_file(tmp_path: Path) -> None:
    file = tmp_path / "outer.toml"
    file.write_text('name = "n"\n[inner]\nsize = 3\n')
    assert Outer.load(file).inner.size == 3
    file.write_text("name = 1\n")
    with pytest.raises(ConfigError, match=rf"^{file}: name: expected a string, got int$"):
        Outer.load(file)
    with pytest.raises(ConfigError, match=rf"^{tmp_path}/none.toml: the thing does not exist$"):
        Outer.load(tmp_path / "none.toml", what="thing")
    with pytest.raises(ConfigError, match="^credentials.toml: name: required"):
        Outer.parse({}, "credentials.toml")


class Window(Settings):
    low: int = setting(integer())
    high: int = setting(integer())

    def cross_checks(self) -> list[tuple[str, str]]:
        return [] if self.low <= self.high else [("high", f"must be >= low ({self.low})")]


def test_a_rule_between_keys_is_reported_like_the_others(tmp_path: Path) -> None:
    assert Window(low=1, high=2).high == 2
    with pytest.raises(SettingsError, match=r"^high: must be >= low \(3\)$"):
        Window(low=3, high=2)
    with pytest.raises(ConfigError, match=r"^w.toml: window.high: must be >= low \(3\)$"):

        class Outside(Settings):
            window: Window = setting(section(Window))

        Outside.parse({"window": {"low": 3, "high": 2}}, "w.toml")
    # Run only once every key passed its own check.
    with pytest.raises(SettingsError, match=r"^low: expected an integer, got str$"):
        Window.from_mapping({"low": "3", "high": 2})


def test_absolute_paths_refuses_relative_paths_and_dot_dot() -> None:
    assert absolute_paths(["/a", Path("/b/c")]) == [Path("/a"), Path("/b/c")]
    for bad in (["a"], ["/a/../b"]):
        with pytest.raises(ValueError, match=f"must be absolute paths without '..', got {bad[0]}"):
            absolute_paths(bad)


def test_every_field_must_be_declared_with_a_check() -> None:
    with pytest.raises(TypeError, match=r"Bad\.plain is not declared with setting\(\)"):

        class Bad(Settings):
            plain: int = 1
