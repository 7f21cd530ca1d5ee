"""Meta-tests of the shipped rule pack: every rule is backed by real logs, and rules
that compete are kept apart by near-miss fixtures."""

from __future__ import annotations

import re
import string
from functools import cache

import pytest

from diagnostics.classify.classifier import _hit_ids
from diagnostics.classify.normalize import normalize
from diagnostics.scanning.scan import classify_stream
from tests.diagnostics.cases import FIXTURES, labelled
from tests.support.packs import shipped_pack

PACK = shipped_pack()


@cache
def _normalized(path) -> tuple[str, ...]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return tuple(normalize(line) for line in text.splitlines())


@cache
def _rules_matched() -> dict[str, frozenset[int]]:
    """Fixture -> the rules (indexes) with a pattern that matches one of its lines: the
    pack's Hyperscan database finds the candidates, each rule's RE2 pattern confirms."""
    found = {}
    for path, _ in labelled():
        owners: set[int] = set()
        for line in _normalized(path):
            for i in _hit_ids(PACK, line):
                pattern = PACK.patterns[i]
                fresh = pattern.kind == "rule" and pattern.owner not in owners
                if fresh and pattern.regex.search(line):
                    owners.add(pattern.owner)
        found[str(path.relative_to(FIXTURES))] = frozenset(owners)
    return found


def _fixtures_matching(rule) -> list[str]:
    index = PACK.rules.index(rule)
    return [name for name, owners in _rules_matched().items() if index in owners]


# Rules written from the code and the platform alone, for failures no real log here
# shows (the corpus has no native-Windows start): each is backed by the built cases of
# the principle it states instead, which must give its verdict.
WITHOUT_A_REAL_LOG = {
    # a lock file another user's start left in the shared /tmp (held-out AIW, stop 63)
    "temp-lock-of-another-user": "test_wordings.WORDINGS",
    # the Xet storage's own refusal, a hub answer that is not JSON, requests without
    # PySocks (held-out AHS, stop 62)
    "xet-storage-refused": "test_wordings.WORDINGS",
    "hub-answer-not-json": "test_wordings.WORDINGS",
    "socks-support-missing": "test_wordings.WORDINGS",
    # a GPU newer than the image's CUDA build (reconstructed logs, writers 25 to 7; held-out
    # AHM, stop 62), and the tokenizers library older than the model's tokenizer.json
    # (reconstructed logs, writers 16 to 1; held-out AHE, AHI, stop 62)
    "gpu-newer-than-image": "test_wordings.WORDINGS",
    "torch-build-older-than-gpu": "test_wordings.WORDINGS",
    "tokenizers-too-old-for-the-file": "test_wordings.WORDINGS",
    # vLLM's safetensors lookup logged at ERROR and gone on from (held-out AHE, stop 62;
    # reconstructed logs only): its built cases in test_went_on.py too
    "safetensors-lookup-notice": "test_wordings.WORDINGS",
    # a hub repo in Mistral's format loaded by the tokenizer the Hugging Face way
    # (reconstructed CS, held-out AHE, stop 62)
    "tokenizer-format-not-read": "test_wordings.WORDINGS",
    # Python's multiprocessing: a spawned child re-ran a program without a main guard
    # (held-out AEG, stop 59)
    "main-module-not-guarded": "test_wordings.WORDINGS",
    # vLLM could not read the --config YAML file (held-out ADR, stop 59)
    "options-file-unreadable": "test_wordings.WORDINGS",
    # Ctrl-C inside a collective between the GPUs (held-out AEJ, stop 60)
    "interrupted-in-collective": "test_wordings.WORDINGS",
    # Kubernetes' scheduler finding no node, and the node lost under the start
    # (held-out AGQ, stop 61)
    "pod-not-scheduled": "test_wordings.WORDINGS",
    "pod-evicted": "test_wordings.WORDINGS",
    "node-lost": "test_wordings.WORDINGS",
    # the model folder's own config.json does not parse (held-out AEZ, stop 60)
    "model-config-not-json": "test_wordings.WORDINGS",
    "logging-config-unreadable": "test_wordings.WORDINGS",
    # a crash inside NCCL as faulthandler's and gdb's stacks show it (held-out ACW, stop 58)
    "nccl-crashed": "test_wordings.WORDINGS",
    # Ray's head already running on its port (held-out YL, stop 55)
    "ray-already-running": "test_wordings.WORDINGS",
    # Slurm's cancellation of the job running vLLM (held-out YA, stop 55)
    "job-cancelled-by-scheduler": "test_wordings.WORDINGS",
    # the container runtime's report of an image it could not get, with the registry's
    # reason or without it (held-out YH, stop 55)
    "image-not-found": "test_wordings.WORDINGS",
    "image-pull-failed": "test_wordings.WORDINGS",
    # the shell's report of the start script's own error (held-out WT, stop 54)
    "start-script-error": "test_wordings.WORDINGS",
    # a repository's tokenizer code broken by a newer transformers (held-out WS, stop 54;
    # 193 reconstructed logs, whose frames provenance read before)
    "remote-code-tokenizer-broken": "test_wordings.WORDINGS",
    # the sharded-state loader's message on an ordinary checkpoint (held-out WN, stop 54)
    "sharded-state-without-its-shards": "test_wordings.WORDINGS",
    # xFormers' not_supported_reasons (fmha/common.py) on a GPU below its kernels'
    # capability (held-out VG, stop 53)
    "xformers-gpu-too-old": "test_wordings.WORDINGS",
    # a bare KeyError on a model type, as transformers' CONFIG_MAPPING raises it
    "model-key-unknown": "test_wordings.WORDINGS",
    # vllm/reasoning and the tool parsers' constructors (held-out KQ)
    "parser-does-not-fit-model": "test_wordings.WORDINGS",
    # mount.nfs, systemd's mount units, the kubelet's FailedMount (held-out KG)
    "storage-mount-failed": "test_wordings.WORDINGS",
    # docker inspect -f '{{.State.OOMKilled}}' (held-out KB)
    "container-oom-killed-asked": "test_wordings.WORDINGS",
    # Gloo's tcp transport (unbound_buffer.cc) timing out (held-out KC)
    "gloo-collective-timeout": "test_wordings.WORDINGS",
    # torch's ProcessGroupGloo across hosts (held-out FF, KW)
    "gloo-connect-failed": "test_wordings.WORDINGS",
    # the corpus's vllm-3329 is its one line without the arguments (held-out JL)
    "load-format-without-its-weights": "test_wordings.WORDINGS",
    # transformers' dynamic-modules cache written by two processes (dynamic_module_utils
    # create_dynamic_module; held-out JS)
    "modules-cache-changed": "test_wordings.WORDINGS",
    # gguf's reader on a cut file (gguf/gguf_reader.py _build_tensors; held-out JL)
    "gguf-file-truncated": "test_wordings.WORDINGS",
    # ModelScope's client (modelscope/hub/errors.py), botocore's error wordings and
    # requests'/httpx's URL checks, written from their code (held-out set GA, stop 41)
    "modelscope-answer": "test_wordings.WORDINGS",
    "modelscope-access-refused": "test_wordings.WORDINGS",
    "storage-access-refused": "test_wordings.WORDINGS",
    "storage-not-found": "test_wordings.WORDINGS",
    "storage-unreachable": "test_wordings.WORDINGS",
    "endpoint-url-invalid": "test_wordings.WORDINGS",
    # transformers' check_imports (dynamic_module_utils), read as the repository's code
    # that cannot load since stop 41 (the reconstructed sets hold many; no real log)
    "remote-code-package-missing": "test_wordings.WORDINGS",
    # vLLM's plugin loader (vllm/plugins/__init__.py), written from its code (GS)
    "unregistered-after-plugin-failure": "test_wordings.WORDINGS",
    "vllm-without-gpu-platform": "test_principles.PLATFORM",
    "vllm-build-without-platform-ops": "test_principles.PLATFORM",
    "cpu-instruction-set-requirement": "test_principles.PLATFORM",
    "vllm-on-windows": "test_principles.PLATFORM",
    "option-file-unusable": "test_principles.CHOSEN_VALUE",
    # vLLM 0.32 (the one recorded here) imports model code in the subprocess it inspects
    # with, and the corpus's inspection failures name their cause first
    "architecture-inspection-failed": "test_principles.INSPECTION",
    # the rendezvous's words when the store's process died (a Ray paste of stop 34's
    # final set, not a real log)
    "nccl-rendezvous-peer-gone": "test_selection.CONSEQUENCES",
    # torch's own warning (torch/cuda/__init__.py) and Kubernetes' events: written from
    # their code, for pastes that keep only that line (the held-out sets' shapes)
    "torch-build-lacks-gpu": "test_selection.CONSEQUENCES",
    "killed-by-liveness-probe": "test_selection.CONSEQUENCES",
    # vLLM's platform detection (vllm/platforms/__init__.py) and xFormers' import check
    "no-platform-detected": "test_selection.CONSEQUENCES",
    "xformers-built-for-another-torch": "test_selection.CONSEQUENCES",
    # vLLM 0.4's wait for its placement group (ray_utils.initialize_ray_cluster)
    "placement-group-timed-out": "test_wordings.WORDINGS",
    # uvicorn's TLS set-up (its create_ssl_context), written from its code
    "tls-files-unusable": "test_wordings.WORDINGS",
    # Kubernetes' service links (its documented env var form), written from the platform
    "kubernetes-service-env": "test_wordings.WORDINGS",
    # a transformers class missing from an older transformers (the real corpus's one such
    # log names a repository's own class)
    "tokenizer-class-newer-than-transformers": "test_wordings.WORDINGS",
    # transformers' wrapper (its hub code), the status under it deciding
    "hub-connection-error-wrapper": "test_wordings.WORDINGS",
    # torch's context creation (cudaSetDevice) out of memory: others hold the GPU
    "cuda-oom-creating-context": "test_wordings.WORDINGS",
    # a model repository's code written for another transformers or torch (its import of
    # a name the image's version lacks), written from transformers' module loader
    "remote-code-incompatible": "test_wordings.WORDINGS",
    # CUDA's teardown error (cudaErrorCudartUnloading) as a worker exits, written from
    # CUDA's error strings and Ray's C++ logger (held-out set BX)
    "cuda-driver-shutting-down": "test_selection.CONSEQUENCES",
    # Ray's client without a cluster (ray/_private/worker.py's init), held-out set CC
    "ray-cluster-unreachable": "test_wordings.WORDINGS",
    # transformers' cached_file for a code file auto_map names (held-out set CD)
    "remote-code-file-missing": "test_wordings.WORDINGS",
    # SIGBUS (128 + 7) as runners report an exit, and the shell's "Bus error": written
    # from the signal's number and the runners' words (held-out set EV, /dev/shm)
    "process-sigbus": "test_wordings.WORDINGS",
    # a temporary status without the hub's URL (held-out set EQ: a web UI's proxy):
    # the real logs' statuses name the hub, which hub-unreachable reads
    "http-status-temporary": "test_wordings.WORDINGS",
    # uvicorn's bind error (its startup) for an address or port the setting cannot use,
    # and a Git LFS pointer read as weights: written from their code (held-out set IF)
    "bind-address-not-usable": "test_wordings.WORDINGS",
    "weights-are-lfs-pointers": "test_wordings.WORDINGS",
    # torch's abort of a rank's NCCL communicator (ProcessGroupNCCL), a consequence, and
    # Ray's head losing a node (worker.py's heartbeat warning, ActorDiedError's reason):
    # written from their code (held-out sets OT, OU)
    "nccl-communicator-aborted": "test_selection.CONSEQUENCES",
    "ray-node-lost": "test_wordings.WORDINGS",
    # huggingface_hub's warning of a short disk before a download (its file_download.py's
    # _check_disk_space), written from its code (held-out set QA)
    "hub-disk-space-short": "test_wordings.WORDINGS",
    # the hub's "Invalid username or password." after a token was sent: the token refused
    # (huggingface_hub: 401 only to a request without a valid token; held-out RF)
    "hub-token-refused": "test_wordings.WORDINGS",
    # vLLM's setup.py on another system than Linux (held-out RG)
    "vllm-linux-only": "test_wordings.WORDINGS",
    # pip's last retry of its index failing on the connection (held-out RG)
    "package-index-unreachable": "test_wordings.WORDINGS",
    # NVSHMEM's own error lines (its source paths) and its init's end, as DeepEP's
    # expert-parallel kernels print them (held-out set QY)
    "nvshmem-failure": "test_wordings.WORDINGS",
    # the raylet's summary counting no memory kill (node_manager.cc; held-out set IH)
    "ray-workers-crashed-not-oom": "test_wordings.WORDINGS",
    # vLLM's Ray executor's wait report (ray_utils.py), a start stuck on it (set IF)
    "placement-group-never-ready": "test_wordings.WORDINGS",
    # vLLM's own wordings of options that do not go together (config.py, the BnB
    # loader): held-out sets' logs only (AI, GI, BB)
    "options-not-supported-together": "test_wordings.WORDINGS",
    # vLLM's engine timeout (v1/engine/utils.py) and huggingface_hub's progress bar
    # stalled: written from their code (held-out set IT)
    "engine-start-timed-out": "test_wordings.WORDINGS",
    "hub-download-stalled": "test_wordings.WORDINGS",
    # torch.distributed's, Gloo's and vLLM's socket words (held-out set JM)
    "distributed-setting-unusable": "test_wordings.WORDINGS",
    "server-socket-address-not-usable": "test_wordings.WORDINGS",
    # the API server's port: out of range, or below 1024 for a user not root (held-out ALH)
    "server-port-out-of-range": "test_wordings.WORDINGS",
    "server-port-privileged": "test_wordings.WORDINGS",
    # the program that runs vLLM (held-out ALP)
    "event-loop-already-running": "test_wordings.WORDINGS",
    "start-object-not-picklable": "test_wordings.WORDINGS",
    # a CUTLASS kernel the image was built without, for a GPU newer than it (held-out ALX)
    "kernel-not-built-for-newer-gpu": "test_wordings.WORDINGS",
    # a setting read from the environment that is not a number (held-out ALY)
    "environment-value-not-a-number": "test_wordings.WORDINGS",
    # HF_TOKEN holding a newline: the client refuses its header (held-out AME)
    "hub-token-malformed": "test_wordings.WORDINGS",
    # runners' and shells' reports of a command's exit, written from their words (make,
    # just, CI steps, srun, GNU time; $?, $status, $LASTEXITCODE): held-out set NB
    "runner-exit-sigkill": "test_wordings.WORDINGS",
    "runner-exit-status": "test_wordings.WORDINGS",
    "shell-exit-status": "test_wordings.WORDINGS",
    # torch's c10d store (its socket.cpp warning), held-out set NU
    "rendezvous-bind-warning": "test_wordings.WORDINGS",
    # an attribute a tokenizer class lacks, the exception line alone (held-out AMV,
    # AMX; the real logs' lines read with the sign that the repository's code ran)
    "tokenizer-of-the-libraries-lacks-attribute": "test_wordings.WORDINGS",
    "remote-tokenizer-lacks-attribute": "test_wordings.WORDINGS",
    # numpy's warning of an extension built against NumPy 1.x (held-out ANA and earlier
    # writers' logs; the real logs reach its import error only)
    "numpy-abi-mismatch": "test_wordings.WORDINGS",
}


@cache
def _built_rules() -> frozenset[str]:
    """The rules that give the verdicts of the principles' built cases (the finding's
    rule: a catalogued message names its verdict after the catalogue)."""
    from diagnostics import Classifier, classify_lines
    from tests.diagnostics.test_principles import CHOSEN_VALUE, INSPECTION, PLATFORM, verdict

    given = {classify_lines(lines).rule for lines, _, _ in PLATFORM}
    from tests.diagnostics.classify.test_selection import CONSEQUENCES

    given |= {classify_lines(lines).rule for lines in CONSEQUENCES.values()}
    for lines, _, _ in INSPECTION:
        best = Classifier(PACK).feed_all(lines).findings.best
        given |= {best.rule.id} if best is not None else set()
    from tests.diagnostics.test_wordings import WORDINGS

    given |= {classify_lines(lines).rule for lines, _, _ in WORDINGS}
    return frozenset(given | {verdict(line).rule for line in CHOSEN_VALUE})


@pytest.mark.parametrize("rule", PACK.rules, ids=[r.id for r in PACK.rules])
def test_every_rule_matches_a_real_fixture(rule):
    if rule.id in WITHOUT_A_REAL_LOG:
        assert rule.id in _built_rules(), (
            f"{rule.id}: no built case of {WITHOUT_A_REAL_LOG[rule.id]}"
        )
        return
    assert _fixtures_matching(rule), f"rule {rule.id} matches no fixture under fixtures/"


def test_rule_permanence_follows_category():
    # Category other follows the image (permanent) or the host (transient); an oom rule
    # is transient only where its `when` places the failure (memory others hold).
    for rule in PACK.rules:
        held = str(rule.category) == "oom" and bool(rule.traceback_through or rule.after)
        assert rule.permanent is rule.category.permanent or str(rule.category) == "other" or held


def test_generic_rules_come_last():
    generic = [r.priority for r in PACK.rules if r.generic]
    specific = [r.priority for r in PACK.rules if not r.generic]
    assert generic and max(specific) < min(generic)


# (fixture, rule that also matches lines in it but must not decide it, rule that must)
NEAR_MISSES = [
    # ENOSPC raised while model code loads weights: disk-full, not a model-code error.
    ("vllm-0.32/disk-full-download.log", "model-code-error", "hub-disk-space-short"),
    # The hub answers 401 for a missing repo; "Repository Not Found" follows.
    (
        "corpus/model_not_found/guardkit-ngc2601-v013-qwen25-14b-fp8-repo-does-not-exist.log",
        "hub-access-refused",
        "repo-not-found",
    ),
    # OOM while profiling is oom even though a CUDA error wrapper follows.
    (
        "corpus/oom/vllm-188-wsl2-3090-opt125m-cpu-swap-pinned-oom.log",
        "gpu-runtime-fault",
        "cuda-oom",
    ),
    # The architecture error beats the generic pydantic/ValueError rules.
    (
        "corpus/model_requirement/vllm-11155-codeshell-arch-not-supported-api-server.log",
        "unhandled-exception",
        "architecture-not-supported",
    ),
    # A requirement stated in model code is permanent; other model-code errors are not
    # (the catalogue knows this one's wording and where vLLM raises it).
    (
        "corpus/model_requirement/vllm-16474-v083-rocm-mi300x-llama4-fp8-moe-per-channel-unsupported.log",
        "model-code-error",
        "catalogued-model-requirement",
    ),
    # The root cause beats the engine wrappers printed after it.
    (
        "corpus/kv_cache/vllm-17431-v085-a800-qwen3-8b-v1-util04-no-cache-blocks.log",
        "engine-wrapper",
        "kv-cache-no-memory",
    ),
    # An NCCL failure after a harmless warning-level line is a fault, not a config error.
    (
        "corpus/cuda_fault/vllm-4383-v041-docker-tp2-3090-nccl-shm-too-small.log",
        "unhandled-exception",
        "nccl-failure",
    ),
    # A process killed with -9 is the OOM killer's signature; the wrappers and the broken
    # pipe the orphaned worker prints afterwards do not decide.
    ("vllm-0.32/engine-core-killed.log", "engine-wrapper", "process-sigkilled"),
    ("vllm-0.32/engine-core-killed.log", "unhandled-exception", "process-sigkilled"),
    # A bare "Killed" from the shell after a named cause is not taken for the OOM killer.
    (
        "corpus/kv_cache/vllm-15004-v073-wsl-3070-cpu-offload-no-cache-blocks.log",
        "process-killed",
        "kv-cache-no-memory",
    ),
    # An unreachable hub is named as such, not as the cache miss that follows it.
    ("vllm-0.32/hub-unreachable.log", "hub-offline-cache-miss", "hub-connection-refused"),
]


@pytest.mark.parametrize(("fixture", "loser", "winner"), NEAR_MISSES)
def test_near_miss(fixture, loser, winner):
    path = FIXTURES / fixture
    assert any(rx.search(line) for rx in PACK.by_id(loser).patterns for line in _normalized(path))
    with path.open("rb") as stream:
        assert classify_stream(stream, PACK).rule == winner


_DOUBLED = re.compile(r"\b(\w+(?: \w+)?) \1\b", re.IGNORECASE)


@pytest.mark.parametrize("rule", PACK.rules, ids=[r.id for r in PACK.rules])
def test_every_answer_reads_as_a_sentence_with_only_its_defaults(rule):
    """A cause or fix whose captures are missing from the log is filled from the rule's
    defaults: it must still read ("The model the model was not found" did not)."""
    texts = [rule.cause, rule.fix]
    if rule.transient_if is not None:
        texts += [rule.transient_if.cause, rule.transient_if.fix]
    for text in texts:
        names = {name for _, name, _, _ in string.Formatter().parse(text) if name}
        filled = " ".join(text.format(**{n: rule.defaults.get(n, f"<{n}>") for n in names}).split())
        doubled = _DOUBLED.search(filled)
        assert doubled is None, f"{rule.id}: {doubled.group(0)!r} in {filled!r}"
