"""The model gateway: real model credentials stay on the host; launches hold sentinels.

See docs/gateway.md. Modules: ``sentinels`` (per-launch credentials, their grants and fencing),
``credentials`` (the protected role credential files), ``meter`` (usage from the provider's
own stream), ``ledger`` (the host-side ledger and its caps), ``vendors`` (vendors.json),
``prices``, ``policy`` (a call's body against the model policy), ``app`` (the forwarding ASGI
app), ``control`` (the host-side Unix-socket API), ``lease`` (its one client, and a launch's
hold on its sentinel), ``server`` and ``cli``. Callers import the submodules; the package
itself exports nothing.
"""
