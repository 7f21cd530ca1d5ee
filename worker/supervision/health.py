"""The health probe: polls vLLM's ``GET /health`` once its output says the server is up;
then asks the length it serves (``GET /v1/models``)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

import httpx

RETRY_S = 0.02  # a retry interval, not a synchronisation
# vLLM is asked over plain http:// on the loopback, so no TLS is ever negotiated: the
# clients get a context with no CA loaded (it would refuse any certificate) instead of
# httpx's default one, whose CA bundle costs ~21 ms of CPU per client to load.
LOOPBACK_ONLY = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


async def wait_healthy(port: int, keep_trying: Callable[[], bool]) -> bool:
    """True as soon as ``/health`` answers 200; False once ``keep_trying()`` is False."""
    url = f"http://127.0.0.1:{port}/health"
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(30.0, connect=2.0), verify=LOOPBACK_ONLY
    ) as client:
        while keep_trying():
            try:
                response = await client.get(url)
                if response.status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            await asyncio.sleep(RETRY_S)
    return False


async def served_max_model_len(port: int, timeout_s: float = 5.0) -> int | None:
    """The length vLLM serves (``GET /v1/models``: its ``max_model_len``), once ready;
    None when it does not say."""
    url = f"http://127.0.0.1:{port}/v1/models"
    try:
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=2.0), verify=LOOPBACK_ONLY
        ) as client:
            response = await client.get(url)
        models = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    for model in models if isinstance(models, list) else []:
        value = model.get("max_model_len") if isinstance(model, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
