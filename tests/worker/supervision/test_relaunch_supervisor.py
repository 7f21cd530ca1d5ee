"""Relaunches driven end to end through the supervisor with a stand-in vLLM
(tests/support/relaunch_vllm.py) that replays real vLLM lines (fixtures/) on each start:
out of memory after the weights loaded, a vanished revision, a full compile-cache volume,
MAX_MODEL_LEN=auto on a vLLM without auto, the limit of two and the crash-loop breaker
counting each relaunch. Each test takes a second or two."""

from __future__ import annotations

import io
import json
import shlex
import tempfile
from pathlib import Path

import pytest

from diagnostics import State
from tests.support.packs import shipped_pack
from tests.support.supervising import FAST, settle, stop
from tests.support.vllm_env import ROOT, free_port, stand_in_argv
from worker.config.settings import load_settings
from worker.crashloop.breaker import LEDGER_NAME
from worker.preflight import PreflightResult
from worker.supervision import relaunch_apply as relaunch
from worker.supervision.supervisor import Supervisor

PACK = shipped_pack()
FIXTURES = ROOT / "fixtures"
_OOM_LOG = FIXTURES / "corpus/oom/vllm-19964-ci-bnb-embedding-cudagraph-capture-oom.log"
_KV_LOG = FIXTURES / "vllm-0.32/kv-cache-below-max-len.log"
_OK_LOG = FIXTURES / "vllm-0.32/startup-ok.log"


def _line(path: Path, text: str) -> str:
    """The first line of the real log ``path`` that shows ``text``."""
    lines = path.read_text(encoding="utf-8").split("\n")
    return next(line for line in lines if text in line)


# Real lines: weights loaded, then CUDA out of memory capturing CUDA graphs (vLLM #19964).
WEIGHTS_LOADED = _line(_OOM_LOG, "Model loading took")
GRAPH_OOM = _line(_OOM_LOG, "torch.OutOfMemoryError: CUDA out of memory")
LOADING = _line(_OK_LOG, "Starting to load model")  # vLLM 0.32
KV_SHORTFALL = _line(_KV_LOG, "the estimated maximum model length is 768")
# huggingface_hub / transformers' own wording (fixtures/catalogue) for a vanished revision.
REVISION_GONE = (
    "OSError: v2-preview is not a valid git identifier (branch name, tag name or commit id) "
    "that exists for this model name. Check the model page at "
    "'https://huggingface.co/stand-in/model' for available revisions."
)
OOM_START = {"say": [LOADING, WEIGHTS_LOADED, GRAPH_OOM], "then": "exit:1"}
SERVE = {"say": [LOADING], "then": "serve"}
PLAN = {"weights_gib": 3.91, "weights_fit": True, "kv_cache_tokens": 976, "max_model_len_fit": 976}


def _disk_full(volume: Path) -> dict:
    cache = volume / "vllm-cache" / "torch_compile_cache" / "abc" / "rank_0_0"
    line = f"OSError: [Errno 28] No space left on device: '{cache}/inductor_cache.bin'"
    return {"say": [LOADING, WEIGHTS_LOADED, line], "then": "exit:1"}


def _supervisor(tmp_path: Path, steps: list[dict], **extra: str) -> Supervisor:
    volume = tmp_path / "volume"
    volume.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    command = stand_in_argv("relaunch_vllm", str(script))
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "MODEL_NAME": "stand-in/model",
        "VLLM_COMMAND": shlex.join(command),
        "VLLM_PORT": str(free_port()),
        "BASE_PATH": str(volume),
        "HF_HUB_OFFLINE": "1",
        "VLLM_SHUTDOWN_GRACE": "2",
        **extra,
    }

    def preflight(_env):
        return PreflightResult(None, plan=dict(PLAN))

    return Supervisor(
        load_settings(env), PACK, env, passthrough=io.BytesIO(), timing=FAST, preflight=preflight
    )


def _starts(tmp_path: Path) -> list[dict]:
    text = (tmp_path / "script.json.starts").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "volume" / LEDGER_NAME
    data = json.loads(path.read_text()) if path.exists() else {}
    return [entry["category"] for entries in data.values() for entry in entries]


def test_out_of_memory_capturing_graphs_relaunches_eager_with_a_smaller_batch(tmp_path):
    supervisor = _supervisor(tmp_path, [OOM_START, SERVE])
    assert settle(supervisor) is State.READY
    first, second = _starts(tmp_path)
    assert "--enforce-eager" not in first["args"]
    assert "--enforce-eager" in second["args"]
    assert second["args"][second["args"].index("--max-num-batched-tokens") + 1] == "8192"
    info = supervisor.start_info()
    assert [r["kind"] for r in info["relaunches"]] == ["relax"]
    assert info["max_model_len"] == 2048 and info["estimate"]["weights_fit"] is True
    stop(supervisor)


def test_what_the_user_set_is_kept_and_auto_relax_false_turns_it_off(tmp_path):
    supervisor = _supervisor(tmp_path, [OOM_START, SERVE], ENFORCE_EAGER="false")
    assert settle(supervisor) is State.READY
    second = _starts(tmp_path)[1]["args"]
    assert "--no-enforce-eager" in second and "--enforce-eager" not in second
    assert "--max-num-batched-tokens" in second
    stop(supervisor)

    off = tmp_path / "off"
    off.mkdir()
    supervisor = _supervisor(off, [OOM_START, SERVE], AUTO_RELAX="false")
    assert settle(supervisor) is State.FAILED_PERMANENT
    assert supervisor.diagnosis is not None and supervisor.diagnosis.rule == "cuda-oom-allocate"
    assert len(_starts(off)) == 1
    stop(supervisor)


def test_a_vanished_revision_relaunches_on_the_default_branch(tmp_path):
    gone = {"say": [REVISION_GONE], "then": "exit:1"}
    supervisor = _supervisor(tmp_path, [gone, SERVE], MODEL_REVISION="v2-preview")
    assert settle(supervisor) is State.READY
    first, second = _starts(tmp_path)
    assert "v2-preview" in first["args"] and "--revision" not in second["args"]
    stop(supervisor)


def test_a_pinned_revision_is_never_replaced(tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    gone = {"say": [REVISION_GONE.replace("v2-preview", commit)], "then": "exit:1"}
    supervisor = _supervisor(tmp_path, [gone, SERVE], MODEL_REVISION=commit)
    assert settle(supervisor) is State.FAILED_PERMANENT
    assert supervisor.diagnosis is not None and supervisor.diagnosis.rule == "repo-not-found"
    assert len(_starts(tmp_path)) == 1
    stop(supervisor)


def test_a_full_compile_cache_volume_moves_the_cache_to_the_container_disk(tmp_path):
    volume = tmp_path / "volume"
    supervisor = _supervisor(tmp_path, [_disk_full(volume), SERVE])
    assert settle(supervisor) is State.READY
    first, second = _starts(tmp_path)
    assert first["VLLM_CACHE_ROOT"] == str(volume / "vllm-cache")
    assert second["VLLM_CACHE_ROOT"] == str(Path(tempfile.gettempdir()) / "vllm-cache")
    stop(supervisor)


def test_auto_length_on_a_vllm_without_auto_starts_at_the_estimate_then_at_vllms(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(relaunch, "vllm_has_auto", lambda: False)
    short = {"say": [LOADING, KV_SHORTFALL], "then": "exit:1"}
    supervisor = _supervisor(tmp_path, [short, SERVE], MAX_MODEL_LEN="auto")
    assert settle(supervisor) is State.READY
    first, second = _starts(tmp_path)
    assert first["args"][first["args"].index("--max-model-len") + 1] == "976"  # the estimate
    assert second["args"][second["args"].index("--max-model-len") + 1] == "768"  # vLLM's
    assert supervisor.start_info()["max_model_len"] == 768
    stop(supervisor)


def test_a_length_set_is_not_relaunched(tmp_path):
    short = {"say": [LOADING, KV_SHORTFALL], "then": "exit:1"}
    supervisor = _supervisor(tmp_path, [short, SERVE], MAX_MODEL_LEN="2048")
    assert settle(supervisor) is State.FAILED_PERMANENT
    assert "Set MAX_MODEL_LEN to 768 or less" in str(supervisor.diagnosis.message)
    assert len(_starts(tmp_path)) == 1
    stop(supervisor)


def test_at_most_two_relaunches_each_counted_by_the_breaker(tmp_path):
    """OOM → relaunch 1, full compile cache → relaunch 2, a vanished revision (which
    alone would relaunch) → no third: the worker settles, the ledger holds both."""
    gone = {"say": [REVISION_GONE], "then": "exit:1"}
    steps = [OOM_START, _disk_full(tmp_path / "volume"), gone, SERVE]
    supervisor = _supervisor(tmp_path, steps, MODEL_REVISION="v2-preview")
    assert settle(supervisor) is State.FAILED_PERMANENT
    assert supervisor.diagnosis is not None and supervisor.diagnosis.rule == "repo-not-found"
    assert len(_starts(tmp_path)) == 3
    kinds = [r["kind"] for r in supervisor.start_info()["relaunches"]]
    assert kinds == ["relax", "compile_cache"]
    assert _ledger(tmp_path) == ["relaunch:relax", "relaunch:compile_cache"]
    stop(supervisor)


def test_the_same_relaunch_is_never_repeated(tmp_path):
    supervisor = _supervisor(tmp_path, [OOM_START, OOM_START, SERVE])
    assert settle(supervisor) is State.FAILED_PERMANENT
    assert len(_starts(tmp_path)) == 2
    stop(supervisor)


@pytest.mark.parametrize("recorded", [3])
def test_a_breaker_at_its_limit_allows_no_relaunch(tmp_path, recorded):
    supervisor = _supervisor(tmp_path, [OOM_START, SERVE])
    breaker = supervisor.effects.breaker
    assert breaker is not None
    for _ in range(recorded):
        breaker.relaunched("relax")
    assert settle(supervisor) is State.FAILED_PERMANENT
    assert len(_starts(tmp_path)) == 1
    stop(supervisor)
