"""Bake a model into an image: download it from the Hugging Face Hub and write the manifest.

This module owns the build-time half of the baked-model contract; the run-time half is
``worker.config.settings.read_baked_model``, which reads the manifest this writes. Layout::

    TARGET/model/       the model repo at one commit (a plain directory, not an HF cache)
    TARGET/tokenizer/   the tokenizer repo, only when it is not the model repo at its revision
    TARGET/baked.json   {"model_name", "model_path", "tokenizer_path", ...}; written last

When the model repo has safetensors weights, its other weight formats (``*.bin``,
``*.pth``, ...) are skipped: vLLM loads safetensors first and would never read them. When
it has ``consolidated*.safetensors`` (Mistral's layout, beside sharded copies of the same
weights), vLLM 0.32's automatic load format reads only those, so the other copy and its
index are skipped too (``duplicate_weights``).

``python -m worker.image.bake`` is what the Dockerfile runs. The token comes from ``HF_TOKEN``
or the BuildKit secret file ``/run/secrets/HF_TOKEN``, the hub from ``HF_ENDPOINT`` or
the secret file ``/run/secrets/HF_ENDPOINT`` (a mirror whose URL holds credentials);
neither is ever printed: the endpoint is shown without its ``user:password@`` and every
hub text has the token and those credentials taken out (``_hide``). Failures are one line
on stderr naming the repo and what to change, with exit status 1.

Must not read the environment or touch the network at import; only ``main`` reads them.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from diagnostics.redaction.redact import Redactor
from diagnostics.redaction.secrets import secret_values

DEFAULT_TARGET = Path("/model")
SECRET_FILE = Path("/run/secrets/HF_TOKEN")
ENDPOINT_SECRET_FILE = Path("/run/secrets/HF_ENDPOINT")
# scheme://user:password@ or scheme://token@ in a URL: dropped from the endpoint shown.
_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]{0,30}://)[^\s/@?#\"'<>]+@")
MANIFEST_NAME = "baked.json"
DEFAULT_ENDPOINT = "https://huggingface.co"

# Weight formats vLLM never reads when a repo has safetensors (its default load format
# prefers *.safetensors). GGUF files are served by path, so a baked repo id never needs them.
OTHER_WEIGHTS = (
    "*.bin",
    "*.pt",
    "*.pth",
    "*.ckpt",
    "*.h5",
    "*.msgpack",
    "*.onnx",
    "*.onnx_data",
    "*.ot",
    "*.tflite",
    "*.gguf",
)
EXIT_OK, EXIT_FAILED = 0, 1


class BakeError(Exception):
    """Raised when a repo cannot be baked; the message is one line that names the fix."""


@dataclass(frozen=True)
class Repo:
    """One repo to download, and the build args that chose it (named in errors)."""

    repo_id: str
    revision: str
    name_var: str  # MODEL_NAME or TOKENIZER_NAME
    revision_var: str  # MODEL_REVISION or TOKENIZER_REVISION


def read_token(env: Mapping[str, str], secret_file: Path = SECRET_FILE) -> str | None:
    """The Hub token from ``HF_TOKEN``, else the BuildKit secret file, else None."""
    token = env.get("HF_TOKEN", "").strip()
    if token:
        return token
    try:
        token = secret_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token or None


def read_endpoint(env: Mapping[str, str], secret_file: Path = ENDPOINT_SECRET_FILE) -> str | None:
    """The hub to bake from: ``HF_ENDPOINT``, else the BuildKit secret file, else None."""
    endpoint = env.get("HF_ENDPOINT", "").strip()
    if endpoint:
        return endpoint
    try:
        endpoint = secret_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return endpoint or None


def public_endpoint(endpoint: str) -> str:
    """``endpoint`` as it may be shown: without ``user:password@``."""
    return _USERINFO.sub(r"\1", endpoint)


def _secrets_of(token: str | None, endpoint: str | None) -> list[str]:
    """The exact values never to show: the token and the endpoint's credentials (the one
    secret rule, ``diagnostics.redaction.secrets``)."""
    return secret_values({"HF_TOKEN": token or "", "HF_ENDPOINT": endpoint or ""})


def _hide(text: str, secrets: Sequence[str]) -> str:
    return Redactor(secrets)(text)


def duplicate_weights(files: Iterable[str]) -> list[str]:
    """Weight files vLLM never reads because of another copy: beside
    ``consolidated*.safetensors`` vLLM 0.32 (load format auto) reads only those, so the
    other safetensors files and their index are not downloaded."""
    names = list(files)
    if not any(fnmatch.fnmatch(n.rsplit("/", 1)[-1], "consolidated*.safetensors") for n in names):
        return []
    return sorted(
        n
        for n in names
        if "/" not in n
        and (n.endswith(".safetensors") or n == "model.safetensors.index.json")
        and not fnmatch.fnmatch(n, "consolidated*")
    )


def skipped_weights(files: Iterable[str]) -> list[str]:
    """Patterns of weight files not to download: other formats when safetensors exist."""
    names = list(files)
    if not any(name.endswith(".safetensors") for name in names):
        return []
    return [p for p in OTHER_WEIGHTS if any(Path(n).match(p) for n in names)]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _explain(exc: Exception, repo: Repo, token: str | None, endpoint: str) -> BakeError:
    """The huggingface_hub failure as one line naming the repo and the build arg to fix,
    with the token and the endpoint's credentials taken out."""
    explained = _explain_raw(exc, repo, token, public_endpoint(endpoint))
    return BakeError(_hide(str(explained), _secrets_of(token, endpoint)))


def _explain_raw(exc: Exception, repo: Repo, token: str | None, endpoint: str) -> BakeError:
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    name = repo.repo_id
    if isinstance(exc, GatedRepoError):
        if token is None:
            return BakeError(
                f"{name} is a gated model and no token was given: set the HF_TOKEN secret "
                "(docker build --secret id=HF_TOKEN,env=HF_TOKEN ...) to a token of an "
                f"account that has accepted the model's terms on {endpoint}/{name}"
            )
        return BakeError(
            f"{name} is a gated model and the HF_TOKEN secret has no access to it: accept "
            f"the model's terms on {endpoint}/{name} with the token's account, or set the "
            "HF_TOKEN secret to a token that has access"
        )
    if isinstance(exc, RevisionNotFoundError):
        return BakeError(
            f"{name} has no revision {repo.revision!r}: set {repo.revision_var} to a branch, "
            "tag or commit of the repo"
        )
    if isinstance(exc, RepositoryNotFoundError):
        private = "" if token else " (a private repo also needs the HF_TOKEN secret)"
        return BakeError(f"repo {name} was not found on {endpoint}: check {repo.name_var}{private}")
    if isinstance(exc, HFValidationError):
        return BakeError(
            f"{repo.name_var}={name!r} is not a Hugging Face repo id (like org/model): "
            f"{_one_line(exc)}"
        )
    if isinstance(exc, OSError) and exc.filename:
        return BakeError(f"cannot write {exc.filename}: {exc.strerror or exc}")
    return BakeError(f"cannot download {name} from {endpoint}: {_one_line(exc)}")


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
        if weights:
            ignore = skipped_weights(files)
            skipping = f"; skipping other weight formats: {', '.join(ignore)}" if ignore else ""
            duplicates = duplicate_weights(files)
            if duplicates:
                ignore += duplicates
                skipping += f"; skipping the copy vLLM does not load: {', '.join(duplicates)}"
        else:
            ignore, skipping = ["*.safetensors", *OTHER_WEIGHTS], "; tokenizer files only"
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
        raise _explain(exc, repo, token, shown_endpoint) from exc
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    say(f"downloaded {repo.repo_id} ({size / 1e9:.2f} GB) in {time.monotonic() - started:.0f} s")
    return commit


def _tokenizer_repo(model: Repo, name: str | None, revision: str | None) -> Repo | None:
    """The tokenizer repo to download, or None when the model repo's own files serve."""
    repo_id = (name or "").strip() or (model.repo_id if revision else None)
    if repo_id is None:
        return None
    repo = Repo(repo_id, revision or "main", "TOKENIZER_NAME", "TOKENIZER_REVISION")
    return None if (repo.repo_id, repo.revision) == (model.repo_id, model.revision) else repo


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

    tokenizer_repo = _tokenizer_repo(model_repo, tokenizer, tokenizer_revision)
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
