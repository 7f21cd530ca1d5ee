"""The committed vLLM flag snapshot matches the installed vLLM, and vLLM's own parser
accepts what worker.config.flags builds. Both run vLLM's python (.venv-vllm, or $VLLM_PYTHON);
they skip only when that interpreter does not exist."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from worker.config.flags import build_args

pytestmark = pytest.mark.vllm  # imports vLLM (~10 s each): with the real-vLLM tests

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "worker" / "config" / "vllm_flags.json"
RESNAPSHOT = ".venv-vllm/bin/python scripts/snapshot_vllm_flags.py"

# One import of vLLM for both tests: the snapshot as `snapshot_vllm_flags.py --print`
# writes it, and argv (JSON on stdin) parsed the way `vllm serve` does.
READ = """
import contextlib, json, sys
sys.argv = [sys.argv[0]]  # as the script pins it: vLLM reads it at import time
with contextlib.redirect_stdout(sys.stderr):
    sys.path.insert(0, "scripts")
    from snapshot_vllm_flags import build_parser, render, snapshot
    fresh = render(snapshot())
    namespace = build_parser().parse_args(json.load(sys.stdin))
print(json.dumps({"snapshot": fresh, "namespace": vars(namespace)}, default=repr))
"""


@pytest.fixture(scope="module")
def vllm_python() -> str:
    python = Path(os.environ.get("VLLM_PYTHON") or ROOT / ".venv-vllm" / "bin" / "python")
    if not python.exists():
        pytest.skip(f"no vLLM python at {python} (run scripts/setup-env or set VLLM_PYTHON)")
    return str(python)


def _run(python: str, args: list[str], stdin: str | None = None) -> str:
    # A clean argv for vLLM; VLLM_* variables of the calling shell must not leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    done = subprocess.run(
        [python, *args], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def _env(config: Path) -> dict[str, str]:
    return {
        "MODEL_NAME": "org/model",
        "VLLM_CONFIG_FILE": str(config),
        "MAX_MODEL_LEN": "32k",
        "MAX_NUM_BATCHED_TOKENS": "16K",
        "TENSOR_PARALLEL_SIZE": "1",
        "GPU_MEMORY_UTILIZATION": "0.85",
        "ENFORCE_EAGER": "true",
        "TRUST_REMOTE_CODE": "yes",
        "DISABLE_LOG_STATS": "1",
        "ENABLE_CHUNKED_PREFILL": "off",
        "SPECULATIVE_CONFIG": '{"method": "ngram", "num_speculative_tokens": 3}',
        "HF_OVERRIDES": '{"architectures": ["X"]}',
        "SERVED_MODEL_NAME": "alpha beta",
        "CUDAGRAPH_CAPTURE_SIZES": "1 2 4",
        "MIDDLEWARE": "a.b c.d",
        "LORA_MODULES": '[{"name": "x", "path": "/l"}, "y=/m"]',
        "VLLM_EXTRA_ARGS": "--max-num-seqs 8 --port 1",
    }


@pytest.fixture(scope="module")
def vllm_reading(vllm_python: str, tmp_path_factory) -> dict:
    config = tmp_path_factory.mktemp("flags") / "vllm.yaml"
    config.write_text("max_model_len: 1024\nseed: 7\nenable-prefix-caching: false\n")
    argv = [*build_args(_env(config)).args, "--host", "127.0.0.1", "--port", "8000"]
    return json.loads(_run(vllm_python, ["-c", READ], stdin=json.dumps(argv)))


def test_snapshot_matches_installed_vllm(vllm_reading: dict) -> None:
    fresh = vllm_reading["snapshot"]
    committed = SNAPSHOT.read_text(encoding="utf-8")
    if fresh != committed:
        old, new = json.loads(committed)["flags"], json.loads(fresh)["flags"]
        changed = sorted(f for f in old.keys() | new.keys() if old.get(f) != new.get(f))
        pytest.fail(
            f"vLLM's flags changed ({len(changed)}: {', '.join(changed[:20])}); "
            f"review and rerun `{RESNAPSHOT}`"
        )


def test_vllm_parser_accepts_built_args(vllm_reading: dict) -> None:
    ns = vllm_reading["namespace"]
    expected = {
        "model": "org/model",
        "max_model_len": 32000,  # the env var beats the config file
        "seed": 7,  # from the config file
        "enable_prefix_caching": False,
        "max_num_batched_tokens": 16384,
        "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.85,
        "enforce_eager": True,
        "trust_remote_code": True,
        "disable_log_stats": True,
        "enable_chunked_prefill": False,
        "hf_overrides": {"architectures": ["X"]},
        "served_model_name": ["alpha", "beta"],
        "cudagraph_capture_sizes": [1, 2, 4],
        "middleware": ["a.b", "c.d"],
        "max_num_seqs": 8,
        "host": "127.0.0.1",
        "port": 8000,
    }
    assert {k: ns[k] for k in expected} == expected
    assert ns["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 3}
    assert [m.split(",")[0] for m in ns["lora_modules"]] == [
        "LoRAModulePath(name='x'",
        "LoRAModulePath(name='y'",
    ]
