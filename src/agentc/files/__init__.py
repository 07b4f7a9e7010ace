"""Small file-system helpers every agentc program shares (standard library only).

One home each for the rules that used to be written per program: reading a secret or private file
safely (:mod:`agentc.files.private`), reading a regular file, or its tail, someone else may
have written (:mod:`agentc.files.regular`), replacing a file atomically and durably
(:mod:`agentc.files.atomic`), appending JSON lines (:mod:`agentc.files.jsonl`), loading a TOML
file with one error format (:mod:`agentc.files.toml`), declaring a program's settings with one
check and one default per key (:mod:`agentc.files.settings`), starting a program apart
from its starter with its output in a log (:mod:`agentc.files.procs`; ``core`` does no I/O),
host mode's account rules and the switch to an account (:mod:`agentc.files.accounts`),
and Unix sockets of any path length and their peers' accounts (:mod:`agentc.files.sockets`).
This package imports nothing else of agentc but :mod:`agentc.core`, so the client, the service,
the supervisor and the helpers may all use it.
"""

from agentc.files.atomic import write_atomic
from agentc.files.jsonl import JsonLines, json_line, json_objects, tail_objects
from agentc.files.private import UnsafeFile, read_private
from agentc.files.regular import open_regular, read_tail
from agentc.files.toml import load_toml

__all__ = [
    "JsonLines",
    "UnsafeFile",
    "json_line",
    "json_objects",
    "load_toml",
    "open_regular",
    "read_private",
    "read_tail",
    "tail_objects",
    "write_atomic",
]
