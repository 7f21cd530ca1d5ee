"""Issue 23 §1: the hub is untrusted input. A broken or hostile mirror (the loopback hub
of tests/support/hub_server.py with ``Hostile`` answers) can make the pre-flight say
"unknown", never crash it, grow the worker without bound, keep it waiting, turn a
malformed value into a verdict, or put HF_TOKEN into an answer."""

from __future__ import annotations

import functools
import json
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from diagnostics import Category, State
from tests.support.hub_server import Body, Described, Hostile, HubServer
from tests.support.packs import shipped_pack
from tests.worker.preflight.test_preflight_hub import CONFIG, NO_GPU_16_GIB, write_model
from worker.modelinfo import hub as hubmod
from worker.preflight import run_preflight

PACK = shipped_pack()
TOKEN = "hf_" + "Zq7" * 11  # an hf_ token shape, 36 characters
MiB = 1 << 20


@functools.lru_cache(maxsize=1)
def gzip_zeros(decoded: int = 128 * MiB) -> bytes:
    """A gzip body that inflates to ``decoded`` zero bytes (~130 KB on the wire)."""
    pack = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = bytes(MiB)
    return b"".join(pack.compress(block) for _ in range(decoded // MiB)) + pack.flush()


def chunks_of(data: bytes, size: int = 64 << 10):
    return lambda: (data[i : i + size] for i in range(0, len(data), size))


def many_files(count: int):
    """Model info listing ``count`` files, generated while it is sent."""

    def chunks() -> Iterator[bytes]:
        yield b'{"id": "org/million-files", "sha": "' + b"a" * 40 + b'", "siblings": ['
        for start in range(0, count, 2000):
            yield b"".join(
                b'{"rfilename": "f%07d.json", "size": 1},' % i
                for i in range(start, min(count, start + 2000))
            )
        yield b'{"rfilename": "config.json", "size": 10}]}'

    return chunks


def trickle() -> Iterator[bytes]:
    while True:
        yield b" "


BAD_INFO: dict[str, dict] = {
    "org/negative-size": {"siblings": [{"rfilename": "model.safetensors", "size": -(10**15)}]},
    "org/string-size": {"siblings": [{"rfilename": "model.safetensors", "size": "9 GB"}]},
    "org/list-size": {"siblings": [{"rfilename": "model.safetensors", "size": [1]}]},
    "org/float-size": {"siblings": [{"rfilename": "model.safetensors", "size": 1e30}]},
    "org/huge-size": {"siblings": [{"rfilename": "model.safetensors", "size": 10**18}]},
    "org/null-name": {"siblings": [{"rfilename": None, "size": 1}]},
    "org/int-sha": {"sha": 1234567},
    "org/negative-params": {"safetensors": {"parameters": {"BF16": -(10**15)}, "total": 1}},
    "org/string-params": {"safetensors": {"parameters": {"BF16": "many"}, "total": 1}},
    "org/huge-params": {"safetensors": {"parameters": {"BF16": 10**18}, "total": 10**18}},
}
NAN_INFO = b'{"sha": "abc", "siblings": [{"rfilename": "model.safetensors", "size": NaN}]}'
BAD_CONFIG: dict[str, dict | bytes] = {
    "org/negative-positions": {**CONFIG, "max_position_embeddings": -5},
    "org/nan-positions": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", '
    b'"max_position_embeddings": NaN}',
    "org/inf-positions": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", '
    b'"max_position_embeddings": Infinity}',
    "org/string-positions": {**CONFIG, "max_position_embeddings": "2048"},
    "org/list-positions": {**CONFIG, "max_position_embeddings": [2048]},
    "org/bad-rope": {**CONFIG, "rope_scaling": {"type": "linear", "factor": -4}},
    "org/bad-kv-heads": {**CONFIG, "num_key_value_heads": -1, "num_hidden_layers": 10**6},
    "org/string-heads": {**CONFIG, "num_attention_heads": "2"},
    "org/list-archs": {**CONFIG, "architectures": [["LlamaForCausalLM"]]},
}


def _body(value: dict | bytes) -> Body:
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    return Body(chunks_of(data))


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    root = tmp_path_factory.mktemp("repos")
    ok = write_model(root / "ok")
    hostile = {
        "org/gzip-config": Hostile(files={"config.json": Body(chunks_of(gzip_zeros()), "gzip")}),
        "org/gzip-info": Hostile(info=Body(chunks_of(gzip_zeros()), "gzip")),
        "org/big-config": Hostile(files={"config.json": Body(lambda: iter([bytes(MiB)] * 100))}),
        "org/million-files": Hostile(info=Body(many_files(10**6))),
        "org/trickle": Hostile(info=Body(trickle, pause_s=0.05)),
        "org/trickle-config": Hostile(files={"config.json": Body(trickle, pause_s=0.05)}),
        "org/echo": Hostile(echo_token=True),
        "org/nan-info": Hostile(info=Body(chunks_of(NAN_INFO))),
        **{repo: Hostile(info=info) for repo, info in BAD_INFO.items()},
        **{repo: Hostile(files={"config.json": _body(c)}) for repo, c in BAD_CONFIG.items()},
    }
    with HubServer({repo: ok for repo in hostile}, hostile=hostile) as server:
        yield server


pytestmark = pytest.mark.usefixtures("hub_reachable")


def preflight(model: str, env: dict, *args: str, timeout: float = 5, **kwargs):
    settings = SimpleNamespace(
        model=model, vllm_args=["--model", model, *args], baked_model_path=None, offline=False
    )
    kwargs.setdefault("inventory", lambda: NO_GPU_16_GIB)
    return run_preflight(settings, env, pack=PACK, timeout=timeout, sdk_checks=False, **kwargs)


def env_of(hub: HubServer, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), **extra}


def traced(work):
    """(result, peak bytes Python allocated, seconds) while ``work`` runs."""
    tracemalloc.start()
    began = time.monotonic()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1], time.monotonic() - began
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("repo", "said"),
    [
        ("org/gzip-config", "config.json is larger than 2 MiB (decoded)"),
        ("org/gzip-info", "model info is larger than 8 MiB (decoded)"),
        ("org/big-config", "config.json is larger than 2 MiB (decoded)"),
        ("org/million-files", "model info is larger than 8 MiB (decoded)"),
    ],
)
def test_an_answer_too_large_once_decoded_is_cut_and_named(hub, tmp_path, repo, said):
    # Before: the whole answer was read (and inflated) into memory: +4 GiB for a gzip
    # config.json, +493 MiB and 6.4 s for 10^6 files, then "go".
    result, peak, seconds = traced(lambda: preflight(repo, env_of(hub, tmp_path)))
    assert peak < 48 * MiB, f"peak {peak / MiB:.0f} MiB"
    assert seconds < 5
    assert result.diagnosis is None
    details = " ".join(f.detail for f in result.findings)
    assert said in details


@pytest.mark.parametrize("repo", ["org/trickle", "org/trickle-config"])
def test_a_trickling_hub_is_cut_off_at_the_total_deadline(hub, tmp_path, repo):
    # Before: each read had a timeout and the whole answer none: past 45 s, and on.
    box: dict = {}
    worker = threading.Thread(
        target=lambda: box.update(r=preflight(repo, env_of(hub, tmp_path), timeout=1)),
        daemon=True,
    )
    began = time.monotonic()
    worker.start()
    worker.join(15)
    assert not worker.is_alive(), "the pre-flight was still waiting for the hub"
    assert time.monotonic() - began < 3
    result = box["r"]
    assert result.diagnosis is None
    step = result.findings[0]
    assert (step.step, step.outcome) == ("model", "unknown")
    assert "within 1 s" in step.detail or "deadline" in step.detail


@pytest.mark.parametrize("repo", [*BAD_INFO, "org/nan-info"])
def test_an_implausible_model_info_is_unknown_never_a_verdict(hub, tmp_path, repo):
    # Before: crashes (preflight_crashed) or verdicts like "-931322.57 GiB of weights" and
    # a disk-full (transient: every worker restarting) for a size of 10^18.
    result = preflight(repo, env_of(hub, tmp_path), "--max-model-len", "512")
    assert result.diagnosis is None, result.diagnosis
    step = result.findings[0]
    assert (step.step, step.outcome) == ("model", "unknown")


@pytest.mark.parametrize("repo", list(BAD_CONFIG))
def test_implausible_config_values_are_unknown_never_a_verdict(hub, tmp_path, repo):
    # Before: "MAX_MODEL_LEN=512 is longer than the model supports (-5 tokens)", crashes
    # on NaN and infinity, a KV cache of 10^6 layers.
    env = env_of(hub, tmp_path)
    for args in (("--max-model-len", "512"), ("--tensor-parallel-size", "2"), ()):
        result = preflight(repo, env, *args)
        assert result.diagnosis is None, (args, result.diagnosis)
    assert any(
        f.outcome == "unknown" and ("implausible" in f.detail or "not JSON" in f.detail)
        for f in result.findings
    ), result.findings


def test_a_hub_echoing_the_token_never_puts_it_in_the_answer(hub, tmp_path):
    # Before: "The hub answered: 403 Client Error: ... Bearer hf_..." in the job's answer.
    result = preflight("org/echo", env_of(hub, tmp_path, HF_TOKEN=TOKEN))
    d = result.diagnosis
    assert d is not None and (d.rule, d.state) == ("gated-repo", State.FAILED_PERMANENT)
    shown = json.dumps([d.to_dict(), result.summary()])
    assert "Access denied" in shown
    assert TOKEN not in shown and TOKEN[3:] not in shown


def test_credentials_in_hf_endpoint_are_never_repeated(hub, tmp_path):
    password = "pw-" + "Xy9" * 6
    host = hub.url.removeprefix("http://")
    env = {"HF_ENDPOINT": f"http://mirror-user:{password}@{host}", "HF_HOME": str(tmp_path)}
    result = preflight("org/echo", env)  # the 403 repeats the Basic credentials
    shown = json.dumps([result.diagnosis.to_dict() if result.diagnosis else None])
    shown += json.dumps(result.summary())
    assert "Access denied" in shown
    assert password not in shown
    import base64

    assert base64.b64encode(f"mirror-user:{password}".encode()).decode() not in shown
    unreachable = {"HF_ENDPOINT": f"http://mirror-user:{password}@127.0.0.1:9"}
    result = preflight("org/any", unreachable)
    assert result.diagnosis is None and password not in json.dumps(result.summary())


def test_the_reader_itself_bounds_a_gzip_config(hub):
    answer, peak, _ = traced(
        lambda: hubmod.read_hub("org/gzip-config", None, endpoint=hub.url, token=None, timeout=5)
    )
    assert peak < 16 * MiB, f"peak {peak / MiB:.0f} MiB"
    assert not isinstance(answer, hubmod.HubRefusal)
    facts = answer if not isinstance(answer, hubmod.HubUnknown) else None
    assert facts is not None and facts.config is None
    assert any("larger than 2 MiB" in p for p in facts.problems)


def test_a_described_repo_is_still_read_whole(tmp_path):
    big = tmp_path / "big"
    big.mkdir()
    (big / "config.json").write_text(json.dumps(CONFIG))
    files = {"model.safetensors": Described(5 * 10**9, {"BF16": 2_500_000_000})}
    with HubServer({"org/described": big}, described={"org/described": files}) as server:
        answer = hubmod.read_hub("org/described", None, endpoint=server.url, token=None, timeout=5)
    assert not isinstance(answer, hubmod.HubRefusal | hubmod.HubUnknown)
    assert answer.files["model.safetensors"] == 5 * 10**9
    assert answer.parameters == {"BF16": 2_500_000_000}
    assert answer.config is not None and answer.config["model_type"] == "llama"


def test_categories_are_unchanged_for_a_refusal(hub, tmp_path):
    d = preflight("org/not-there", env_of(hub, tmp_path)).diagnosis
    assert d is not None and d.category is Category.MODEL_NOT_FOUND
