"""The model gateway: real model credentials stay on the host; launches hold sentinels.

See docs/gateway.md. Modules: ``sentinels`` (per-launch credentials and fencing),
``credentials`` (the protected role credential files), ``meter`` (usage from the provider's
own stream), ``ledger`` (the host-side ledger, caps and vendors.json), ``prices``, ``app``
(the forwarding ASGI app), ``control`` (the host-side Unix-socket API), ``cli``.
"""
