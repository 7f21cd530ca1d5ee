"""What a verdict judged by provenance (:mod:`diagnostics.classify.verdict`) tells the
user to do: the fix of its category, and what a restart does when the category is a
permanent one but this start was not judged so (where a paste stops is not known to be
where the error was raised). Pure data and one function."""

from __future__ import annotations

from diagnostics.model import Category

# What a restart does, by (the category is a permanent one, this start was judged so).
_RESTART = {
    (True, True): " A restart on the same settings fails the same way.",
    # Where the paste stops is not known to be where it was raised: it may be a frame on
    # the way to a host fault.
    (True, False): " Where the log stops is not known to be where the error was raised, so "
    "a restart may help; if it fails the same way, do this.",
}

_FIX = {
    Category.BAD_CONFIG: "Change the option the message names (an env var, VLLM_EXTRA_ARGS or "
    "VLLM_CONFIG_FILE).",
    Category.MODEL_REQUIREMENT: "The model or an option needs what this vLLM or GPU does not "
    "offer: change the option the message names, the model, or the image/GPU type.",
    Category.KV_CACHE: "Lower MAX_MODEL_LEN or MAX_NUM_SEQS, or raise GPU_MEMORY_UTILIZATION.",
    Category.OOM: "Use a GPU with more memory, a smaller or quantized model, or lower "
    "MAX_MODEL_LEN / GPU_MEMORY_UTILIZATION.",
    Category.MODEL_NOT_FOUND: "Check MODEL_NAME (and the revision or local path).",
    Category.GATED_MODEL: "Set HF_TOKEN to a token with access to the model.",
    Category.REMOTE_CODE: "Set TRUST_REMOTE_CODE=true if you trust the model's code.",
    Category.NETWORK: "A restart may help once the hub is reachable.",
    Category.CUDA_FAULT: "A restart on another host may help.",
}
_OTHER_FIX = "A restart may help; the attached output names what failed."
# vLLM's own code asking another project's object for what its version lacks
# (provenance, verdict.judged_by_origin): the image's two versions do not fit.
_PACKAGES_FIX = (
    "vLLM and the {package} installed beside it are of versions that do not fit: install "
    "the {package} version this vLLM release requires (vLLM's own image pins it), or a "
    "vLLM release made for the installed {package}. A restart on the same image fails the "
    "same way."
)
# Raised in a model repository's own code (REPOSITORY_CODE): it ran, so it was trusted.
_REPOSITORY_FIX = (
    "The model repository's own code (run with TRUST_REMOTE_CODE) fails with this image's "
    "transformers or vLLM: pin a revision of the model whose code works with them "
    "(MODEL_REVISION, or CODE_REVISION for the code alone), use an image with the "
    "transformers version the repository names, or a model vLLM supports natively. A "
    "restart on the same settings fails the same way."
)
# A file vLLM parses while the engine is built did not parse: these types (subclasses of
# the deterministic ValueError) raised through vLLM's own code.
_UNPARSED = frozenset({"JSONDecodeError", "TOMLDecodeError", "UnicodeDecodeError"})
# The projects that read a model's and a setting's files from disk; not their download
# code, nor the hub's (it parses the hub's answers too: a proxy's page read as JSON, a
# file cut short by a download, are the network's).
_READERS = ("vllm/", "transformers/")
_DOWNLOADERS = ("transformers/utils/hub.py", "transformers/file_utils.py")


def unparsed_file(cls: str, path: str) -> bool:
    """Whether ``cls`` raised under ``path`` (project-relative) is a file vLLM or
    transformers read that does not parse: the same file on every start."""
    return cls in _UNPARSED and path.startswith(_READERS) and not path.startswith(_DOWNLOADERS)


_UNPARSED_FIX = (
    "A file vLLM reads while building the engine (the model's or a setting's JSON, TOML or "
    "text file: its traceback names the function that opened it) does not parse: correct "
    "it at the line and column the message gives, or download the model again if the file "
    "was cut short. A restart on the same files fails the same way."
)
_OTHER_PERMANENT_FIX = (  # raised by vLLM's own code while the engine is built
    "vLLM rejects this start the same way each time: change the setting the message "
    "names, or use an image with another vLLM version. A restart on the same settings "
    "fails the same way."
)


def fix_for(category: Category, permanent: bool) -> str:
    """The fix of a verdict of ``category`` judged ``permanent`` (or not)."""
    if category is Category.OTHER and permanent:
        return _OTHER_PERMANENT_FIX
    return _FIX.get(category, _OTHER_FIX) + _RESTART.get((category.permanent, permanent), "")


def raised_fix(cls: str, deterministic: bool, repository: bool, mismatch: str) -> str:
    """The fix of a verdict by where an exception of type ``cls`` was raised, when it says
    more than its category's (verdict.judged_by_origin): ``deterministic``, permanent and
    raised by vLLM's own code; ``repository``, permanent and raised in the model
    repository's code; ``mismatch``, the project whose version does not fit vLLM's."""
    if mismatch:
        return _PACKAGES_FIX.format(package=mismatch)
    if deterministic and cls in _UNPARSED:
        return _UNPARSED_FIX
    return _REPOSITORY_FIX if repository else ""
