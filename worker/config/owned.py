"""What the worker owns of vLLM's server: flags it sets itself, variables it keeps from
vLLM's environment. Each with the reason the user is told."""

from __future__ import annotations

from collections.abc import Mapping

# The worker's proxy talks plain HTTP to vLLM's OpenAI server on 127.0.0.1:VLLM_PORT, so
# anything that moves, secures or replaces that server breaks it.
SERVER_OWNED: Mapping[str, str] = {
    "--host": "the worker sets --host 127.0.0.1 itself",
    "--port": "the worker sets --port from VLLM_PORT itself",
    "--uds": "the worker talks to vLLM over TCP",
    "--api-key": "only the worker's proxy talks to vLLM; RunPod authenticates requests",
    "--ssl-keyfile": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--ssl-certfile": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--ssl-ca-certs": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--ssl-cert-reqs": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--ssl-ciphers": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--enable-ssl-refresh": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--root-path": "the worker's proxy calls vLLM's routes at /",
    "--headless": "the worker needs vLLM's OpenAI HTTP server",
    "--grpc": "the worker needs vLLM's OpenAI HTTP server",
    "--tokens-only": "the worker needs vLLM's OpenAI HTTP server",
}
# --host and --port are overridden on the command line, so a config file may keep them.
CLI_OVERRIDES = frozenset({"--host", "--port"})

# Variables vLLM reads itself that would break the worker's proxy: removed from vLLM's
# environment (the worker warns when one is set).
HIDDEN_ENV: Mapping[str, str] = {
    "VLLM_API_KEY": "vLLM would demand it from the worker's proxy and every job would fail "
    "with 401; RunPod authenticates requests",
}
