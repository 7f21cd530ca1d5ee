"""The package as users install it: a wheel (and an sdist) built from the files the
Dockerfile copies, installed into a fresh venv and run from a folder outside the source
tree, where nothing can fall back on the checkout's ``rules/`` or editable finder.

Offline, like every test here: the wheel is built without build isolation (the backend
comes from .venv) and installed with ``--no-deps``; its third-party dependencies are
borrowed from .venv through a ``.pth`` line, after checking that .venv satisfies every
``Requires-Dist`` of the wheel. Installing them from the index is what the image test
(scripts/test-image) does.
"""

from __future__ import annotations

import email
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.queue_server import QueueServer
from tests.support.vllm_env import ROOT, events, stand_in_env

# What the Dockerfile copies into the image before `pip install /src`.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "worker", "diagnostics", "rules")
FIXTURES = ROOT / "fixtures" / "vllm-0.32"
REPLAY = ROOT / "tests" / "support" / "replay_log.py"


def _copy_sources(dest: Path) -> Path:
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=ignore)
        else:
            shutil.copy2(source, dest / name)
    return dest


def _build(kind: str, source: Path, out: Path) -> Path:
    """Build a wheel or sdist with setuptools' PEP 517 backend, as pip or build would."""
    out.mkdir(parents=True, exist_ok=True)
    call = f"import sys; from setuptools import build_meta as b; print(b.build_{kind}(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", call, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return out / done.stdout.strip().splitlines()[-1]


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return {n for n in zf.namelist() if ".dist-info/" not in n}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("package")
    return _build("wheel", _copy_sources(root / "src"), root / "dist")


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    """A fresh venv with the wheel installed; dependencies borrowed from .venv."""
    path = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install", "-q"),
            *("--no-deps", "--no-index", "--disable-pip-version-check", str(wheel)),
        ],
        check=True,
        capture_output=True,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "_borrowed_dependencies.pth").write_text("\n".join(sorted(borrowed)) + "\n")
    return path


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A working folder outside the source tree."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def test_wheel_holds_every_module_the_rule_pack_and_the_flag_snapshot(wheel):
    names = _names(wheel)
    expected = {f"diagnostics/rulepack/{p.name}" for p in (ROOT / "rules").glob("*.yaml")}
    expected |= {"worker/config/vllm_flags.json", "diagnostics/rulepack/catalogue.json"}
    for package in ("worker", "diagnostics"):  # subpackages too
        expected |= {
            p.relative_to(ROOT).as_posix()
            for p in (ROOT / package).rglob("*.py")
            if "__pycache__" not in p.parts
        }
    assert expected <= names, f"missing from the wheel: {sorted(expected - names)}"
    assert not [n for n in names if n.startswith(("tests/", "fixtures/", "rules/"))]
    with zipfile.ZipFile(wheel) as zf:
        entry_points = next(n for n in zf.namelist() if n.endswith("entry_points.txt"))
        assert "diagnose = diagnostics.command.cli:run" in zf.read(entry_points).decode()


def test_sdist_builds_the_same_wheel(tmp_path, wheel):
    sdist = _build("sdist", _copy_sources(tmp_path / "src"), tmp_path / "sdist")
    with tarfile.open(sdist) as tf:
        tf.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    from_sdist = _build("wheel", unpacked, tmp_path / "dist")
    assert _names(from_sdist) == _names(wheel)


def test_dot_venv_satisfies_the_wheels_dependencies(wheel):
    """The borrowed dependencies stand for what pip would install from the index."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        requires = email.message_from_bytes(zf.read(meta)).get_all("Requires-Dist") or []
    unmet = []
    for line in requires:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra (cpu, test), not a run-time dependency
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed is None or not req.specifier.contains(installed, prereleases=True):
            unmet.append(f"{line} (.venv has {installed})")
    assert not unmet


def test_installed_modules_come_from_the_wheel(venv, elsewhere):
    code = (
        "import worker, diagnostics.rulepack as r; print(worker.__file__); print(list(r.__path__))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=elsewhere,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(ROOT) not in out and str(venv) in out


def test_diagnose_reads_the_packaged_rule_pack(venv, elsewhere):
    # The last one is named only by the message catalogue (rules/catalogue.json), which
    # reads as empty when it is missing: it must travel with the package.
    wrapped_kv = ROOT / "fixtures/corpus/kv_cache/arc-b70-cookbook-4-xpu-wrapped-kv.log"
    logs = [FIXTURES / "max-model-len-too-large.log", FIXTURES / "startup-ok.log", wrapped_kv]
    done = subprocess.run(
        [str(venv / "bin" / "diagnose"), "--format", "json", *map(str, logs)],
        cwd=elsewhere,
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(a["category"], a["rule"]) for a in answers] == [
        ("bad_config", "max-model-len-above-model-limit"),
        ("ok", None),
        ("kv_cache", "catalogued-kv-cache"),
    ]


def test_worker_loads_settings_rule_pack_and_flags_and_answers(venv, elsewhere, tmp_path):
    """The installed worker, up to the answer of a failed start. vLLM cannot start from
    this venv: a stand-in replays the real log of a start with MAX_MODEL_LEN too long."""
    fixture = FIXTURES / "max-model-len-too-large.log"
    with QueueServer() as queue:
        env = stand_in_env(
            tmp_path,
            f"{sys.executable} {REPLAY} {fixture} 1",
            MAX_MODEL_LEN="8192",
            **queue.env(),
        )
        env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        with (
            (tmp_path / "worker.out").open("wb") as out,
            (tmp_path / "worker.err").open("wb") as err,
        ):
            proc = subprocess.Popen(
                [str(venv / "bin" / "python"), "-m", "worker"],
                cwd=elsewhere,
                env=env,
                start_new_session=True,
                stdout=out,
                stderr=err,
            )
        try:
            jobs = [queue.submit({"openai_route": "/v1/models"}) for _ in range(2)]
            errors = [json.loads(queue.wait_done(j, 60)["error"]) for j in jobs]
            assert proc.poll() is None  # a permanent failure: still up
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            code = proc.wait(60)
    assert code == 0
    for error in errors:
        assert (error["category"], error["rule"]) == (
            "bad_config",
            "max-model-len-above-model-limit",
        )
    # The flag snapshot turned MAX_MODEL_LEN into vLLM's flag.
    (spawned,) = [e for e in events(tmp_path) if e.get("event") == "vllm.spawning"]
    assert "--max-model-len 8192" in spawned["command"]
