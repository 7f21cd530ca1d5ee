"""The project's Docker image, built from the Dockerfile and run as containers.

Run by ``scripts/test-image`` (never by a plain pytest run: tests/image/conftest.py). The
base image is the stand-in for ``vllm/vllm-openai`` that scripts/image/build-base makes
(Debian, vLLM's CPU build): a GPU cannot exist here, everything else is real. Containers
use ``--network host`` and talk over 127.0.0.1 only: the loopback RunPod queue
(tests/support/queue_server.py) drives the real SDK job loop inside the container, the
loopback hub (tests/support/hub_server.py) serves the model baked at build time.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hub_server import HubServer
from tests.support.queue_server import QueueServer
from tests.support.sse import check_sse_chunks
from tests.support.vllm_env import (
    PLANTED_TOKEN,
    QUIET_ENV,
    ROOT,
    build_tiny_model,
    free_port,
    needs_vllm,
)

pytestmark = needs_vllm  # the tiny model is made with the vLLM venv's transformers

DOCKER = "/usr/bin/docker"  # Debian's client: builds with BuildKit
IMAGE = "vllm-worker:image-test"
BAKED_IMAGE = "vllm-worker:image-test-baked"
LABEL = "vllm-worker.image-test"
# docker stop's grace period: SIGTERM, then SIGKILL (exit code 137) after this long.
GRACE_S = 30
SERVED = "tiny"
BAKED_REPO = "tiny-org/tiny-llama"
CHAT = [{"role": "user", "content": "Say hello"}]
START_S = 300  # a vLLM start in a container, 2 shared cores


def docker(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    done = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"docker {' '.join(args[:3])}: {done.stderr[-4000:]}"
    return done.stdout.strip()


def _pip_setting(env_name: str, key: str) -> str:
    if os.environ.get(env_name):
        return os.environ[env_name]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", key], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else ""


@pytest.fixture(scope="session")
def pip_secrets(tmp_path_factory) -> list[str]:
    """This machine's pip network settings (the CA of a TLS-intercepting proxy, an index)
    as the build secrets the Dockerfile mounts for its pip step (docs/image.md)."""
    cert = _pip_setting("PIP_CERT", "global.cert")
    index = _pip_setting("PIP_INDEX_URL", "global.index-url")
    conf, secrets = ["[global]"], []
    if cert:
        conf.append("cert = /run/secrets/pip-ca.crt")
        secrets += ["--secret", f"id=pip-ca.crt,src={cert}"]
    if index:
        conf.append(f"index-url = {index}")
    if len(conf) == 1:
        return []
    path = tmp_path_factory.mktemp("pip") / "pip.conf"
    path.write_text("\n".join(conf) + "\n")
    return ["--secret", f"id=pip.conf,src={path}", *secrets]


def build(tag: str, pip_secrets: list[str], *args: str) -> None:
    """``docker build`` of the project's Dockerfile, as the README shows it."""
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    docker(
        "build", "--network", "host", "-t", tag, "--label", LABEL, *pip_secrets, *args, str(ROOT),
        env=env, timeout=900,
    )  # fmt: skip


class Container:
    """One ``docker run`` of an image; its output is saved under ``log_dir``."""

    def __init__(self, image: str, log_dir: Path, env: dict[str, str], *run_args: str):
        self.log_dir = log_dir
        self.name = f"vllm-worker-test-{uuid.uuid4().hex[:8]}"
        # -e NAME (no value): docker reads it from its own environment, so no value (the
        # planted token included) is on a command line or in a file.
        passed = [arg for name in sorted(env) for arg in ("-e", name)]
        docker(
            "run", "-d", "--name", self.name, "--label", LABEL, "--network", "host",
            *run_args, *passed, image,
            env={**os.environ, **env},
        )  # fmt: skip

    def state(self) -> dict:
        return json.loads(docker("inspect", "-f", "{{json .State}}", self.name))

    def wait(self, timeout: float) -> int:
        return int(docker("wait", self.name, timeout=timeout))

    def stop(self) -> int:
        """SIGTERM; SIGKILL only if the container is still up after GRACE_S."""
        docker("stop", "-t", str(GRACE_S), self.name, timeout=GRACE_S + 60)
        return self.state()["ExitCode"]

    def save_logs(self) -> list[dict]:
        """Write stdout (vLLM's output) and stderr (the worker's events); return the events."""
        out, err = self.log_dir / "worker.out", self.log_dir / "worker.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            subprocess.run([DOCKER, "logs", self.name], stdout=stdout, stderr=stderr, check=True)
        found = []
        for line in err.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    found.append(json.loads(line))
        return found

    def answer(self, queue: QueueServer, job: str, timeout: float = START_S) -> dict:
        """The job's answer; fails at once, with the end of the container's output, if
        the container exits without sending it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return queue.wait_done(job, min(5.0, max(0.1, deadline - time.monotonic())))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
                state = self.state()
                if not state["Running"] and job not in queue.results:
                    self.save_logs()
                    tail = (self.log_dir / "worker.err").read_text(errors="replace")[-3000:]
                    raise AssertionError(
                        f"container exited ({state['ExitCode']}) before answering {job}:\n{tail}"
                    ) from None

    def remove(self) -> None:
        subprocess.run([DOCKER, "rm", "-f", self.name], capture_output=True, check=False)


@contextlib.contextmanager
def container(
    image: str, log_dir: Path, env: dict[str, str], *run_args: str
) -> Iterator[Container]:
    box = Container(image, log_dir, env, *run_args)
    try:
        yield box
    finally:
        box.save_logs()
        box.remove()


def worker_env(queue: QueueServer, **extra: str) -> dict[str, str]:
    """The tiny model's settings (as tests.support.vllm_env.worker_env) for a container."""
    env = {
        **QUIET_ENV,
        **queue.env(),
        "VLLM_PORT": str(free_port()),
        "MAX_MODEL_LEN": "512",
        "DTYPE": "float32",
        "ENFORCE_EAGER": "true",
        "GPU_MEMORY_UTILIZATION": "0.25",
        "HF_HUB_OFFLINE": "1",
        "VLLM_SHUTDOWN_GRACE": "5",
        "HF_TOKEN": PLANTED_TOKEN,
    }
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def image(pip_secrets) -> str:
    build(IMAGE, pip_secrets)
    return IMAGE


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("model") / "tiny")


def _mount(model: Path) -> tuple[str, str]:
    return ("-v", f"{model}:/models/tiny:ro")


def _error(done: dict) -> dict:
    assert isinstance(done.get("error"), str), done
    return json.loads(done["error"])


# -- a ready start ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ready(image, tiny_model, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("ready")
    with QueueServer() as queue:
        early = queue.submit({"openai_route": "/v1/models"})
        env = worker_env(queue, MODEL_NAME="/models/tiny", OPENAI_SERVED_MODEL_NAME_OVERRIDE=SERVED)
        with container(image, log_dir, env, "--shm-size", "1g", *_mount(tiny_model)) as box:
            yield {"queue": queue, "box": box, "early": box.answer(queue, early)}


def test_ready_answers_models(ready):
    (models,) = ready["early"]["output"]
    assert [m["id"] for m in models["data"]] == [SERVED]


def test_ready_answers_chat(ready):
    job = ready["queue"].submit(
        {
            "openai_route": "/v1/chat/completions",
            "openai_input": {"messages": CHAT, "max_tokens": 5},
        }
    )
    (output,) = ready["queue"].wait_done(job, 120)["output"]
    assert output["object"] == "chat.completion" and output["choices"][0]["message"]["role"]


def test_ready_streams_chat(ready):
    queue = ready["queue"]
    job = queue.submit(
        {
            "openai_route": "/v1/chat/completions",
            "openai_input": {"messages": CHAT, "max_tokens": 6, "stream": True},
        }
    )
    chunks = queue.wait_done(job, 120)["output"]
    check_sse_chunks(chunks)
    assert len(queue.job(job).stream) == len(chunks)  # streamed as they came


def test_sigterm_ends_the_container_within_the_grace_period(ready):
    box = ready["box"]
    top = docker("top", box.name, "-eo", "pid,args")
    assert "vllm" in top  # vLLM runs in the container beside the worker
    assert box.stop() == 0  # not 137: no SIGKILL was needed
    events = box.save_logs()
    exited = [e for e in events if e.get("event") == "vllm.exited"]
    # The worker saw vLLM's process group end before it exited itself; the container's
    # PID namespace is gone with it.
    assert exited and exited[-1]["requested"] is True


# -- failed starts ----------------------------------------------------------------------


def test_permanent_failure_answers_every_job_and_stays_up(image, tiny_model, tmp_path):
    with QueueServer() as queue:
        jobs = [queue.submit({"openai_route": "/v1/models"}) for _ in range(3)]
        env = worker_env(queue, MODEL_NAME="/models/tiny", MAX_MODEL_LEN="8192")
        with container(image, tmp_path, env, "--shm-size", "1g", *_mount(tiny_model)) as box:
            errors = [_error(box.answer(queue, job)) for job in jobs]
            assert box.state()["Running"]
            assert box.stop() == 0
    for error in errors:
        assert (error["category"], error["rule"]) == (
            "bad_config",
            "max-model-len-above-model-limit",
        )
        assert "MAX_MODEL_LEN to 2048 or less" in error["message"]


def test_docker_default_shm_is_named_transient_and_the_breaker_stops_restarts(
    image, tiny_model, tmp_path
):
    """Docker's default /dev/shm (64 MiB) is too small for vLLM: a transient failure of
    the container, not the model. One job gets the diagnosis, then the container exits 1.
    No volume is attached: the breaker's ledger is on the container disk, so when the
    same container restarts and fails again (CRASH_LOOP_LIMIT=1), it stays up and tells
    every job instead of exiting again."""
    with QueueServer() as queue:
        first = [queue.submit({"prompt": "a"}), queue.submit({"prompt": "b"})]
        env = worker_env(queue, MODEL_NAME="/models/tiny", CRASH_LOOP_LIMIT="1")
        with container(image, tmp_path, env, *_mount(tiny_model)) as box:
            assert box.wait(START_S) == 1
            answered = [j for j in first if j in queue.results]
            assert len(answered) == 1
            shm = _error(queue.results[answered[0]])
            docker("start", box.name)  # a restart: the same container and its disk
            again = [queue.submit({"prompt": "c"}), queue.submit({"prompt": "d"})]
            stopped = [_error(box.answer(queue, j)) for j in again]
            assert box.state()["Running"]
            assert box.stop() == 0
    assert shm["type"] == "prestart_failed"
    assert "shared memory" in shm["message"] and "--shm-size" in shm["message"]
    for error in stopped:
        assert error["rule"] == "crash-loop-breaker"
        assert "/var/lib/vllm-worker/restart-ledger.json" in error["message"]
        assert "shared memory" in error["message"]


# -- a baked model ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hub(tiny_model) -> Iterator[HubServer]:
    with HubServer({BAKED_REPO: tiny_model}) as server:
        yield server


def test_baked_model_is_served_with_the_hub_offline(image, hub, pip_secrets, tmp_path):
    build(
        BAKED_IMAGE,
        pip_secrets,
        "--build-arg",
        f"MODEL_NAME={BAKED_REPO}",
        "--build-arg",
        f"HF_ENDPOINT={hub.url}",
    )
    downloaded = len(hub.requests)
    assert downloaded > 0  # the build fetched the repo from the loopback hub
    with QueueServer() as queue:
        models = queue.submit({"openai_route": "/v1/models"})
        # No MODEL_NAME and no HF_HUB_OFFLINE: the image's manifest decides. HF_ENDPOINT
        # points at the hub so that any contact would be recorded.
        env = worker_env(queue, HF_ENDPOINT=hub.url)
        del env["HF_HUB_OFFLINE"]
        with container(BAKED_IMAGE, tmp_path, env, "--shm-size", "1g") as box:
            (listed,) = box.answer(queue, models)["output"]
            chat = queue.submit(
                {
                    "openai_route": "/v1/chat/completions",
                    "openai_input": {"messages": CHAT, "max_tokens": 3},
                }
            )
            (answer,) = queue.wait_done(chat, 120)["output"]
            assert box.stop() == 0
    assert [m["id"] for m in listed["data"]] == [BAKED_REPO]  # clients keep the repo id
    assert answer["object"] == "chat.completion"
    assert len(hub.requests) == downloaded  # served without contacting the hub
