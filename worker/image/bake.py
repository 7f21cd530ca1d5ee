"""Bake a model into an image: download it from the Hugging Face Hub and write the manifest.

This module owns the build-time half of the baked-model contract; the run-time half is
``worker.config.settings.read_baked_model``, which reads the manifest this writes. Layout::

    TARGET/model/       the model repo at one commit (a plain directory, not an HF cache)
    TARGET/tokenizer/   the tokenizer repo, only when it is not the model repo at its revision
    TARGET/baked.json   {"model_name", "model_path", "tokenizer_path", ...}; written last

Which files are downloaded is ``worker.image.download_plan`` (one copy of the weights,
the one vLLM loads); the token and the endpoint, and keeping them out of what is
printed, ``worker.image.credentials``; a failure as one line, ``worker.image.errors``.

``python -m worker.image.bake`` is what the Dockerfile runs. Failures are one line on
stderr naming the repo and what to change, with exit status 1.

Must not read the environment or touch the network at import; only ``main`` reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from worker.image.credentials import (
    ENDPOINT_SECRET_FILE,
    SECRET_FILE,
    public_endpoint,
    read_endpoint,
    read_token,
)
from worker.image.download_plan import Repo, ignore_patterns, separate_tokenizer
from worker.image.errors import BakeError, explain

DEFAULT_TARGET = Path("/model")
MANIFEST_NAME = "baked.json"
DEFAULT_ENDPOINT = "https://huggingface.co"
EXIT_OK, EXIT_FAILED = 0, 1


def _download(
    repo: Repo,
    dest: Path,
    *,
    token: str | None,
    endpoint: str | None,
    weights: bool,
    say: Callable[[str], None],
) -> str:
    """Download ``repo`` into ``dest``; return the commit sha. Raises BakeError."""
    from huggingface_hub import HfApi, snapshot_download

    shown_endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    try:
        info = HfApi(endpoint=endpoint, token=token).model_info(
            repo.repo_id, revision=repo.revision
        )
        files = [s.rfilename for s in info.siblings or ()]
        commit = info.sha or repo.revision
        ignore, skipping = ignore_patterns(files, weights=weights)
        say(
            f"downloading {repo.repo_id}@{repo.revision} (commit {commit}, "
            f"{len(files)} files in the repo) into {dest}{skipping}"
            + (f" from {public_endpoint(shown_endpoint)}" if endpoint else "")
        )
        started = time.monotonic()
        snapshot_download(
            repo.repo_id,
            revision=commit,  # the commit just resolved, so the manifest names what was got
            local_dir=dest,
            token=token,
            endpoint=endpoint,
            ignore_patterns=ignore or None,
        )
    except Exception as exc:
        # The one place outside failures are translated: huggingface_hub raises HTTP,
        # transport, validation and OS errors whose classes differ between its versions.
        raise explain(exc, repo, token, shown_endpoint) from exc
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    say(f"downloaded {repo.repo_id} ({size / 1e9:.2f} GB) in {time.monotonic() - started:.0f} s")
    return commit


def bake(
    model: str,
    target: Path = DEFAULT_TARGET,
    *,
    revision: str = "main",
    tokenizer: str | None = None,
    tokenizer_revision: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    say: Callable[[str], None] = lambda _message: None,
) -> Path:
    """Download the model (and a separate tokenizer) into ``target``; return the manifest.

    ``endpoint`` None means huggingface_hub's own (``HF_ENDPOINT`` or huggingface.co).
    Raises BakeError with a one-line message.
    """
    if not model.strip():
        raise BakeError("MODEL_NAME is empty: set it to the Hugging Face repo id to bake")
    target = target.resolve()
    model_repo = Repo(model.strip(), revision or "main", "MODEL_NAME", "MODEL_REVISION")
    model_dir = target / "model"
    commit = _download(model_repo, model_dir, token=token, endpoint=endpoint, weights=True, say=say)
    manifest: dict[str, object] = {
        "model_name": model_repo.repo_id,
        "model_path": str(model_dir),
        "tokenizer_path": None,
        "revision": model_repo.revision,
        "commit": commit,
    }

    tokenizer_repo = separate_tokenizer(model_repo, tokenizer, tokenizer_revision)
    if tokenizer_repo is not None:
        tokenizer_dir = target / "tokenizer"
        tokenizer_commit = _download(
            tokenizer_repo, tokenizer_dir, token=token, endpoint=endpoint, weights=False, say=say
        )
        manifest.update(
            tokenizer_path=str(tokenizer_dir),
            tokenizer_name=tokenizer_repo.repo_id,
            tokenizer_revision=tokenizer_repo.revision,
            tokenizer_commit=tokenizer_commit,
        )

    path = target / MANIFEST_NAME
    partial = path.with_suffix(".json.partial")
    try:
        partial.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, path)  # written last and whole: no manifest, no baked model
    except OSError as exc:
        raise BakeError(f"cannot write {path}: {exc.strerror or exc}") from exc
    say(f"wrote {path}")
    return path


def _parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m worker.image.bake",
        description="Download a model from the Hugging Face Hub into an image and write "
        "the manifest the worker serves it from. The token is read from HF_TOKEN or "
        f"{SECRET_FILE}; the hub from HF_ENDPOINT or {ENDPOINT_SECRET_FILE}.",
    )
    parser.add_argument("--model", default=env.get("MODEL_NAME", ""), help="repo id (MODEL_NAME)")
    parser.add_argument(
        "--revision", default=env.get("MODEL_REVISION", ""), help="default: main (MODEL_REVISION)"
    )
    parser.add_argument(
        "--tokenizer",
        default=env.get("TOKENIZER_NAME", ""),
        help="a separate tokenizer repo id (TOKENIZER_NAME)",
    )
    parser.add_argument(
        "--tokenizer-revision",
        default=env.get("TOKENIZER_REVISION", ""),
        help="default: main (TOKENIZER_REVISION)",
    )
    parser.add_argument(
        "--target", type=Path, default=DEFAULT_TARGET, help=f"default: {DEFAULT_TARGET}"
    )
    return parser


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    args = _parser(env).parse_args(argv)

    def say(message: str) -> None:
        print(f"bake: {message}", file=sys.stderr, flush=True)

    try:
        bake(
            args.model,
            args.target,
            revision=args.revision.strip() or "main",
            tokenizer=args.tokenizer.strip() or None,
            tokenizer_revision=args.tokenizer_revision.strip() or None,
            token=read_token(env),
            endpoint=read_endpoint(env),
            say=say,
        )
    except BakeError as exc:
        say(f"error: {exc}")
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
