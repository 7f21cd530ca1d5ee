"""``PORT_HEALTH``'s server on a thread and event loop of its own, so that nothing a
client sends to ``PORT`` (or how many connections it holds) can delay or starve the
health check. Used by the run loop (``worker.lb.serve``) when ``PORT_HEALTH`` is not
``PORT``."""

from __future__ import annotations

import asyncio
import threading

import structlog
import uvicorn
import uvloop

log = structlog.get_logger("worker.lb")


class HealthThread:
    """PORT_HEALTH's server on a thread and event loop of its own."""

    def __init__(self, server: uvicorn.Server) -> None:
        self.server = server
        self.done = threading.Event()
        self.failed = False

    def start(self) -> None:
        threading.Thread(target=self._main, name="lb-health", daemon=True).start()

    def _main(self) -> None:
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(self.server.serve())
        except SystemExit:  # uvicorn could not bind the port (it logged why)
            self.failed = True
        except Exception:
            log.exception("lb.health_crashed")
            self.failed = True
        finally:
            self.done.set()

    def stop(self, timeout_s: float) -> None:
        self.server.should_exit = True
        self.done.wait(timeout_s)
