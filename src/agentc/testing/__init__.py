"""Test and benchmark helpers: a scripted model provider and the real harnesses run against it.

:mod:`.provider` serves a scripted Anthropic Messages / OpenAI Responses API (:mod:`.script`,
:mod:`.wire`), :mod:`.harnesses` runs Claude Code, Codex and Pi against a base URL,
:mod:`.gateway` serves the model gateway in a thread and drives its control socket, and
:mod:`.serving` runs an ASGI server in a daemon thread. Nothing in a launch imports this
package; callers import the submodules.
"""
