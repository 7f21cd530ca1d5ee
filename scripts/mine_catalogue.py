"""Mine the messages that end a vLLM start from the sources of vLLM and its stack.

Reads unpacked wheels laid out as ``SRC/<project>-<version>/`` (scripts/mine_fetch.sh
fetches every release on the index -- vLLM 0.1.7 and 0.2.0 on, patch releases
included; transformers 4.33 on and huggingface_hub 0.16.4 on, the range vLLM pins --
one wheel at a time, keeping only the start-up-scope files), finds every ``raise
XError(...)`` site, every ``logger.error/critical/exception`` call, every
``logger.warning`` right before a raise or exit (a fatal warning) and every message
built for a later raise, and every ``assert`` with a message (an AssertionError), in the
start-up code of each project (vLLM: engine, config, model executor -- models, layers,
quantization, loader --, attention backends, worker, executor, platforms, distributed,
LoRA, entrypoints, multimodal, torch.compile and CUDA graph, speculative decoding and
sleep-mode allocator code; the hub, config and download code of transformers and
huggingface_hub; torch's CUDA initialisation; ray's out-of-memory and actor errors), and
turns each message into a template: implicit concatenation, f-strings, ``+``, ``%``
(also a log call's lazy ``%s`` arguments) and ``.format`` fields become ``{}``, across
lines; a message kept in a module's constant (``STR_NOT_IMPL_ENC_DEC_LORA``, or a table
of them) and raised by its name elsewhere is read where it is raised. Messages built in
native code are read from the shared library's strings (torch's CUDA allocator:
``torch/lib/libc10_cuda.so``); those printed by binaries the wheels do not ship as
libraries (ray's raylet) are listed by hand under ``manual:`` in ``assign.yaml``; the
runtimes' error strings (CUDA's and HIP's error descriptions, NCCL's result strings,
cuBLAS/cuDNN status names) are data under ``runtime:`` there.

Then it assigns categories from ``fixtures/catalogue/assign.yaml``: the first ``assign``
row whose regex matches the template (or ``generic: <reason>`` for messages
deliberately left to the generic rules); else, for a raised message, the ``modules``
table (the raising module and function -> category; a message naming a value the user
chose -> bad_config). It writes ``fixtures/catalogue/catalogue.jsonl``: one message per
line, with project, file, function, first and last version seen, exception type,
category and ``assigned_by`` (assign, module or runtime). Logged messages no ``assign``
row names, and messages outside every table, are only counted (``sources.json``).

    scripts/mine_fetch.sh /tmp/catmine   # re-runnable: releases already there are skipped
    python scripts/mine_catalogue.py /tmp/catmine/src
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
import json
import pickle
import re
import sys
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "catalogue"

# Start-up code, per project (path regexes relative to the unpacked wheel). vLLM: the
# engine, config, model executor (models, layers, quantization, loader), attention
# backends, worker, executor, platforms, distributed, LoRA (its kernels and the adapters
# --lora-modules loads at start-up), entrypoints and multimodal code, torch.compile and
# CUDA graph capture (compilation/), speculative decoding's drafters and sleep mode's
# allocator (device_allocator/), V1's loader of the logits processors a start names,
# all set up at start-up (V0 and V1 layouts). Left out:
# the request handlers of the entrypoints (serving_*, protocol, chat/tool/reasoning
# parsing: their errors answer one request, after ready). The utilities: utils.py,
# which 0.11 split into the utils/ package (argument parsing, memory, platform, system,
# import and torch helpers, the FlashInfer and DeepGEMM wrappers).
# 0.1-0.3 kept the loader and weight download in single modules (model_executor/
# model_loader.py, weight_utils.py) and served entrypoints/api_server.py.
SCOPE = {
    "vllm": r"^vllm/(?:engine/|config|model_executor/|attention/|worker/|executor/|platforms/|"
    r"distributed/|multimodal/|lora/|device_allocator/|compilation/|spec_decode/|"
    r"entrypoints/(?!.*(?:serving|protocol|chat_utils|tool_parser|tool_server|reasoning|"
    r"harmony|responses|score_utils|renderer|context))|"
    r"v1/(?:engine/|worker/|executor/|core/kv_cache_utils|attention/|spec_decode/|"
    r"sample/logits_processor)|"
    r"transformers_utils/(?:config|utils|tokenizer)|"
    r"utils/|utils\.py|envs\.py)",
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
# A module's message constant (vLLM's ``STR_NOT_IMPL_ENC_DEC_LORA = ("LoRA is ...")`` in
# vllm/utils.py), raised by its name elsewhere: messages() records the definition and the
# reference, mine() resolves the reference within the release.
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
CONSTANT_DEF, CONSTANT_REF = "=constant", "=constant:"
ASSERT = "=assert"  # an ``assert condition, message`` site (raises AssertionError)
_VERSION = re.compile(r"^(?P<project>[a-z_]+)-(?P<version>\d[\w.]*)(?<!\.part)$")


def version_key(version: str) -> tuple:
    """A release's order: its numbers, a post release's after the release it follows
    (0.6.1 < 0.6.1.post1 < 0.6.1.post2 < 0.6.2; the index holds no pre-releases here)."""
    return tuple(
        int(p) if p.isdigit() else int(p.removeprefix("post") or 0) for p in version.split(".")
    )


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
        fields = re.sub(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfgixXe]", "{}", left)
        return fields.replace("%%", "%")
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


def _log_call(node: ast.AST, levels: set[str] | frozenset[str]) -> ast.Call | None:
    """``node`` when it is ``logger.<level>(...)`` (or log./logging.) with a message."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in levels
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("logger", "log", "logging", "_logger", "LOGGER")
        and node.args
    ):
        return node
    return None


def _ends_start(stmt: ast.stmt) -> bool:
    """A statement that ends the process or the start: ``raise``, ``sys.exit()``,
    ``exit()``, ``os._exit()``."""
    if isinstance(stmt, ast.Raise):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return _call_name(stmt.value.func) in ("exit", "_exit")
    return False


def _fatal_warnings(tree: ast.AST) -> set[int]:
    """ids of ``logger.warning`` calls that a raise or exit follows in the same block:
    the warning names why the start ends."""
    fatal: set[int] = set()
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for stmt, following in itertools.pairwise(block):
                call = isinstance(stmt, ast.Expr) and _log_call(stmt.value, {"warning", "warn"})
                if call and isinstance(following, ast.stmt) and _ends_start(following):
                    fatal.add(id(call))
    return fatal


def _logged_template(call: ast.Call) -> str | None:
    """A log call's message: logging fills ``%`` fields from the further arguments."""
    text = template_of(call.args[0])
    if text is None or len(call.args) < 2:
        return text
    fields = re.sub(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfgixXe]", "{}", text)
    return fields.replace("%%", "%")


def _constant_ref(node: ast.AST) -> str | None:
    """The constant a raise names (``STR_X``, or ``TABLE["key"]`` of a table of them)."""
    if isinstance(node, ast.Name) and _CONSTANT.match(node.id):
        return node.id
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and _CONSTANT.match(node.value.id)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return f"{node.value.id}[{node.slice.value}]"
    return None


def _message_of(node: ast.AST) -> str | None:
    """The template of a message expression, or a reference to the constant it names."""
    text = template_of(node)
    if text:
        return text
    ref = _constant_ref(node)
    return CONSTANT_REF + ref if ref is not None else None


def _built_message(node: ast.AST) -> ast.AST | None:
    """The expression of a message built before it is raised, in a variable named as a
    message (``*msg``, ``*message``): assigned whole (huggingface_hub's HTTP errors), or a
    part appended to a list raised joined (vLLM's PEFTHelper:
    ``error_msg.append("vLLM does not yet support DoRA.")``, then
    ``raise ValueError(" ".join(error_msg))``: each part is a message's wording)."""
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id.lower().endswith(_MESSAGE_NAMES)
    ):
        return node.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "append"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id.lower().endswith(_MESSAGE_NAMES)
        and len(node.args) == 1
    ):
        return node.args[0]
    return None


def messages(tree: ast.AST) -> list[tuple[str, str, str]]:
    """(exception type or "logger.error", template, function) of every raise, fatal log
    call (error, critical, exception; a warning right before a raise or exit) and
    message built for a later raise. ``function``: the enclosing ``Class.function``
    (``<module>`` at top level)."""
    found: list[tuple[str, str, str]] = []
    fatal = _fatal_warnings(tree)

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = child.name if scope == "<module>" else f"{scope}.{child.name}"
                visit(child, name)
                continue
            record(child, scope)
            visit(child, scope)

    def record(node: ast.AST, scope: str) -> None:
        if isinstance(node, ast.Assert) and node.msg is not None:
            # ``assert condition, message``: raises AssertionError with the message
            if text := _message_of(node.msg):
                found.append((ASSERT, text, scope))
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            name = _call_name(node.exc.func)
            if name.endswith(("Error", "Exception", "Exit")) and (
                text := _message_of(node.exc.args[0])
            ):
                found.append((name, text, scope))
        elif call := _log_call(node, _LOG_CALLS):
            text = _logged_template(call)
            if text:
                found.append((f"logger.{_call_name(call.func)}", text, scope))
        elif id(node) in fatal and isinstance(node, ast.Call):
            text = _logged_template(node)
            if text:
                found.append(("logger.warning", text, scope))
        elif (
            scope == "<module>"
            and isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _CONSTANT.match(node.targets[0].id)
        ):
            constant = node.targets[0].id
            text = template_of(node.value)
            if text:
                found.append((CONSTANT_DEF, text, constant))
            elif isinstance(node.value, ast.Dict):  # a table of messages, by key
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and isinstance(key.value, str)
                        and (item := _message_of(value))
                    ):
                        found.append((CONSTANT_DEF, item, f"{constant}[{key.value}]"))
        elif (built := _built_message(node)) is not None and (text := template_of(built)):
            found.append(("message", text, scope))

    visit(tree, "<module>")
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


def _tree_messages(path: Path, cache: dict[str, list[tuple[str, str, str]]]):
    """messages() of one source file; a file unchanged since an earlier release is
    parsed once (keyed by its bytes)."""
    data = path.read_bytes()
    digest = hashlib.sha1(data).hexdigest()
    if digest not in cache:
        try:
            tree = ast.parse(data.decode("utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            cache[digest] = []
        else:
            cache[digest] = messages(tree)
    return cache[digest]


def _extraction_code() -> str:
    """A hash of the code that reads messages from a file (the cache's validity)."""
    functions = (
        template_of,
        _call_name,
        _log_call,
        _ends_start,
        _fatal_warnings,
        _constant_ref,
        _message_of,
        _built_message,
    )
    parts = [inspect.getsource(f) for f in (*functions, _logged_template, messages, normalise)]
    return hashlib.sha1("".join(parts).encode()).hexdigest()


def _resolved(found: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    """A release's messages with each raised constant replaced by its text (defined in
    any file of the release); the definitions themselves are not messages."""
    constants = {fn: raw for _, exc, raw, fn in found if exc == CONSTANT_DEF}

    def resolve(raw: str, depth: int = 0) -> str | None:
        if not raw.startswith(CONSTANT_REF):
            return raw
        text = constants.get(raw.removeprefix(CONSTANT_REF))
        return resolve(text, depth + 1) if text is not None and depth < 3 else None

    out = []
    for rel, exc, raw, function in found:
        if exc == CONSTANT_DEF:
            continue
        if (text := resolve(raw)) is not None:
            out.append((rel, exc, text, function))
    return out


def mine(src: Path, cache: Path | None = None) -> dict[tuple[str, str], dict]:
    """Every message of every release under ``src``. ``cache``: a pickle of the
    messages of each file (by its bytes) kept between runs."""
    entries: dict[tuple[str, str], dict] = {}
    parsed: dict[str, list[tuple[str, str, str]]] = {}
    code = _extraction_code()
    if cache is not None and cache.exists():
        stored = pickle.loads(cache.read_bytes())
        if isinstance(stored, dict) and stored.get("code") == code:
            parsed = stored["parsed"]
    trees = [d for d in src.iterdir() if _VERSION.match(d.name)]
    trees.sort(key=lambda d: (d.name.split("-")[0], version_key(d.name.rsplit("-", 1)[-1])))
    for tree_dir in trees:
        match = _VERSION.match(tree_dir.name)
        if not match or match["project"] not in SCOPE:
            continue
        project, version = match["project"], match["version"]
        scope = re.compile(SCOPE[project])
        found: list[tuple[str, str, str, str]] = []
        if project in NATIVE:
            library, wanted, exc = NATIVE[project]
            for path in sorted(tree_dir.rglob("*.so")):
                rel = path.relative_to(tree_dir).as_posix()
                if re.search(library, rel):
                    found += [(rel, exc, text, "") for text in native_messages(path, wanted)]
        for path in sorted(tree_dir.rglob("*.py")):
            rel = path.relative_to(tree_dir).as_posix()
            if not scope.search(rel):
                continue
            found += [(rel, exc, raw, fn) for exc, raw, fn in _tree_messages(path, parsed)]
        for rel, exc, raw, function in _resolved(found):
            template = normalise(raw)
            if len(template.replace("{}", "").strip()) < 12:
                continue  # nothing but fields: no wording to catalogue
            key = (project, template)
            site: dict[str, str | bool] = {"exception": exc, "file": rel, "function": function}
            if exc == ASSERT:  # an AssertionError, marked: provenance leaves it out
                site.update(exception="AssertionError", asserted=True)
            entry = entries.setdefault(
                key, {"template": template, "project": project, **site, "versions": set()}
            )
            if entry.get("asserted") and exc != ASSERT:
                # the same words raised as well as asserted: the raise site names it
                del entry["asserted"]
                entry.update(site)
            entry["versions"].add(version)
    if cache is not None:
        cache.write_bytes(pickle.dumps({"code": code, "parsed": parsed}))
    for entry in entries.values():
        seen = sorted(entry.pop("versions"), key=version_key)
        entry["first_version"], entry["last_version"] = seen[0], seen[-1]
    return entries


def _fits(row: dict, entry: dict) -> bool:
    """Whether an assign or module row's optional project / file / function /
    exception conditions hold for ``entry``."""
    return (
        row.get("project", entry["project"]) == entry["project"]
        and bool(re.search(row.get("file", ""), entry["file"]))
        and bool(re.search(row.get("function", ""), entry.get("function") or ""))
        and bool(re.search(row.get("exception", ""), entry["exception"]))
        and bool(re.search(row.get("match", ""), entry["template"]))
    )


def _categorised(entry: dict, row: dict, source: str) -> dict:
    item = dict(entry)
    if "generic" in row:
        item["category"] = None
        item["generic"] = row["generic"]
    else:
        item["category"] = row["category"]
        item["permanent"] = row["permanent"]
    item["assigned_by"] = source
    return item


def assign(entries: dict, table: list[dict], modules: list[dict] | None = None) -> list[dict]:
    """Each entry's category: the first ``assign`` row whose regex matches its template;
    else the first ``modules`` row for the module (and function) that raises it, whose
    ``user_value`` (a regex naming an option the user chose) may give another category;
    else none (not catalogued, only counted)."""
    compiled = [(re.compile(row["match"]), row) for row in table]
    module_rows = modules or []
    out = []
    for entry in entries.values():
        item = None
        for regex, row in compiled:
            if _fits(row, entry) and regex.search(entry["template"]):
                item = _categorised(entry, row, "assign")
                break
        # A logged error does not say whether the start goes on: only an assign row
        # catalogues one.
        if item is None and not entry["exception"].startswith("logger."):
            for row in module_rows:
                if not _fits(row, entry):
                    continue
                user = row.get("user_value")
                if user and re.search(user["match"], entry["template"]):
                    item = _categorised(entry, user, "module")
                else:
                    item = _categorised(entry, row, "module")
                break
        if item is not None:
            out.append(item)
    out.sort(key=lambda e: (e["project"], e["file"], e["template"]))
    return out


def runtime_entries(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """The runtimes' own error strings (``runtime:`` in assign.yaml: CUDA's and HIP's
    error descriptions, NCCL's result strings, cuBLAS/cuDNN status names), each as the
    line that prints it (``printed``, ``{}`` the string), category given with it."""
    entries = {}
    for group in rows:
        for text in group["strings"]:
            template = group["printed"].replace("{string}", text)
            category = group["category"]
            for pattern, other in group.get("categories", {}).items():
                if re.search(pattern, text):
                    category = other
            entries[(group["project"], template)] = {
                "template": template,
                "project": group["project"],
                "exception": group["exception"],
                "file": group["source"],
                "function": group.get("function", ""),
                "first_version": group.get("first_version", ""),
                "last_version": group.get("last_version", ""),
                "category": category,
                "permanent": category != "cuda_fault",
                "assigned_by": "runtime",
            }
    return entries


def reassign(data: dict) -> int:
    """``--reassign``: apply assign.yaml again to the catalogued messages (without the
    releases' sources: a message no row catalogued before stays out), in the complete
    catalogue and in the current release's (``catalogue.jsonl``), so that the two agree
    (the classifier's index drops a wording they give different categories)."""
    full, current = reassigned(data)
    _write_rows(OUT / "catalogue-full.jsonl", full)
    _write_rows(OUT / "catalogue.jsonl", current)
    print(f"{len(full)} catalogued, {len(current)} of the current release's", file=sys.stderr)
    return 0


def reassigned(data: dict) -> tuple[list[dict], list[dict]]:
    """The complete catalogue's rows and the current release's, as assign.yaml (``data``)
    assigns their messages now."""
    rows = _read_rows(OUT / "catalogue-full.jsonl")
    mined = {(r["project"], r["template"]): r for r in rows if r["assigned_by"] != "runtime"}
    keep = ("template", "project", "exception", "asserted", "file", "function", "first_version")
    entries = {k: {f: r[f] for f in (*keep, "last_version") if f in r} for k, r in mined.items()}
    full = assign(entries, data["assign"], data.get("modules"))
    full += sorted(
        runtime_entries(data.get("runtime", [])).values(),
        key=lambda e: (e["project"], e["template"]),
    )
    rows = _read_rows(OUT / "catalogue.jsonl")
    fields = ("category", "permanent", "generic")
    entries = {
        (r["project"], r["template"]): {f: v for f, v in r.items() if f not in fields} for r in rows
    }
    assigned = assign(entries, data["assign"], data.get("modules"))
    again = {(r["project"], r["template"]): r for r in assigned}
    current = []
    for row in rows:
        item = again.get((row["project"], row["template"]))
        if item is not None:  # (the current release's rows carry no assigned_by)
            item.pop("assigned_by", None)
            if item.get("category") is None:
                item.pop("permanent", None)
            current.append(item)
    return full, current


def _read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write_rows(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for item in rows:
            handle.write(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n")


def main(argv: list[str]) -> int:
    data = yaml.safe_load((OUT / "assign.yaml").read_text(encoding="utf-8"))
    if argv[:1] == ["--reassign"]:
        return reassign(data)
    src = Path(argv[0]) if argv else Path("/tmp/catmine/src")
    entries = mine(src, src.parent / "messages.pickle")
    # Messages printed by native binaries the miner does not read, copied by hand.
    for item in data.get("manual", []):
        entries[(item["project"], item["template"])] = dict(item)
    catalogue = assign(entries, data["assign"], data.get("modules"))
    catalogue += sorted(
        runtime_entries(data.get("runtime", [])).values(),
        key=lambda e: (e["project"], e["template"]),
    )
    versions = defaultdict(set)
    for tree_dir in src.iterdir():
        match = _VERSION.match(tree_dir.name)
        if match and match["project"] in SCOPE:
            versions[match["project"]].add(match["version"])
    with (OUT / "catalogue-full.jsonl").open("w", encoding="utf-8") as handle:
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
