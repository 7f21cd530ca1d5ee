"""Snapshot the options of vLLM's own `vllm serve` argument parser into
worker/config/vllm_flags.json.

Run it with the vLLM environment's python (the worker's environment has no vLLM):

    .venv-vllm/bin/python scripts/snapshot_vllm_flags.py          # rewrite the snapshot
    .venv-vllm/bin/python scripts/snapshot_vllm_flags.py --print  # print it instead

The worker turns environment variables into `vllm serve` flags from this snapshot
(worker/config/flags.py), and tests/worker/config/test_flags_snapshot.py reruns the script
to catch drift when vLLM is upgraded. Output is deterministic: flags sorted, one flag per line, so a
vLLM upgrade shows up as a readable diff.

Each flag maps to {"dest", "kind", "type"} plus, only when set: "optional" (accepts
"None"), "nargs", "multiple" (takes several values), "negative" (the --no- form of a
bool_pair), "aliases" (other option strings) and "deprecated" (vLLM's message).
kind is one of value, bool_pair, store_true, store_false, append; type is the name of
the argparse type function with vLLM's optional/parse wrappers removed (int, float,
human_readable_int, human_readable_int_or_auto, str, loads, parse_dataclass, ...).

This script only reads vLLM's parser; it must not start an engine or touch the network.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parent.parent / "worker" / "config" / "vllm_flags.json"

# argparse action class -> snapshot kind. Custom vLLM actions that take values are "value".
_KINDS = {
    "_StoreAction": "value",
    "BooleanOptionalAction": "bool_pair",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_AppendAction": "append",
}
# Wrappers from vllm.engine.arg_utils that delegate to the type they close over.
_WRAPPERS = {"_optional_type", "_parse_type"}
# vLLM marks these with a help text of the form "--flag is deprecated ...".
_DEPRECATED_HELP = re.compile(r"^--[\w-]+ is deprecated\b")


def build_parser() -> argparse.ArgumentParser:
    """Build the parser `vllm serve` uses (vllm/entrypoints/cli/serve.py, subparser_init)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def _type_name(fn: Any) -> tuple[str | None, bool]:
    """Return (name of the innermost value type, whether "None"/"" is accepted)."""
    optional = False
    while fn is not None and getattr(fn, "__name__", "") in _WRAPPERS:
        optional = optional or fn.__name__ == "_optional_type"
        inner = [c.cell_contents for c in fn.__closure__ or () if callable(c.cell_contents)]
        fn = inner[0] if inner else None
    if fn is None:
        return None, optional
    name = getattr(fn, "__name__", type(fn).__name__)
    return ("lambda" if name == "<lambda>" else name), optional


def _describe(parser: argparse.ArgumentParser, action: argparse.Action) -> dict[str, Any]:
    cls = type(action).__name__
    kind = _KINDS.get(cls)
    if kind is None:
        if action.nargs == 0:
            raise SystemExit(f"unknown zero-argument action {cls} for {action.option_strings}")
        kind = "value"  # e.g. LoRAParserAction, DeprecatedLogConfigFileAction
    type_name, optional = _type_name(action.type)
    nargs = action.nargs if kind in ("value", "append") else None
    help_text = action.help if isinstance(action.help, str) else ""
    deprecated = None
    if (
        action in getattr(parser, "_deprecated", ())
        or getattr(action, "deprecated", False)
        or cls.startswith("Deprecated")
        or _DEPRECATED_HELP.match(help_text)
    ):
        deprecated = " ".join(help_text.split()) or "deprecated"
    flag = next(s for s in action.option_strings if s.startswith("--"))
    # BooleanOptionalAction adds "--no-<name>" for each of its option strings.
    negatives = {"--no-" + s[2:] for s in action.option_strings} if kind == "bool_pair" else set()
    info: dict[str, Any] = {"dest": action.dest, "kind": kind, "type": type_name}
    optional_fields = {
        "optional": optional,
        "nargs": nargs,
        "multiple": kind == "append" or nargs in ("+", "*") or isinstance(nargs, int),
        "negative": "--no-" + flag[2:] if kind == "bool_pair" else None,
        "aliases": sorted(set(action.option_strings) - negatives - {flag}),
        "deprecated": deprecated,
    }
    # Fields at their default (false, null, empty) are left out to keep the file small.
    info.update((k, v) for k, v in optional_fields.items() if v)
    return info


def snapshot() -> dict[str, Any]:
    """Describe every optional argument of `vllm serve`, keyed by its long flag."""
    import vllm

    parser = build_parser()
    flags: dict[str, dict[str, Any]] = {}
    for action in parser._actions:
        long_flags = [s for s in action.option_strings if s.startswith("--")]
        if not long_flags or isinstance(action, argparse._HelpAction):
            continue  # the positional model_tag and --help
        flag = long_flags[0]
        if flag in flags:
            raise SystemExit(f"duplicate flag {flag}")
        flags[flag] = _describe(parser, action)
    return {"vllm_version": vllm.__version__, "flags": dict(sorted(flags.items()))}


def render(data: dict[str, Any]) -> str:
    """JSON with one flag per line, so upgrades produce small diffs."""
    lines = ["{", f'  "vllm_version": {json.dumps(data["vllm_version"])},', '  "flags": {']
    items = list(data["flags"].items())
    for i, (flag, info) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(flag)}: {json.dumps(info, sort_keys=True)}{comma}")
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--print", action="store_true", help="write to stdout, not the file")
    args = cli.parse_args(argv)
    # vLLM decides at import time whether to build help texts from sys.argv ("--help");
    # pin argv so the snapshot never depends on how this script was called.
    sys.argv = [sys.argv[0]]
    # vLLM logs to stdout by default; keep stdout for the snapshot alone.
    with contextlib.redirect_stdout(sys.stderr):
        text = render(snapshot())
    if args.print:
        sys.stdout.write(text)
    else:
        SNAPSHOT.write_text(text, encoding="utf-8")
        print(f"wrote {SNAPSHOT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
