"""Mine the messages that end a vLLM start from the sources of vLLM and its stack.

Reads unpacked wheels (``pip download --no-deps --only-binary=:all: vllm==X``, then
``unzip '*.py'``) laid out as ``SRC/<project>-<version>/``, finds ``raise XError(...)``
sites and ``logger.error/critical/exception`` calls in the start-up code of each project
(engine, config, model loader, worker, executor, platform and entrypoint code of vLLM;
the hub, config and download code of transformers and huggingface_hub; torch's CUDA
initialisation; ray's out-of-memory and actor errors), and turns each message into a
template: f-string fields, ``.format`` and ``%`` fields become ``{}``. Messages built in
native code are read from the shared library's strings (torch's CUDA allocator:
``torch/lib/libc10_cuda.so``); those printed by binaries the wheels do not ship as
libraries (ray's raylet) are listed by hand under ``manual:`` in ``assign.yaml``.

Wheels: ``pip download --no-deps --only-binary=:all: --platform manylinux1_x86_64
--python-version 3.10 vllm==X -d DIR`` (3.12 for the abi3 wheels of newer releases),
then ``unzip -o DIR/*.whl '*.py' -d SRC/vllm-X`` (and ``'torch/lib/libc10_cuda.so'``
for torch).

Then it assigns categories from ``fixtures/catalogue/assign.yaml`` (data: a regex over
the template -> a category, or ``generic: <reason>`` for messages deliberately left to
the generic rules) and writes ``fixtures/catalogue/catalogue.jsonl``: one start-up
failure message per line, with project, file, first and last version seen, exception
type and category. Messages no assignment names are not start-up failures of interest
and are only counted.

    python scripts/mine_catalogue.py /tmp/vllm-src/src
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "catalogue"

# Start-up code, per project (path regexes relative to the unpacked wheel).
SCOPE = {
    # 0.1-0.3 kept the loader and weight download in single modules
    # (model_executor/model_loader.py, weight_utils.py) and served entrypoints/api_server.py.
    "vllm": r"^vllm/(?:engine/|config|model_executor/(?:model_loader[/.]|weight_utils)|"
    r"model_executor/models/(?:registry|__init__)|worker/|executor/|platforms/|"
    r"entrypoints/(?:api_server|openai/api_server|"
    r"openai/cli_args|cli/serve|llm|utils)|v1/(?:engine/|worker/(?:gpu_worker|worker_base)|"
    r"executor/|core/kv_cache_utils)|transformers_utils/(?:config|utils|tokenizer)|"
    r"distributed/(?:parallel_state|device_communicators/(?:shm_broadcast|pynccl))|"
    r"utils/__init__|utils\.py|envs\.py)",
    "transformers": r"^transformers/(?:configuration_utils|modeling_rope_utils|"
    r"tokenization_utils_base|"
    r"dynamic_module_utils|models/auto/(?:configuration_auto|auto_factory|tokenization_auto)|utils/hub|"
    r"models/llama/configuration_llama)",
    "huggingface_hub": r"^huggingface_hub/(?:errors|utils/_errors|utils/_http|file_download|"
    r"_snapshot_download|utils/_validators|hf_api)",
    "torch": r"^torch/cuda/(?:__init__|memory)\.py",
    "ray": r"^ray/(?:exceptions|_private/memory_monitor)\.py",
}
# Messages built in native code: (library path regex, string regex, exception type).
NATIVE = {
    "torch": (r"^torch/lib/libc10_cuda\.so$", rb"out of memory", "torch.OutOfMemoryError"),
}
_PRINTABLE = re.compile(rb"[\x20-\x7e]{12,}")
_LOG_CALLS = {"error", "critical", "exception", "fatal"}
_MESSAGE_NAMES = ("message", "msg")  # names (any case) a message is built in
_VERSION = re.compile(r"^(?P<project>[a-z_]+)-(?P<version>\d[\w.]*)$")


def version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.]", version))


def template_of(node: ast.AST) -> str | None:
    """The message of a string expression, with its fields as ``{}``; None if none."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value).replace("{", "{{").replace("}", "}}"))
            else:
                parts.append("{}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template_of(node.left), template_of(node.right)
        if left is None and right is None:
            return None
        return (left or "{}") + (right or "{}")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = template_of(node.left)
        if left is None:
            return None
        return re.sub(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfgixXe]", "{}", left)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        base = template_of(node.func.value)
        if base is None:
            return None
        return re.sub(r"\{\{[^{}]*\}\}", "{}", base)
    return None


def _call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def messages(tree: ast.AST) -> list[tuple[str, str]]:
    """(exception type or "logger.error", template) of every raise / fatal log call."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            name = _call_name(node.exc.func)
            if name.endswith(("Error", "Exception", "Exit")):
                text = template_of(node.exc.args[0])
                if text:
                    found.append((name, text))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _LOG_CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("logger", "log", "logging")
            and node.args
        ):
            text = template_of(node.args[0])
            if text:
                found.append((f"logger.{node.func.attr}", text))
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.lower().endswith(_MESSAGE_NAMES)
        ):
            # A message built first and raised later (huggingface_hub's HTTP errors).
            text = template_of(node.value)
            if text:
                found.append(("message", text))
    return found


def normalise(text: str) -> str:
    """One line, literal braces restored, runs of placeholders and spaces merged."""
    text = " ".join(text.split())
    text = re.sub(r"(?:\{\})+", "{}", text)
    return text.replace("{{", "{").replace("}}", "}")


def native_messages(path: Path, wanted: bytes) -> list[str]:
    """Printable strings of a shared library that hold ``wanted``, as templates: a
    message that a C++ stream continues (trailing or leading space) gets a field there."""
    found = []
    for match in _PRINTABLE.finditer(path.read_bytes()):
        text = match.group().decode("ascii")
        if re.search(wanted.decode(), text):
            template = ("{} " if text.startswith(" ") else "") + text.strip()
            found.append(template + (" {}" if text.endswith(" ") else ""))
    return found


def mine(src: Path) -> dict[tuple[str, str], dict]:
    entries: dict[tuple[str, str], dict] = {}
    versions: dict[str, list[str]] = defaultdict(list)
    for tree_dir in sorted(src.iterdir()):
        match = _VERSION.match(tree_dir.name)
        if not match or match["project"] not in SCOPE:
            continue
        project, version = match["project"], match["version"]
        versions[project].append(version)
        scope = re.compile(SCOPE[project])
        found: list[tuple[str, str, str]] = []
        if project in NATIVE:
            library, wanted, exc = NATIVE[project]
            for path in sorted(tree_dir.rglob("*.so")):
                rel = path.relative_to(tree_dir).as_posix()
                if re.search(library, rel):
                    found += [(rel, exc, text) for text in native_messages(path, wanted)]
        for path in sorted(tree_dir.rglob("*.py")):
            rel = path.relative_to(tree_dir).as_posix()
            if not scope.search(rel):
                continue
            try:
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                continue
            found += [(rel, exc, raw) for exc, raw in messages(tree)]
        for rel, exc, raw in found:
            template = normalise(raw)
            if len(template.replace("{}", "").strip()) < 12:
                continue  # nothing but fields: no wording to catalogue
            key = (project, template)
            entry = entries.setdefault(
                key,
                {
                    "template": template,
                    "project": project,
                    "exception": exc,
                    "file": rel,
                    "versions": set(),
                },
            )
            entry["versions"].add(version)
    for entry in entries.values():
        seen = sorted(entry.pop("versions"), key=version_key)
        entry["first_version"], entry["last_version"] = seen[0], seen[-1]
    return entries


def assign(entries: dict, table: list[dict]) -> list[dict]:
    compiled = [(re.compile(row["match"]), row) for row in table]
    out = []
    for entry in entries.values():
        for regex, row in compiled:
            if row.get("project", entry["project"]) != entry["project"]:
                continue
            if not re.search(row.get("file", ""), entry["file"]):
                continue
            if not re.search(row.get("exception", ""), entry["exception"]):
                continue
            if regex.search(entry["template"]):
                item = dict(entry)
                if "generic" in row:
                    item["category"] = None
                    item["generic"] = row["generic"]
                else:
                    item["category"] = row["category"]
                    item["permanent"] = row["permanent"]
                out.append(item)
                break
    out.sort(key=lambda e: (e["project"], e["file"], e["template"]))
    return out


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else Path("/tmp/vllm-src/src")
    data = yaml.safe_load((OUT / "assign.yaml").read_text(encoding="utf-8"))
    table = data["assign"]
    entries = mine(src)
    # Messages printed by native binaries the miner does not read, copied by hand.
    for item in data.get("manual", []):
        entries[(item["project"], item["template"])] = dict(item)
    catalogue = assign(entries, table)
    versions = defaultdict(set)
    for tree_dir in src.iterdir():
        match = _VERSION.match(tree_dir.name)
        if match and match["project"] in SCOPE:
            versions[match["project"]].add(match["version"])
    with (OUT / "catalogue.jsonl").open("w", encoding="utf-8") as handle:
        for item in catalogue:
            handle.write(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n")
    sources = {p: sorted(v, key=version_key) for p, v in sorted(versions.items())}
    (OUT / "sources.json").write_text(
        json.dumps({"releases": sources, "mined": len(entries)}, indent=1) + "\n",
        encoding="utf-8",
    )
    print(f"{len(entries)} messages mined, {len(catalogue)} catalogued", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
