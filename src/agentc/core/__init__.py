"""The pure domain rules and shared shapes every part of agentc agrees on (no I/O, and nothing
else of agentc imported).

:mod:`.model` holds the enums (statuses, roles, phases, credential classes) and fixed names,
:mod:`.wire` the request shapes an agent writes, :mod:`.verdict` the verdict a reviewer harness
writes (the standard library only, for the launch path), :mod:`.status` the derived task status and
offer order, :mod:`.lease` lease arithmetic, :mod:`.rules` the id, name and key rules,
canonical JSON, hashes and the RFC 3339 format, :mod:`.addresses` the loopback-host rule,
:mod:`.browser` the browser session's cookie, and :mod:`.errors` the one exception tree.
Callers import the submodules; the package itself exports nothing.
"""
