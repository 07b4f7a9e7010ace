"""``agentc-supervisor``'s entry point, kept lean because every launch starts here.

A plain ``launch`` command line is parsed without click (:func:`.launch_request.parse_launch`)
and run here, and a plain ``netns-relay`` line (the first process of every relayed launch) goes
straight to :func:`agentc.egress.netns_relay.run_argv`. Anything else (help, every
other command, a bad or unusual argument) goes to the click application,
:data:`agentc.supervisor.commands.main`. Both run the launch with
:func:`agentc.supervisor.launch.run.run_launch`.

Every refusal prints ``agentc-supervisor: <message>`` and exits 1; never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(args: Sequence[str] | None = None) -> None:
    """The ``agentc-supervisor`` command."""
    argv = list(sys.argv[1:] if args is None else args)
    if argv[:1] == ["netns-relay"]:  # first inside every relayed launch: no click, no config
        from agentc.egress import netns_relay

        status = netns_relay.run_argv(argv[1:])
        if status is not None:
            sys.exit(status)
    from agentc.supervisor.launch.request import launch_request, new_launch_id, parse_launch

    parsed = parse_launch(argv)
    if parsed is None:
        from agentc.supervisor import commands

        commands.main.main(args=argv)  # exits
    from agentc.core.errors import AgentcError
    from agentc.files.exits import FAILED, fail
    from agentc.supervisor.config import load_config
    from agentc.supervisor.launch.run import run_launch

    config_path, params = parsed
    request = launch_request(params, new_launch_id(params["launch_id"]))
    try:
        config = load_config(config_path)
        code = run_launch(config, request, params["dry_run"])
    except (AgentcError, OSError) as exc:  # a host condition is named too, no traceback
        fail("agentc-supervisor", exc, FAILED)
    sys.exit(code)


if __name__ == "__main__":  # python -m agentc.supervisor.cli (a prefix usable without the script)
    main()
