"""Where each program's settings file is, and the ``--config`` option that names another one
(``agentc-supervisor``, its ``model-gateway``, ``agentc-integrator``, ``agentc-attention``,
``agentc-host``): one spelling, one check (a file, not a folder) and one help text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ETC = Path("/etc/agentc")
F = TypeVar("F", bound=Callable[..., Any])


def default_config(program: str) -> Path:
    """``/etc/agentc/<program>.toml``: ``program``'s settings unless ``--config`` names others."""
    return ETC / f"{program}.toml"


def config_option(program: str, *, missing: str = "") -> Callable[[F], F]:
    """``--config PATH`` into the parameter ``config_path``: None when not given (the program
    reads :func:`default_config`); ``missing`` says what a missing default file means, if it
    is no error."""
    import click  # here: a launch reads its settings module without loading click

    when_missing = f"; missing: {missing}" if missing else ""
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help=f"The settings file (default {default_config(program)}{when_missing}).",
    )
