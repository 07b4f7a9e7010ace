"""``agentc-supervisor netns-relay`` as a click command: help, and the refusals of a bad
command line (:mod:`agentc.egress.netns_relay` runs a plain one without click)."""

from __future__ import annotations

import click

from agentc.egress.addresses import RelayAddressError, RelaySpec
from agentc.egress.netns_relay import relay_command, relay_specs


def _relay_option(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> list[RelaySpec]:
    try:
        return relay_specs(values)
    except RelayAddressError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command(
    "netns-relay",
    hidden=True,
    context_settings={"ignore_unknown_options": False, "allow_interspersed_args": False},
)
@click.option(
    "--listen",
    "--relay",
    "relays",
    multiple=True,
    metavar="127.0.0.1:PORT=/SOCKET",
    callback=_relay_option,
    help="Listen on this loopback address and forward to this Unix socket (repeatable).",
)
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def command(ctx: click.Context, relays: list[RelaySpec], argv: tuple[str, ...]) -> None:
    """Inside a launch's network namespace: relay loopback ports, run the command after --."""
    ctx.exit(relay_command(relays, argv))
