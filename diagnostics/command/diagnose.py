"""``diagnose``: triage vLLM startup logs offline (the command's body; the console
script's entry is :mod:`diagnostics.command.cli`, which decides where this module's
bytecode and that of the modules it imports come from, then imports it).

Exit codes:
  0  every input was read; none shows a failed start
  1  at least one input shows a failed start (permanent or transient)
  2  usage error, unreadable/empty/binary input, or a broken rule pack
     (a one-line message on stderr; other inputs are still diagnosed)
"""

# Annotations are evaluated (no `from __future__ import annotations`): typing compiles each
# string annotation of a named tuple's fields at import, ~0.1 ms a class of a small log's run.
import atexit
import gc
import os
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

if TYPE_CHECKING:
    import argparse

EXIT_OK, EXIT_FAILED_START, EXIT_ERROR = 0, 1, 2
FORMATS = ("text", "json")


class Arguments(NamedTuple):
    files: list[str]
    format: str = "text"
    rules: str | None = None


def arguments(argv: list[str] | None = None) -> Arguments:
    """The command's arguments. The usual form (``--format``/``--rules`` with their
    values, then one or more files) is read here; anything else (help, a usage error,
    an abbreviated option, an option after a file, ``--``) goes to argparse, which
    gives the same result and words every message. Building argparse's parser costs
    ~4 ms of a small log's ~60."""
    args = sys.argv[1:] if argv is None else argv
    found: dict[str, str | None] = {"format": "text", "rules": None}
    i = 0
    while i < len(args) and args[i].startswith("--"):
        name, equals, value = args[i][2:].partition("=")
        if name not in found:
            return _parsed(argv)
        if not equals:
            if i + 1 == len(args) or args[i + 1].startswith("-"):
                return _parsed(argv)
            i += 1
            value = args[i]
        found[name] = value
        i += 1
    files = args[i:]
    if not files or found["format"] not in FORMATS:
        return _parsed(argv)
    if any(name.startswith("-") and name != "-" for name in files):
        return _parsed(argv)
    return Arguments(files, found["format"] or "text", found["rules"])


def _parsed(argv: list[str] | None) -> Arguments:
    parsed = _parser().parse_args(argv)
    return Arguments(parsed.files, parsed.format, parsed.rules)


def _parser() -> "argparse.ArgumentParser":
    import argparse

    parser = argparse.ArgumentParser(
        prog="diagnose",
        description="Say how far a vLLM start got and, if it failed, why and what to change.",
        epilog="Exit codes: 0 no failed start, 1 a failed start found, 2 an input or the rule "
        "pack could not be read. Accepts raw vLLM output, docker/kubectl logs and RunPod "
        "console exports.",
        formatter_class=_formatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="log file, or - for stdin")
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument(
        "--rules", metavar="PATH", help="rule pack folder or file (default: built in)"
    )
    return parser


def _formatter(prog: str) -> "argparse.HelpFormatter":
    """argparse's formatter at the terminal's width, found as shutil finds it, without
    importing shutil (argparse builds a formatter for every argument added)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    import argparse

    return argparse.HelpFormatter(prog, width=max(columns, 1) - 2)


def main(
    argv: list[str] | None = None,
    *,
    tune_memory: bool = False,
    bytecode: AbstractContextManager[None] | None = None,
) -> int:
    """``tune_memory`` (the console script): no garbage collection while the modules and
    the pack are built (see :class:`_StartUp`), and freed memory kept on the heap once an
    input is big (see :func:`_keep_freed_memory`). ``bytecode``: where the modules imported
    here keep their bytecode (:class:`diagnostics.command.cli._BytecodeIn`)."""
    args = arguments(argv)
    with _StartUp(tune_memory):
        with bytecode or nullcontext():
            from diagnostics.command.render import to_json, to_text
            from diagnostics.pack.rules import RulePackError, load_pack
            from diagnostics.scanning.scan import InputError, classify_stream
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
                with open(name, "rb") as stream:
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


def run(bytecode: AbstractContextManager[None] | None = None) -> int:
    """Console-script entry (:func:`diagnostics.command.cli.run`): like main(), quiet when
    the reader closes the pipe (| head)."""
    try:
        status = main(tune_memory=True, bytecode=bytecode)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    _end(status)
    return status


def _end(status: int) -> None:
    """The run is over and the process exits next: what it built (the pack, its patterns,
    the imported modules) would only be torn down by the interpreter's shutdown, ~5 ms
    of a small log's run, for memory the process's end frees all the same. With nothing
    left for the shutdown to do (no atexit handler: a coverage or profiling tool's; no
    other thread) the output is flushed and the process ends here with ``status``. Else
    what was built is frozen: the shutdown's garbage collections skip it (refcounted
    objects are still freed, atexit handlers still run)."""
    gc.freeze()
    threading = sys.modules.get("threading")
    if atexit._ncallbacks() or (threading is not None and threading.active_count() > 1):
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # as before: the shutdown's flush reports it
        return
    os._exit(status)


def _stdin() -> BinaryIO:
    """Standard input as bytes; InputError when it is closed (``diagnose - <&-``)."""
    from diagnostics.scanning.scan import InputError

    stdin = sys.stdin
    if stdin is None or getattr(stdin, "buffer", None) is None:
        raise InputError("standard input is closed")
    return stdin.buffer


class _StartUp:
    """Start-up (the imports, the pack) builds what lives for the whole run, so the
    garbage collector's passes over it find nothing to free: ~4 ms of a small log's run.
    ``hold``: none within the block; what was built is then frozen (later passes skip it)
    and collection goes on as usual for the inputs."""

    def __init__(self, hold: bool) -> None:
        self.hold = hold and gc.isenabled()

    def __enter__(self) -> None:
        if self.hold:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.hold:
            gc.freeze()
            gc.enable()


def _bigger_than_a_block(stream: BinaryIO) -> bool:
    from diagnostics.scanning.scan import BLOCK_SIZE

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
