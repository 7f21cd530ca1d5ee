"""``VLLM_CONFIG_FILE``, or ``--config`` in ``VLLM_EXTRA_ARGS``: the YAML file vLLM reads
for ``--config``, checked before vLLM starts, the same way for both. Only a regular file
of at most ``MAX_BYTES`` is read (a FIFO would block the start, ``/dev/zero`` would read
until memory runs out); YAML aliases are refused (a 405-byte alias bomb expands past
3 GiB when its values are walked) and so is nesting deeper than ``MAX_DEPTH``. The
mapping read is kept (``read_config_file``), so the pre-flight uses the settings' own
reading instead of opening the file again."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

import yaml

from worker.config.errors import ConfigError
from worker.config.owned import CLI_OVERRIDES, SERVER_OWNED
from worker.config.snapshot import Flags

MAX_BYTES = 1 << 20
MAX_DEPTH = 8
_READ: dict[tuple[str, int, int, int, int], dict[str, Any]] = {}
_READ_LOCK = threading.Lock()


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases (``*name``): a value is written out once."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            mark = event.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"an alias (*{event.anchor}) is not accepted", mark
            )
        return super().compose_node(parent, index)


def _depth(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` levels of lists and mappings."""
    if isinstance(value, dict | list):
        if limit == 0:
            return False
        items = value.values() if isinstance(value, dict) else value
        return all(_depth(item, limit - 1) for item in items)
    return True


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


def _key(path: str) -> tuple[str, int, int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def read_config_file(var: str, path: str) -> dict[str, Any]:
    """The mapping of the YAML config file at ``path``, read once with every check
    (regular file, size, UTF-8, no aliases, bounded nesting, a mapping); a file already
    read and unchanged since is not read again. Raises ConfigError."""
    key = _key(path)
    with _READ_LOCK:
        if key is not None and key in _READ:
            return _READ[key]
    if Path(path).suffix not in (".yaml", ".yml"):
        raise ConfigError(var, f"{path} must end in .yaml or .yml (vLLM rejects other files)")
    text = _read_text(var, path)
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)
    except RecursionError:
        raise ConfigError(var, f"{path} nests too deeply") from None
    except yaml.YAMLError as exc:
        # Not str(exc): it quotes the offending line, which may hold a token.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(var, f"{path} is not valid YAML: {problem}{where}") from None
    if not isinstance(data, dict):
        raise ConfigError(var, f"{path} must be a YAML mapping of flag names to values")
    if not _depth(data, MAX_DEPTH):
        raise ConfigError(var, f"{path} nests lists or mappings more than {MAX_DEPTH} deep")
    if key is not None:
        with _READ_LOCK:
            if len(_READ) > 16:
                _READ.clear()
            _READ[key] = data
    return data


def check_config_file(var: str, path: str, flags: Flags) -> tuple[dict[str, Any], list[str]]:
    """Read the YAML file vLLM will read for --config; return its mapping and warnings."""
    data = read_config_file(var, path)
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
