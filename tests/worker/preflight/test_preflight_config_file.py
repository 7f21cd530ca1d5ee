"""Issue 23 §4: ``--config`` in VLLM_EXTRA_ARGS gets the checks VLLM_CONFIG_FILE gets, and
the pre-flight reads the mapping the settings read (a bounded, regular, alias-free YAML
file) instead of opening the file again: no FIFO blocks it, no /dev/zero fills memory,
no alias bomb expands."""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.packs import shipped_pack
from worker.config import config_file
from worker.config.errors import ConfigError
from worker.config.settings import load_settings
from worker.preflight import run_preflight
from worker.seams.gpus import GIB, HostMemory, Inventory

PACK = shipped_pack()
BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
max-model-len: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def hostile_files(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    return {"fifo": fifo, "zero": zero, "bomb": bomb}


def bounded(work, limit: float = 10.0):
    """``work()`` in a thread: (finished, result or exception, peak MiB, seconds)."""
    box: dict = {}

    def target() -> None:
        try:
            box["r"] = work()
        except Exception as exc:
            box["r"] = exc

    tracemalloc.start()
    began = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    peak = tracemalloc.get_traced_memory()[1] / (1 << 20)
    tracemalloc.stop()
    return not thread.is_alive(), box.get("r"), peak, time.monotonic() - began


@pytest.mark.parametrize("kind", ["fifo", "zero", "bomb"])
@pytest.mark.parametrize("how", ["VLLM_CONFIG_FILE", "VLLM_EXTRA_ARGS"])
def test_a_hostile_config_file_is_a_bad_setting_both_ways(tmp_path, kind, how):
    # Before: VLLM_EXTRA_ARGS=--config skipped the checks VLLM_CONFIG_FILE gets.
    path = hostile_files(tmp_path)[kind]
    value = str(path) if how == "VLLM_CONFIG_FILE" else f"--config {path}"
    env = {"MODEL_NAME": "org/m", how: value}
    done, answer, peak, _ = bounded(lambda: load_settings(env))
    assert done, "reading the settings blocked"
    assert isinstance(answer, ConfigError), answer
    assert peak < 32


@pytest.mark.parametrize("kind", ["fifo", "zero", "bomb"])
def test_the_preflight_never_blocks_or_expands_a_config_file(tmp_path, kind):
    # Before: the pre-flight re-read the file: blocked on a FIFO, read /dev/zero until
    # memory ran out, expanded the 405-byte alias bomb past 3 GiB.
    path = hostile_files(tmp_path)[kind]
    settings = SimpleNamespace(
        model=str(tmp_path), vllm_args=["--model", str(tmp_path), "--config", str(path)]
    )
    done, result, peak, seconds = bounded(
        lambda: run_preflight(
            settings,
            {},
            pack=PACK,
            sdk_checks=False,
            inventory=lambda: Inventory(host=HostMemory(16 * GIB, 12 * GIB)),
        )
    )
    assert done and seconds < 5 and peak < 32, (done, seconds, peak)
    assert result.diagnosis is None
    assert result.findings[0].step == "request" and result.findings[0].outcome == "unknown"


def test_the_preflight_reads_the_mapping_the_settings_read(tmp_path, monkeypatch):
    path = tmp_path / "vllm.yaml"
    path.write_text("max-model-len: 4096\nserved-model-name: [a, b]\n")
    env = {"MODEL_NAME": "org/m", "VLLM_EXTRA_ARGS": f"--config {path}"}
    settings = load_settings(env)
    assert "--config" in settings.vllm_args
    opened: list[str] = []
    real = config_file._read_text

    def spy(var: str, name: str) -> str:
        opened.append(name)
        return real(var, name)

    monkeypatch.setattr(config_file, "_read_text", spy)
    data = config_file.read_config_file("--config", str(path))
    assert data == {"max-model-len": 4096, "served-model-name": ["a", "b"]} and opened == []
    path.write_text("max-model-len: 8192\n")  # changed since: read again
    assert config_file.read_config_file("--config", str(path)) == {"max-model-len": 8192}


def test_aliases_and_deep_nesting_are_refused_with_a_clear_message(tmp_path):
    alias = tmp_path / "alias.yaml"
    alias.write_text("a: &x 1\nb: *x\n")
    with pytest.raises(ConfigError, match="alias"):
        config_file.read_config_file("VLLM_CONFIG_FILE", str(alias))
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 50 + "]" * 50 + "\n")
    with pytest.raises(ConfigError, match="deep"):
        config_file.read_config_file("VLLM_CONFIG_FILE", str(deep))
