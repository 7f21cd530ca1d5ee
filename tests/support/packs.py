"""The shipped rule pack, loaded once per test process: the test files that read it
share one ``RulePack`` (its patterns compiled once), instead of each loading its own;
and a log's verdict through both of the classifier's paths."""

from __future__ import annotations

import functools
import io

from diagnostics import Diagnosis, RulePack, classify_lines, load_pack
from diagnostics.scanning.scan import classify_stream


@functools.cache
def shipped_pack() -> RulePack:
    return load_pack()


def both_paths(lines: list[str], pack: RulePack | None = None) -> Diagnosis:
    """The verdict of ``lines`` fed one by one (the worker's path), checked to be the
    verdict of the same lines read as a file (``diagnose``'s block scanner)."""
    pack = pack or shipped_pack()
    by_lines = classify_lines(lines, pack)
    by_file = classify_stream(io.BytesIO("\n".join(lines).encode()), pack)
    assert by_file == by_lines
    return by_lines
