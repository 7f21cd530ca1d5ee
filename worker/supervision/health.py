"""The health probe: polls vLLM's ``GET /health`` once its output says the server is up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

RETRY_S = 0.02  # a retry interval, not a synchronisation


async def wait_healthy(port: int, keep_trying: Callable[[], bool]) -> bool:
    """True as soon as ``/health`` answers 200; False once ``keep_trying()`` is False."""
    url = f"http://127.0.0.1:{port}/health"
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=2.0)) as client:
        while keep_trying():
            try:
                response = await client.get(url)
                if response.status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            await asyncio.sleep(RETRY_S)
    return False
