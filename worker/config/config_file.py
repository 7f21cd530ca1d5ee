"""``VLLM_CONFIG_FILE``: the YAML file vLLM reads for ``--config``, checked before vLLM
starts. Only a regular file of at most ``MAX_BYTES`` is read (a FIFO would block the
start, ``/dev/zero`` would read until memory runs out)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from worker.config.errors import ConfigError
from worker.config.owned import CLI_OVERRIDES, SERVER_OWNED
from worker.config.snapshot import Flags

MAX_BYTES = 1 << 20


def _read_text(var: str, path: str) -> str:
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then rejects it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(var, f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(var, f"{path} is not a regular file")
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise ConfigError(var, f"{path} is larger than {MAX_BYTES // 1024} KiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            var, f"{var}={path} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None


def check_config_file(var: str, path: str, flags: Flags) -> tuple[dict[str, Any], list[str]]:
    """Read the YAML file vLLM will read for --config; return its mapping and warnings."""
    if Path(path).suffix not in (".yaml", ".yml"):
        raise ConfigError(var, f"{path} must end in .yaml or .yml (vLLM rejects other files)")
    text = _read_text(var, path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # Not str(exc): it quotes the offending line, which may hold a token.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(var, f"{path} is not valid YAML: {problem}{where}") from None
    if not isinstance(data, dict):
        raise ConfigError(var, f"{path} must be a YAML mapping of flag names to values")
    warnings = []
    for key, value in data.items():
        option = "--" + str(key).replace("_", "-")
        flag = flags.by_option.get(option)
        if option in SERVER_OWNED and option not in CLI_OVERRIDES:
            raise ConfigError(var, f"{path} sets {key!r}: {SERVER_OWNED[option]}; remove it")
        if flag is None:
            warnings.append(f"{var}: {key!r} in {path} is not a vLLM {flags.vllm_version} flag")
        elif value is False and "_" in str(key) and flag.kind == "bool_pair":
            # vLLM looks up "--no-<key>" without normalising underscores and drops it.
            hyphenated = str(key).replace("_", "-")
            warnings.append(
                f"{var}: vLLM ignores '{key}: false' in {path}; write '{hyphenated}: false'"
            )
    return data, warnings
