"""The shipped rule pack, loaded once per test process: the test files that read it
share one ``RulePack`` (its patterns compiled once), instead of each loading its own."""

from __future__ import annotations

import functools

from diagnostics import RulePack, load_pack


@functools.cache
def shipped_pack() -> RulePack:
    return load_pack()
