"""The download plan: which repos, and which of their files, a bake downloads.

When the model repo has safetensors weights, its other weight formats (``*.bin``,
``*.pth``, ...) are skipped: vLLM loads safetensors first and would never read them. When
it has ``consolidated*.safetensors`` (Mistral's layout, beside sharded copies of the same
weights), vLLM 0.32's automatic load format reads only those, so the other copy and its
index are skipped too (``duplicate_weights``). A separate tokenizer repo is downloaded
without weights, and only when it is not the model repo at its revision.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Repo:
    """One repo to download, and the build args that chose it (named in errors)."""

    repo_id: str
    revision: str
    name_var: str  # MODEL_NAME or TOKENIZER_NAME
    revision_var: str  # MODEL_REVISION or TOKENIZER_REVISION


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


def ignore_patterns(files: Iterable[str], *, weights: bool) -> tuple[list[str], str]:
    """The patterns of ``files`` not to download, and what that skips in words (for the
    progress line). ``weights`` False: the tokenizer's files only."""
    if not weights:
        return ["*.safetensors", *OTHER_WEIGHTS], "; tokenizer files only"
    names = list(files)
    ignore = skipped_weights(names)
    skipping = f"; skipping other weight formats: {', '.join(ignore)}" if ignore else ""
    duplicates = duplicate_weights(names)
    if duplicates:
        ignore += duplicates
        skipping += f"; skipping the copy vLLM does not load: {', '.join(duplicates)}"
    return ignore, skipping


def separate_tokenizer(model: Repo, name: str | None, revision: str | None) -> Repo | None:
    """The tokenizer repo to download, or None when the model repo's own files serve."""
    repo_id = (name or "").strip() or (model.repo_id if revision else None)
    if repo_id is None:
        return None
    repo = Repo(repo_id, revision or "main", "TOKENIZER_NAME", "TOKENIZER_REVISION")
    return None if (repo.repo_id, repo.revision) == (model.repo_id, model.revision) else repo
