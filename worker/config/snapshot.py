"""vLLM's `vllm serve` options as recorded in ``vllm_flags.json``.

The snapshot is written by ``scripts/snapshot_vllm_flags.py`` from vLLM's own parser;
this reads it into ``Flags`` (looked up by flag, option string or env name). Pure apart
from reading the packaged file.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any


def env_name(flag: str) -> str:
    """``--max-model-len`` -> ``MAX_MODEL_LEN``."""
    return flag.lstrip("-").upper().replace("-", "_")


@dataclass(frozen=True)
class Flag:
    """One option of `vllm serve`, as recorded in the snapshot."""

    name: str
    dest: str
    kind: str  # value | bool_pair | store_true | store_false | append
    type: str | None = None
    optional: bool = False
    nargs: str | int | None = None
    multiple: bool = False
    negative: str | None = None
    aliases: tuple[str, ...] = ()
    deprecated: str | None = None

    @property
    def env_names(self) -> tuple[str, ...]:
        """UPPER_SNAKE forms of the flag and its long aliases, primary first."""
        longs = [self.name, *(a for a in self.aliases if a.startswith("--"))]
        return tuple(env_name(f) for f in longs)

    @property
    def takes_value(self) -> bool:
        """Whether the flag is followed by a value on the command line."""
        return self.kind in ("value", "append")


@dataclass(frozen=True)
class Flags:
    """The options of one vLLM version, looked up by flag, option string or env name."""

    vllm_version: str
    by_flag: Mapping[str, Flag]
    by_option: Mapping[str, Flag] = field(repr=False)
    by_env: Mapping[str, Flag] = field(repr=False)

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any]) -> Flags:
        by_flag = {
            name: Flag(name=name, **{**info, "aliases": tuple(info.get("aliases", ()))})
            for name, info in data["flags"].items()
        }
        by_option: dict[str, Flag] = {}
        by_env: dict[str, Flag] = {}
        for flag in by_flag.values():
            for option in (flag.name, flag.negative, *flag.aliases):
                if option:
                    by_option[option] = flag
            for name in flag.env_names:
                by_env.setdefault(name, flag)
        return cls(data["vllm_version"], by_flag, by_option, by_env)

    def resolve(self, option: str) -> Flag | None:
        """The flag vLLM's argparse takes ``option`` for: an exact option string, else
        (``allow_abbrev``, argparse's default, which vLLM keeps) the one flag whose long
        option strings start with it. None for an unknown or ambiguous option."""
        exact = self.by_option.get(option)
        if exact is not None or not option.startswith("--") or len(option) < 3:
            return exact
        matches = {f.name: f for o, f in self.by_option.items() if o.startswith(option)}
        return next(iter(matches.values())) if len(matches) == 1 else None


@functools.cache
def load_flags() -> Flags:
    """The snapshot packaged next to this module."""
    text = resources.files("worker.config").joinpath("vllm_flags.json").read_text(encoding="utf-8")
    return Flags.from_snapshot(json.loads(text))
