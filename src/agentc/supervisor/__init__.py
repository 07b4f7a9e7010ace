"""The supervisor (``agentc-supervisor``): runs agent harnesses in per-launch Bubblewrap sandboxes.

:mod:`.loop` is the run loop (claim, clone, prompt, launch, renew, settle). :mod:`.launch` is one
launch: parsed lean (:mod:`.cli`, :mod:`.launch.request`), run in its agent session
(:mod:`.launch.agentsession`), planned without writing anything (:mod:`.launch.plan`: run layout
:mod:`.launch.rundir`, prompt :mod:`.launch.prompt`, token :mod:`.launch.tokens`), checked
(:mod:`.launch.preflight`) and executed (:mod:`.launch.execute`), tied together by
:func:`.launch.run.run_launch`; :mod:`.launch.root` starts it as the role account.
:mod:`.harness` holds what the supervisor knows of each harness. The sandbox itself is
:mod:`agentc.sandbox`; model access goes through the gateway (:mod:`agentc.gateway`), network
access through the relays and the egress proxy (:mod:`agentc.egress`), each a process of its
own. Every other command is the click application (:mod:`.commands`). Callers import the
submodules; the package itself exports nothing.
"""
