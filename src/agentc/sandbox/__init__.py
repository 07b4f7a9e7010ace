"""What starts a confined process: bwrap's arguments, the syscall filter, resource
limits, the reaper, tool paths and ``confined``; shared by launches, the integrator's checks and
project setup commands. And whether this host can make the sandbox at all (``preflight``).
"""
