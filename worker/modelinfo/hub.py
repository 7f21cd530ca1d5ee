"""Read a model's metadata from the Hugging Face Hub without downloading weights.

Uses ``huggingface_hub`` with the endpoint, token and timeout it is given (the worker's
``HF_ENDPOINT``/``HF_TOKEN``): model info with file sizes (``files_metadata``) and the
``config.json`` bytes, read into memory (nothing is written to the cache). A definite
answer of the hub (401/403 gated, repo or revision not found) is returned as a
``HubRefusal``; anything else that goes wrong (timeout, 5xx, 429, no connection) is a
``HubUnknown``: the launch goes ahead and vLLM decides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from worker.modelinfo.facts import ModelFacts

DEFAULT_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class HubRefusal:
    """The hub said no, for sure: ``kind`` is gated, repo-not-found or revision-not-found."""

    kind: str
    detail: str


@dataclass(frozen=True)
class HubUnknown:
    """The hub could not give an answer (slow, unreachable, 5xx, 429...)."""

    detail: str


def _refusal(exc: Exception, repo_id: str, revision: str | None) -> HubRefusal | HubUnknown:
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
    said = " ".join(str(getattr(exc, "server_message", "") or "").split())
    if said and said not in first:
        first = f"{first}: {said}"
    if isinstance(exc, GatedRepoError):
        return HubRefusal("gated", first)
    if isinstance(exc, RepositoryNotFoundError):
        return HubRefusal("repo-not-found", first)
    if isinstance(exc, RevisionNotFoundError):
        return HubRefusal("revision-not-found", f"revision {revision!r}: {first}")
    if isinstance(exc, EntryNotFoundError):
        return HubUnknown(f"no config.json: {first}")
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):  # a refusal without the hub's error code: access denied
            return HubRefusal("gated", first)
        return HubUnknown(f"HTTP {status}: {first}")
    return HubUnknown(f"{type(exc).__name__}: {first}")


def read_hub(
    repo_id: str,
    revision: str | None,
    *,
    endpoint: str | None,
    token: str | None,
    timeout: float,
) -> ModelFacts | HubRefusal | HubUnknown:
    """Model info (file sizes, safetensors parameter counts) and config.json of a repo."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    auth: str | bool = token or False  # False: never a token saved on this machine
    try:
        info = HfApi(endpoint=endpoint, token=auth).model_info(
            repo_id, revision=revision, files_metadata=True, timeout=timeout
        )
    except Exception as exc:
        return _refusal(exc, repo_id, revision)
    files = {s.rfilename: int(s.size or 0) for s in info.siblings or []}
    parameters = dict(info.safetensors.parameters) if info.safetensors else None
    config: dict[str, Any] | None = None
    if "config.json" in files:
        rev = quote(info.sha or revision or "main", safe="")
        url = f"{endpoint}/{repo_id}/resolve/{rev}/config.json"
        try:
            response = get_session().get(
                url,
                headers=build_hf_headers(token=auth),
                timeout=timeout,
                follow_redirects=True,
            )
            hf_raise_for_status(response)
            loaded = json.loads(response.content)
            config = loaded if isinstance(loaded, dict) else None
        except ValueError:  # not JSON: vLLM will say so
            config = None
        except Exception as exc:
            answer = _refusal(exc, repo_id, revision)
            if isinstance(answer, HubRefusal):
                return answer
            config = None
    elif info.gated:
        # A gated repo without config.json: nothing to fetch to prove access; go ahead.
        pass
    return ModelFacts(source="hub", config=config, files=files, parameters=parameters)
