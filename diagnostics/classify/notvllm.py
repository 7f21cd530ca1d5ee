"""Lines that are not vLLM's own and never a cause of its start: an HTTP server's access
line (vLLM's API server's, a proxy's beside it), a client's log of its request to
vLLM's API or of its failure to reach it, and a Ray daemon's line forwarded to the
driver's console."""

from __future__ import annotations

import re
from functools import cache


@cache
def _access_line() -> re.Pattern[str]:
    # uvicorn's access line: '%s - "%s %s HTTP/%s" %d %s' (client host:port first); a
    # client's log of its request to an OpenAI-style server (httpx: 'HTTP Request: %s %s
    # "%s %d %s"'), whose paths (/v1/..., /health) are never the hub's.
    return re.compile(
        r'\S+:\d+ - "[A-Z]{3,7} \S+ HTTP/\d(?:\.\d)?" \d{3}\b'
        r"|HTTP Request: [A-Z]{3,7} \S+?/(?:v1/|health\b|ping\b|metrics\b|version\b|invocations\b)"
        r'\S* "HTTP/\d(?:\.\d)? \d{3}\b'
        # urllib3's report of a client that could not reach it (a web UI, a task queue
        # waiting for vLLM): the path is the server's API, never the hub's
        r"|Max retries exceeded with url: "
        r"/(?:v1/|health\b|ping\b|metrics\b|version\b|invocations\b)"
        # a client's own words that vLLM's server could not be reached (a trainer waiting
        # for `trl vllm-serve`, a pipeline for its rollout server): vLLM's, never the hub
        r"|(?i:\bvllm server\b.{0,40}?\b(?:can't|cannot|could not|couldn't) be reached"
        r"|\b(?:can't|cannot|could not|couldn't|failed to|unable to) (?:reach|connect to)"
        r" (?:the )?vllm server\b)"
    )


# A Ray daemon's own line (its log forwarded to the driver's console): Ray's, not vLLM's.
_RAY_DAEMON = re.compile(
    r"^\s*\((?:raylet|gcs_server|autoscaler|dashboard\w*)(?:, ip=[\w.:\-]+)?\) "
)


def ray_daemons(line: str) -> bool:
    """Whether ``line`` (raw) is a Ray daemon's (raylet, GCS, autoscaler, dashboard): an
    error it logs (a disk filling, a node's heartbeat) is Ray's, not vLLM's."""
    return line.lstrip().startswith("(") and _RAY_DAEMON.match(line) is not None


def access_line(text: str) -> bool:
    """Whether ``text`` (normalised) is an HTTP server's access line, or a client's log of
    its request to an OpenAI-style server (or of its failure to reach one): the status in
    it is the server's answer to a client (vLLM's API server, a proxy beside it), never a
    cause of a failed start (a hub's 401 or 404 reads the same words)."""
    return (
        '" ' in text
        or "HTTP Request: " in text
        or "Max retries exceeded with url: /" in text
        or ("LLM server" in text or "LLM Server" in text or "llm server" in text)
    ) and _access_line().search(text) is not None
