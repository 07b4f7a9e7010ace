"""The coordinator service (``agent-coordinator-server``): the JSON API, the web console and
the lease lane over :mod:`agentc.store`.

:mod:`.app` builds the ASGI application, :mod:`.api` runs each request's transaction and answers
with the envelope, :mod:`.auth` authenticates agents and people, :mod:`.routes_work` and
:mod:`.routes_access` declare the routes, :mod:`.work` holds the work model's rules and flow,
:mod:`.console` the web console, :mod:`.lane` answers well-formed lease requests without
FastAPI's dispatch, :mod:`.settings` and :mod:`.cli` are the server's settings and commands,
:mod:`.serving` and :mod:`.workers` run it in one process or several. Callers import the
submodules; the package itself exports nothing.
"""
