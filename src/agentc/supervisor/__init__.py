"""The supervisor (``agentc-supervisor``): runs agent harnesses in per-launch Bubblewrap sandboxes.

A launch is parsed lean (:mod:`.cli`, :mod:`.launch_request`), run in its agent session
(:mod:`.agentsession`), planned without writing anything (:mod:`.launch_plan`: run layout
:mod:`.rundir`, sandbox argv :mod:`.sandbox`, prompt :mod:`.prompt`, token :mod:`.tokens`),
checked (:mod:`.preflight`) and executed (:mod:`.launch_execute`, :mod:`.reaper`), all tied
together by :func:`.launch.run_launch`; :mod:`.launch_root` starts it as the role account.
Every other command is the click application (:mod:`.commands`). Model access goes through the
gateway (:mod:`.gateway`), network access through the relays and the egress proxy. Callers
import the submodules; the package itself exports nothing.
"""
