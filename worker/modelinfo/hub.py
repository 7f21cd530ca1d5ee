"""Read a model's metadata from the Hugging Face Hub without downloading weights.

The hub (or a mirror at ``HF_ENDPOINT``) is untrusted input. Three requests at most: the
model info with file sizes (``/api/models/{repo}[/revision/{rev}]?blobs=true``), the
``config.json`` bytes and, when vLLM would read one, the safetensors index; all read
into memory (nothing is written to the cache), each bounded:

* by its **decoded** size (``MAX_INFO_BYTES``, ``MAX_CONFIG_BYTES``, ``MAX_INDEX_BYTES``;
  a gzip answer is inflated with a cap, never whole) and the model info by its number of
  files (``MAX_FILES``);
* in **time**, all requests together: ``timeout`` seconds from the first byte asked to
  the last byte read; a hub that trickles its answer is cut off there;
* by **type and range**: the model info and the config are checked against the schema in
  ``worker.modelinfo.schema``. The bounded GET is ``worker.modelinfo.hub_http``.

A definite answer of the hub (401/403 gated, repo or revision not found) is returned as
a ``HubRefusal``; anything else (too large, too slow, malformed, implausible, 5xx, 429,
no connection) is a ``HubUnknown``: the launch goes ahead and vLLM decides. Texts from
the hub are returned as the hub wrote them: the caller redacts them (the secret rule is
``diagnostics.redaction``) before they are shown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from worker.modelinfo.facts import ModelFacts
from worker.modelinfo.hub_http import HubClient, HubError, NoAnswer
from worker.modelinfo.local import MAX_CONFIG_BYTES, MAX_INDEX_BYTES
from worker.modelinfo.weight_plan import MISTRAL_INDEX, SAFE_INDEX

DEFAULT_ENDPOINT = "https://huggingface.co"
MAX_INFO_BYTES = 8 << 20  # model info with blobs: ~200 bytes a file, MAX_FILES of them


@dataclass(frozen=True)
class HubRefusal:
    """The hub said no, for sure: ``kind`` is gated, repo-not-found or revision-not-found."""

    kind: str
    detail: str


@dataclass(frozen=True)
class HubUnknown:
    """The hub could not give an answer (slow, unreachable, too large, malformed...)."""

    detail: str


def _refusal(exc: HubError, revision: str | None, what: str) -> HubRefusal | HubUnknown:
    """The hub's error answer, read as huggingface_hub's hf_raise_for_status reads it."""
    said = f"{exc.status} {exc.code or 'error'}" + (f": {exc.message}" if exc.message else "")
    if exc.code == "GatedRepo":
        return HubRefusal("gated", said)
    if exc.code == "RevisionNotFound":
        return HubRefusal("revision-not-found", f"revision {revision!r}: {said}")
    if exc.code == "RepoNotFound":
        return HubRefusal("repo-not-found", said)
    if exc.code == "EntryNotFound" or (exc.status == 404 and what != "model info"):
        return HubUnknown(f"no {what}: {said}")
    if (
        exc.status == 401
        and what == "model info"
        and exc.message != "Invalid credentials in Authorization header"
    ):
        return HubRefusal("repo-not-found", said)  # the hub's answer for a missing repo
    if exc.status in (401, 403):  # a refusal without the hub's error code: access denied
        return HubRefusal("gated", said)
    return HubUnknown(f"HTTP {said}")


def _read(
    client: HubClient, repo_id: str, revision: str | None
) -> ModelFacts | HubRefusal | HubUnknown:
    from worker.modelinfo.schema import check_index, check_listing, clean_config

    repo = quote(repo_id, safe="/")
    path = f"/api/models/{repo}"
    if revision:
        path += f"/revision/{quote(revision, safe='')}"
    try:
        data = client.get_json(path, MAX_INFO_BYTES, "model info", {"blobs": "true"})
    except HubError as exc:
        return _refusal(exc, revision, "model info")
    try:
        listing = check_listing(data)
    except ValueError as exc:
        raise NoAnswer(f"the model info is not plausible ({exc})") from None
    files = {s.rfilename: int(s.size or 0) for s in listing.siblings}
    parameters = (
        dict(listing.safetensors.parameters)
        if listing.safetensors and listing.safetensors.parameters
        else None
    )
    rev = quote(listing.sha or revision or "main", safe="")
    problems: list[str] = []

    def fetch(name: str, limit: int) -> Any:
        try:
            return client.get_json(f"/{repo}/resolve/{rev}/{quote(name)}", limit, name)
        except HubError as exc:
            answer = _refusal(exc, revision, name)
            if isinstance(answer, HubRefusal):
                raise _Refused(answer) from None
            problems.append(answer.detail)
        except NoAnswer as exc:
            problems.append(str(exc))
        return None

    config: dict[str, Any] | None = None
    try:
        if "config.json" in files:
            config, bad = clean_config(fetch("config.json", MAX_CONFIG_BYTES))
            problems += bad
        indexes = {}
        for name in (SAFE_INDEX, MISTRAL_INDEX):
            if name in files:
                names = check_index(fetch(name, MAX_INDEX_BYTES))
                if names is not None:
                    indexes[name] = names
    except _Refused as refused:
        return refused.answer
    return ModelFacts(
        source="hub",
        config=config,
        files=files,
        parameters=parameters,
        indexes=indexes,
        problems=tuple(problems),
    )


class _Refused(Exception):
    def __init__(self, answer: HubRefusal):
        super().__init__(answer.detail)
        self.answer = answer


def _in_thread(work: Callable[[], Any], timeout: float) -> tuple[bool, Any]:
    """Run ``work`` in a daemon thread for at most ``timeout`` seconds: (done, result)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name="preflight-hub", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return False, None
    if "error" in box:
        raise box["error"]
    return True, box.get("result")


def read_hub(
    repo_id: str,
    revision: str | None,
    *,
    endpoint: str | None,
    token: str | None,
    timeout: float,
) -> ModelFacts | HubRefusal | HubUnknown:
    """Model info (file sizes, safetensors parameter counts), config.json and the index
    of a repo, all within ``timeout`` seconds in total."""
    from huggingface_hub.utils import build_hf_headers

    # The schemas (pydantic) load on the first hub read, before its clock starts.
    from worker.modelinfo import schema  # noqa: F401

    endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    deadline = time.monotonic() + timeout
    try:
        # token=False: never a token saved on this machine.
        headers = build_hf_headers(token=token or False)
    except Exception as exc:
        return HubUnknown(f"{type(exc).__name__}: {exc}")

    def work() -> ModelFacts | HubRefusal | HubUnknown:
        client = HubClient(endpoint, headers, deadline)
        try:
            return _read(client, repo_id, revision)
        finally:
            client.close()

    try:
        done, answer = _in_thread(work, timeout)
    except NoAnswer as exc:
        return HubUnknown(str(exc))
    except Exception as exc:  # transport errors, timeouts, bad URLs
        first = (str(exc).strip().splitlines() or [""])[0]
        return HubUnknown(f"{type(exc).__name__}: {first}".rstrip(": "))
    if not done:
        return HubUnknown(f"no whole answer within {timeout:g} s (PREFLIGHT_TIMEOUT)")
    return answer


def download_bytes(
    repo_id: str, revision: str | None, endpoint: str | None, token: str | None
) -> int | None:
    """What vLLM will download of the repo (one weight format, config and tokenizer
    files), from the hub's metadata read with the same bounds as the pre-flight; None
    when unknown. For the download's progress events: a nicety, never a verdict."""
    facts = read_hub(repo_id, revision, endpoint=endpoint, token=token, timeout=10)
    if not isinstance(facts, ModelFacts):
        return None
    fetched = facts.download_files()
    return sum(fetched.values()) or None if fetched else None
