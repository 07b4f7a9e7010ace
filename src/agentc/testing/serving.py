"""An ASGI server in a daemon thread, for tests and benchmarks (the provider, the gateway)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import uvicorn


class ServerThread:
    """Runs ``main()`` (which serves ``server``) in a daemon thread with the server's loop.

    :meth:`start` returns once the server accepts connections; :meth:`stop` asks it to exit
    and waits for the thread.
    """

    def __init__(
        self,
        server: uvicorn.Server,
        main: Callable[[], Coroutine[Any, Any, None]],
        *,
        what: str,
    ) -> None:
        self.server = server
        self._main = main
        self._what = what
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with asyncio.Runner(loop_factory=self.server.config.get_loop_factory()) as runner:
            runner.run(self._main())

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"{self._what} did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
