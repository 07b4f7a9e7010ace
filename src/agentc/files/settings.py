"""Declare a program's settings once: a frozen dataclass whose fields name their check.

::

    class UpstreamConfig(Settings):
        api: Api = setting(one_of(APIS))                          # required
        base_url: str = setting(string)

    class GatewayConfig(Settings):
        port: int = setting(integer(minimum=0, maximum=65535), default=8788)
        log: Path | None = setting(optional(path), default=None)
        upstreams: dict[str, UpstreamConfig] = setting(table_of(section(UpstreamConfig)))

    config = GatewayConfig.load(path, what="gateway configuration")

A check takes a raw value (from TOML, or a keyword argument) and returns it converted, or
raises ``ValueError`` saying what is wrong without naming the key. Each default is written once,
in its field. Every field is checked on construction, so keyword construction is checked too;
:meth:`Settings.from_mapping` also refuses unknown keys and reports missing required ones, and
every problem of a table is reported together, each under its dotted key
(``upstreams.claude.api: must be 'anthropic' or 'openai', got 'x'``). :meth:`Settings.load` and
:meth:`Settings.parse` name the file: ``ConfigError("<file>: <key>: <problem>; ...")``.

Standard library only: the supervisor's launch path loads its settings with this, and must not
import pydantic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar, dataclass_transform, overload

from agentc.core.errors import ConfigError
from agentc.files.toml import load_toml

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
S = TypeVar("S", bound="Settings")


class Check(Protocol[T_co]):
    """A check: the value converted, or ValueError saying what is wrong (not naming the key)."""

    def __call__(self, value: object, /) -> T_co: ...


_CHECK = "agentc.files.settings.check"


class SettingsError(ConfigError, ValueError):
    """Every problem of one settings table, each a ``(dotted key, message)`` pair."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{key}: {message}" for key, message in self.problems))


@overload
def setting(check: Check[T], *, default: T) -> T: ...
@overload
def setting(check: Check[T], *, default_factory: Callable[[], T]) -> T: ...
@overload
def setting(check: Check[T]) -> T: ...
def setting(
    check: Check[Any], *, default: Any = dataclasses.MISSING, default_factory: Any = None
) -> Any:
    """A settings field: its check, and its default (none: the key is required)."""
    metadata = {_CHECK: check}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    if default is not dataclasses.MISSING:
        return dataclasses.field(default=default, metadata=metadata)
    return dataclasses.field(metadata=metadata)


def _checked(
    checks: Mapping[str, Check[Any]], values: Mapping[str, object]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Run each value's check; the converted values and every problem, nested keys dotted."""
    converted: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for key, value in values.items():
        check = checks.get(key)
        if check is None:
            problems.append((key, "unknown setting"))
            continue
        try:
            converted[key] = check(value)
        except SettingsError as exc:
            problems += [(f"{key}.{inner}", message) for inner, message in exc.problems]
        except ValueError as exc:
            problems.append((key, str(exc)))
    return converted, problems


def _fields(cls: type[Settings]) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(cls)  # type: ignore[arg-type]  # each subclass is a dataclass


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(setting,))
class Settings:
    """Base of a settings table: each subclass becomes a frozen, keyword-only dataclass."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)
        for item in _fields(cls):
            if _CHECK not in item.metadata:
                raise TypeError(f"{cls.__name__}.{item.name} is not declared with setting()")

    @classmethod
    def _checks(cls) -> dict[str, Check[Any]]:
        return {item.name: item.metadata[_CHECK] for item in _fields(cls)}

    def __post_init__(self) -> None:
        values = {name: getattr(self, name) for name in self._checks()}
        converted, problems = _checked(self._checks(), values)
        if problems:
            raise SettingsError(problems)
        for key, value in converted.items():
            object.__setattr__(self, key, value)
        problems = list(self.cross_checks())
        if problems:
            raise SettingsError(problems)

    def cross_checks(self) -> Iterable[tuple[str, str]]:
        """The problems of the rules that involve several keys, each a ``(key, message)``;
        run once every key has passed its own check. None here: a subclass with such a rule
        overrides this, so that its problems are reported like every other."""
        return ()

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Self:
        """The settings of a parsed table; raises :class:`SettingsError` with every problem."""
        converted, problems = _checked(cls._checks(), data)
        problems += [
            (item.name, "required, but missing")
            for item in _fields(cls)
            if item.name not in data
            and item.default is dataclasses.MISSING
            and item.default_factory is dataclasses.MISSING
        ]
        if problems:
            raise SettingsError(problems)
        return cls(**converted)

    @classmethod
    def parse(cls, data: Mapping[str, object], source: Path | str) -> Self:
        """:meth:`from_mapping`, its problems as one ConfigError naming ``source`` (a file)."""
        try:
            return cls.from_mapping(data)
        except SettingsError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: Path, *, what: str = "settings file") -> Self:
        """Read the TOML file ``path`` (see :func:`agentc.files.load_toml`) and :meth:`parse` it."""
        return cls.parse(load_toml(path, what=what), path)


# ---------------------------------------------------------------------------------------------
# Checks: each returns the converted value or raises ValueError (the key is added by the caller)


def _kind(value: object) -> str:
    return type(value).__name__


def string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {_kind(value)}")
    return value


def boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_kind(value)}")
    return value


def path(value: object) -> Path:
    return value if isinstance(value, Path) else Path(string(value))


def absolute_path(value: object) -> Path:
    result = path(value)
    if not result.is_absolute():
        raise ValueError(f"must be an absolute path, got {result}")
    return result


def absolute_paths(value: object) -> list[Path]:
    """A list of absolute paths, none with a ``..`` part (what a sandbox masks or binds)."""
    paths = list_of(path)(value)
    for item in paths:
        if not item.is_absolute() or ".." in item.parts:
            raise ValueError(f"must be absolute paths without '..', got {item}")
    return paths


def integer(*, minimum: int | None = None, maximum: int | None = None) -> Check[int]:
    """An integer (not a boolean) within the bounds given."""

    def check(value: object) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"expected an integer, got {_kind(value)}")
        return int(_bounded(value, minimum, maximum, above=None))

    return check


def number(
    *, minimum: float | None = None, maximum: float | None = None, above: float | None = None
) -> Check[float]:
    """A number (an integer is converted, a boolean refused) within the bounds given."""

    def check(value: object) -> float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(f"expected a number, got {_kind(value)}")
        return float(_bounded(value, minimum, maximum, above))

    return check


def _bounded(
    value: float, minimum: float | None, maximum: float | None, above: float | None
) -> float:
    if minimum is not None and value < minimum:
        raise ValueError(f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"must be <= {maximum}, got {value}")
    if above is not None and value <= above:
        raise ValueError(f"must be > {above}, got {value}")
    return value


def one_of(choices: Sequence[T]) -> Check[T]:
    """One of ``choices`` (declare them typed, e.g. ``tuple[Literal[...], ...]``)."""
    shown = [repr(choice) for choice in choices]
    allowed = " or ".join(shown) if len(shown) <= 2 else "one of " + ", ".join(shown)

    def check(value: object) -> T:
        for choice in choices:
            if value == choice and type(value) is type(choice):
                return choice
        raise ValueError(f"must be {allowed}, got {value!r}")

    return check


def optional(check: Check[T]) -> Check[T | None]:
    """None stays None (a keyword default; TOML has no null), anything else is ``check``-ed."""

    def checked(value: object) -> T | None:
        return None if value is None else check(value)

    return checked


def list_of(check: Check[T]) -> Check[list[T]]:
    """A list (or tuple) whose every item passes ``check``."""

    def checked(value: object) -> list[T]:
        if not isinstance(value, list | tuple):
            raise ValueError(f"expected a list, got {_kind(value)}")
        return [check(item) for item in value]

    return checked


def table_of(
    check: Check[T], *, keys: Collection[str] | None = None, kind: str = "key"
) -> Check[dict[str, T]]:
    """A table of named values, each passing ``check``; ``keys`` limits the names allowed."""

    def checked(value: object) -> dict[str, T]:
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a table, got {_kind(value)}")
        if keys is not None:
            for name in value:
                if name not in keys:
                    raise ValueError(f"unknown {kind} {name!r} (known: {', '.join(keys)})")
        converted, problems = _checked(dict.fromkeys(value, check), value)
        if problems:
            raise SettingsError(problems)
        return converted

    return checked


def section(cls: type[S]) -> Check[S]:
    """A nested table declared by its own :class:`Settings` class."""

    def check(value: object) -> S:
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a table, got {_kind(value)}")
        return cls.from_mapping(value)

    return check
