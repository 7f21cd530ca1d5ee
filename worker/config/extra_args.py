"""``VLLM_EXTRA_ARGS``: extra `vllm serve` arguments, split like a shell would, with the
flags the worker owns removed. An option is resolved the way vLLM's argparse resolves it
(``--api-k`` is ``--api-key``: argparse accepts unique prefixes), so an abbreviation
cannot slip a server-owned flag past the filter. A ``--config`` file named here gets the
checks ``VLLM_CONFIG_FILE`` gets (``worker.config.config_file``): the only I/O."""

from __future__ import annotations

import shlex

from worker.config.config_file import check_config_file
from worker.config.errors import ConfigError
from worker.config.owned import SERVER_OWNED
from worker.config.snapshot import Flags

VAR = "VLLM_EXTRA_ARGS"


def split_extra_args(value: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise ConfigError(VAR, f"cannot split into arguments: {exc}") from None


def strip_server_owned(tokens: list[str], flags: Flags) -> tuple[list[str], list[str]]:
    """Drop flags the worker owns (and their values); return the rest and warnings."""
    kept: list[str] = []
    warnings: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, has_inline_value, _ = token.partition("=")
        option = name.replace("_", "-") if name.startswith("--") else name
        flag = flags.resolve(option)
        owner = flag.name if flag else option
        i += 1
        if owner not in SERVER_OWNED:
            kept.append(token)
            if owner == "--config":
                path = token.partition("=")[2] if has_inline_value else None
                if path is None and i < len(tokens):
                    path = tokens[i]
                if path:
                    warnings += check_config_file(VAR, path, flags)[1]
            continue
        shown = option if option == owner else f"{option} (vLLM reads it as {owner})"
        warnings.append(f"{VAR}: {shown} was removed: {SERVER_OWNED[owner]}")
        if flag is not None and flag.takes_value and not has_inline_value:
            while i < len(tokens) and not tokens[i].startswith("-"):
                i += 1
                if flag.nargs not in ("+", "*"):
                    break
    return kept, warnings
