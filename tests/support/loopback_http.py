"""httpx clients for the tests' loopback servers, which speak plain http:// only: with a
TLS context that loads no CA bundle (httpx's default loads certifi's, ~21 ms of CPU per
client; it would refuse any certificate, and none is ever offered) and no proxy from
the environment."""

from __future__ import annotations

import ssl
from typing import Any

import httpx

NO_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def loopback_client(**kwargs: Any) -> httpx.Client:
    return httpx.Client(trust_env=False, verify=NO_TLS, **kwargs)
