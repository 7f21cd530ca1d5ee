"""One environment value -> the `vllm serve` tokens for its flag, checked the way vLLM's
argparse types would check it (numbers, JSON, booleans): exactly as strict as vLLM
(``int()``, ``float()``), no stricter. Pure."""

from __future__ import annotations

import json
import re

from worker.config.errors import ConfigError
from worker.config.parsers import parse_bool, shown
from worker.config.snapshot import Flag

_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_EXPECTED = {
    "int": "an integer",
    "float": "a number such as 0.9",
    "human_readable_int": "an integer such as 8192, 32k or 1M",
    "human_readable_int_or_auto": "an integer such as 8192, 32k or 1M, or auto",
}


def human_readable_int(value: str) -> int:
    """vllm.utils.argparse_utils.human_readable_int: 1k=1000, 1K=1024, 25.6k=25600."""
    match = _HUMAN_INT.fullmatch(value.strip())
    if not match:
        return int(value)
    number, suffix = match.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    return int(number) * _BINARY[suffix]  # ValueError for "1.5K", as in vLLM


def check_value(var: str, value: str, flag: Flag) -> None:
    """Reject values vLLM's argparse type for ``flag`` would reject (numbers, JSON)."""
    if flag.optional and value in ("None", ""):
        return
    if flag.name == "--max-model-len" and value.strip().lower() in ("auto", "-1"):
        return  # a vLLM without auto starts at the estimate (worker.supervision.relaunch)
    try:
        if flag.type == "int":
            int(value)
        elif flag.type == "float":
            float(value)
        elif flag.type == "human_readable_int":
            human_readable_int(value)
        elif flag.type == "human_readable_int_or_auto":
            if value.strip().lower() not in ("auto", "-1"):
                human_readable_int(value)
        elif flag.type == "loads":
            json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(var, f"expected JSON for {flag.name} ({exc.msg})") from None
    except ValueError:
        expected = _EXPECTED.get(flag.type or "", f"a valid {flag.type}")
        raise ConfigError(var, f"expected {expected}, got {shown(var, value)}") from None


def split_values(value: str) -> list[str]:
    """Values for a flag that takes several: a JSON list, one JSON object, or words."""
    if value.startswith("["):
        try:
            items = json.loads(value)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list):
            return [i if isinstance(i, str) else json.dumps(i) for i in items]
    if value.startswith("{"):
        return [value]
    return value.split()


def flag_tokens(var: str, value: str, flag: Flag) -> list[str]:
    """The command-line tokens that give ``flag`` the value of ``var``."""
    if flag.kind == "bool_pair":
        return [flag.name if parse_bool(var, value) else str(flag.negative)]
    if flag.kind in ("store_true", "store_false"):
        return [flag.name] if parse_bool(var, value) else []
    if not flag.multiple:
        check_value(var, value, flag)
        return [flag.name, value]
    items = split_values(value)
    for item in items:
        check_value(var, item, flag)
    if flag.kind == "append":
        return [token for item in items for token in (flag.name, item)]
    return [flag.name, *items]
