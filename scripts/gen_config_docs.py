"""Regenerate the generated parts of docs/configuration.md from the code.

The tables come from ``worker.config.settings.SETTINGS``, ``worker.config.flags`` (aliases, removed
flags, the vLLM flag snapshot) and examples run through ``worker.config.flags.build_args``, so
the page cannot drift from what the worker does; ``tests/worker/config/test_config_docs.py`` fails
when it is stale. Prose around the ``<!-- generated:NAME -->`` markers is hand-written.

Usage: python scripts/gen_config_docs.py [--check]
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from worker.config import flags as flagmod
from worker.config.settings import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "configuration.md"
BEGIN, END = "<!-- generated:{name} -->", "<!-- end:{name} -->"

# Each example is one environment; the table shows the arguments and warnings it yields.
EXAMPLES: list[dict[str, str]] = [
    {"MODEL_NAME": "Qwen/Qwen2.5-0.5B-Instruct"},
    {"MAX_MODEL_LEN": "4096"},
    {"MAX_MODEL_LEN": "32k"},
    {"ENFORCE_EAGER": "true"},
    {"ENABLE_PREFIX_CACHING": "false"},
    {"TENSOR_PARALLEL_SIZE": "2", "GPU_MEMORY_UTILIZATION": "0.9"},
    {"DEVICE_MEMORY_UTILIZATION": "0.9"},
    {"SERVED_MODEL_NAME": "my-model gpt-4o"},
    {"LIMIT_MM_PER_PROMPT": '{"image": 2}'},
    {"MIDDLEWARE": '["pkg.a:mw", "pkg.b:mw"]'},
    {"MODEL": "org/a", "MODEL_NAME": "org/b"},
    {"PORT": "9000"},
    {"SWAP_SPACE": "4"},
    {"VLLM_EXTRA_ARGS": "--max-num-seqs 64 --port 9000"},
]

_KIND = {
    "bool_pair": "`true` → `{name}`, `false` → `{negative}`",
    "store_true": "`true` → `{name}`, `false` → nothing",
    "store_false": "`true` → `{name}`, `false` → nothing",
}
_TYPE = {
    "int": "integer",
    "float": "number",
    "human_readable_int": "integer (`8192`, `32k`, `1M`)",
    "human_readable_int_or_auto": "integer (`8192`, `32k`, `1M`) or `auto`",
    "loads": "JSON",
    "parse_dataclass": "JSON",
    "union_dict_and_str": "JSON or text",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{_cell(text)}`" if text else ""


def _worker_table() -> str:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for setting in SETTINGS:
        rows.append(f"| `{setting.name}` | {_code(setting.default)} | {_cell(setting.doc)} |")
    return "\n".join(rows)


def _alias_table() -> str:
    rows = ["| variable | sets | direct form (wins when both are set) |", "|---|---|---|"]
    for alias, flag in flagmod.ALIASES.items():
        rows.append(f"| `{alias}` | `{flag}` | `{flagmod.env_name(flag)}` |")
    return "\n".join(rows)


def _example_table() -> str:
    rows = ["| environment | `vllm serve` arguments | warnings |", "|---|---|---|"]
    for env in EXAMPLES:
        built = flagmod.build_args(env)
        shown = "<br>".join(_code(f"{k}={shlex.quote(v)}") for k, v in env.items())
        warnings = "<br>".join(_cell(w) for w in built.warnings)
        rows.append(f"| {shown} | {_code(shlex.join(built.args))} | {warnings} |")
    return "\n".join(rows)


def _takes(flag: flagmod.Flag) -> str:
    if flag.kind in _KIND:
        return _KIND[flag.kind].format(name=flag.name, negative=flag.negative)
    what = _TYPE.get(flag.type or "", "text")
    if flag.kind == "append":
        return f"{what}; several as a JSON list or words, each gets its own `{flag.name}`"
    if flag.multiple:
        return f"{what}; several as a JSON list or separated by spaces"
    return what


def _notes(flag: flagmod.Flag, owned: Mapping[str, str]) -> str:
    notes = []
    if flag.name in owned:
        notes.append(f"ignored: {owned[flag.name]}")
    if any(name in flagmod.PASSTHROUGH_ENV for name in flag.env_names):
        notes.append("left in vLLM's environment, never put on its command line")
    if flag.deprecated:
        notes.append(flag.deprecated)
    return _cell("; ".join(notes))


def _flag_table() -> str:
    owned = flagmod.SERVER_OWNED
    rows = ["| variable | flag | value | notes |", "|---|---|---|---|"]
    for name, flag in sorted(flagmod.load_flags().by_flag.items()):
        names = "<br>".join(f"`{env}`" for env in flag.env_names)
        rows.append(f"| {names} | `{name}` | {_takes(flag)} | {_notes(flag, owned)} |")
    return "\n".join(rows)


def _removed_hint(name: str) -> str:
    """The hint the worker logs when ``name`` is set, as build_args words it."""
    try:
        (warning,) = flagmod.build_args({name: "<value>"}).warnings
    except (KeyError, IndexError, ValueError):
        # build_args fails on a hint with unescaped braces (tests/worker/config/test_config_docs.py
        # reports it); the page still shows the hint as written.
        return flagmod.REMOVED_FLAGS[name]
    return warning.split("; ignored: ", 1)[1]


def _removed_table() -> str:
    rows = ["| variable | instead |", "|---|---|"]
    for name in sorted(flagmod.REMOVED_FLAGS):
        rows.append(f"| `{name}` | {_cell(_removed_hint(name))} |")
    return "\n".join(rows)


def sections() -> dict[str, str]:
    version = flagmod.load_flags().vllm_version
    return {
        "worker": _worker_table(),
        "aliases": _alias_table(),
        "examples": _example_table(),
        "flags": f"vLLM {version}: {len(flagmod.load_flags().by_flag)} flags.\n\n" + _flag_table(),
        "removed": _removed_table(),
    }


def render(text: str) -> str:
    """``text`` with every generated section replaced by its current content."""
    for name, body in sections().items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        if begin not in text or end not in text:
            raise SystemExit(f"{DOC}: markers for section {name!r} are missing")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{body}\n{end}{tail}"
    return text


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    new = render(text)
    if new == text:
        return 0
    if "--check" in argv:
        print(f"stale: {DOC.relative_to(ROOT)}; run: python scripts/gen_config_docs.py")
        return 1
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
