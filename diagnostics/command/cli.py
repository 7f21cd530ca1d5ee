"""``diagnose``: triage vLLM startup logs offline.

Exit codes:
  0  every input was read; none shows a failed start
  1  at least one input shows a failed start (permanent or transient)
  2  usage error, unreadable/empty/binary input, or a broken rule pack
     (a one-line message on stderr; other inputs are still diagnosed)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import BinaryIO

from diagnostics.command.render import to_json, to_text
from diagnostics.pack.rules import RulePackError, load_pack
from diagnostics.scanning.scan import BLOCK_SIZE, InputError, classify_stream

EXIT_OK, EXIT_FAILED_START, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="diagnose",
        description="Say how far a vLLM start got and, if it failed, why and what to change.",
        epilog="Exit codes: 0 no failed start, 1 a failed start found, 2 an input or the rule "
        "pack could not be read. Accepts raw vLLM output, docker/kubectl logs and RunPod "
        "console exports.",
        formatter_class=_formatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="log file, or - for stdin")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--rules", metavar="PATH", help="rule pack folder or file (default: built in)"
    )
    return parser


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter at the terminal's width, found as shutil finds it, without
    importing shutil (argparse builds a formatter for every argument added)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return argparse.HelpFormatter(prog, width=max(columns, 1) - 2)


def main(argv: list[str] | None = None, *, tune_memory: bool = False) -> int:
    """``tune_memory``: keep freed memory on the heap once an input is big (the
    console script; see :func:`_keep_freed_memory`)."""
    args = _parser().parse_args(argv)
    try:
        pack = load_pack(args.rules)
    except RulePackError as exc:
        print(f"diagnose: broken rule pack: {exc}", file=sys.stderr)
        return EXIT_ERROR
    status = EXIT_OK
    render = to_json if args.format == "json" else to_text
    for name in args.files:
        try:
            if name == "-":
                stdin = _stdin()
                if tune_memory:  # a pipe's size is unknown
                    tune_memory = _keep_freed_memory()
                diagnosis = classify_stream(stdin, pack)
            else:
                with Path(name).open("rb") as stream:
                    if tune_memory and _bigger_than_a_block(stream):
                        tune_memory = _keep_freed_memory()
                    diagnosis = classify_stream(stream, pack)
        except (OSError, InputError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            print(f"diagnose: {name}: {reason}", file=sys.stderr)
            status = EXIT_ERROR
            continue
        print(render(diagnosis, name), flush=True)
        if diagnosis.failed and status == EXIT_OK:
            status = EXIT_FAILED_START
    return status


def _stdin() -> BinaryIO:
    """Standard input as bytes; InputError when it is closed (``diagnose - <&-``)."""
    stdin = sys.stdin
    if stdin is None or getattr(stdin, "buffer", None) is None:
        raise InputError("standard input is closed")
    return stdin.buffer


def run() -> int:
    """Console-script entry: like main(), quiet when the reader closes the pipe (| head)."""
    try:
        return main(tune_memory=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _bigger_than_a_block(stream: BinaryIO) -> bool:
    try:
        return os.fstat(stream.fileno()).st_size > BLOCK_SIZE
    except (OSError, ValueError, AttributeError):
        return True


def _keep_freed_memory() -> bool:
    """A big log is read in blocks, and every block makes a few temporaries of its size.
    By default glibc hands such memory back to the kernel when it is freed and faults
    it in afresh for the next block: a third of the time on a 500 MB log. Keep it on
    the heap instead (glibc only; elsewhere nothing changes). Done only once an input is
    bigger than a block: ctypes costs a small log's run more than it saves. Returns
    False: nothing left to tune."""
    import ctypes  # only here: the library itself stays free of it

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD: keep up to 64 MiB freed
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: blocks below 32 MiB from the heap
    except (OSError, AttributeError):
        pass
    return False


if __name__ == "__main__":
    sys.exit(run())
