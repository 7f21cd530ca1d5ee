"""The test queue speaks RunPod's job protocol: the real runpod SDK job loop runs against it.

Each worker here is a tiny script run as a subprocess with ``.venv``'s Python and the
queue's environment, in its own session so the SDK's heartbeat child goes with it. The
scripts build their error answers with ``worker.seams.answers``, so these tests also pin the
SDK behaviour that module relies on (an ``error`` dict value becomes a Python repr). They
import ``worker`` before the SDK, as the worker does (``worker/queue/sdk_cpu.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.loopback_http import loopback_client
from tests.support.queue_server import QueueServer
from tests.support.zygote import fork_server

TIMEOUT = 30.0  # generous: a worker process starts in well under a second here

WORKER_SCRIPT = """
import faulthandler
import json
import os
import signal

faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck worker's stacks, on demand

from worker.seams import answers  # first: the SDK is then imported as the worker imports it

import runpod

MODE = os.environ["TEST_WORKER_MODE"]


def echo(job):
    job_input = job["input"]
    if job_input.get("answer") == "bad_input":
        return answers.bad_input("prompt must be a string")
    return {"echo": job_input}


async def chunks(job):
    job_input = job["input"]
    for i in range(3):
        if job_input.get("fail_at") == i:
            yield answers.upstream_lost("ReadError: boom", mid_stream=True)
            yield "never sent"
        if job_input.get("raw_error_at") == i:
            yield {"error": {"message": "raw dict", "code": 1}}
        yield f"chunk-{i}"


CONFIGS = {
    "echo": {"handler": echo, "concurrency_modifier": lambda current: 4},
    "stream": {"handler": chunks},
    "stream-aggregate": {"handler": chunks, "return_aggregate_stream": True},
}
runpod.serverless.start(CONFIGS[MODE])
"""


@dataclass
class Worker:
    """A worker subprocess and the queue it serves."""

    queue: QueueServer
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def done(self, job_id: str) -> dict:
        try:
            return self.queue.wait_done(job_id, TIMEOUT)
        except TimeoutError as exc:
            pytest.fail(f"{exc}\n--- worker log ---\n{self.tail()}")

    def _takes_since(self, start: float) -> int:
        return sum(hit.at >= start for hit in self.queue.hits("job-take"))

    def terminate(self) -> int:
        """SIGTERM the worker and wait for it; kill its whole group whatever happens."""
        try:
            sent = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                state = _signal_state(self.proc.pid)
                with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                    os.kill(self.proc.pid, signal.SIGUSR1)  # its stacks, into its log
                    self.proc.wait(timeout=1)  # (only to let the dump land: it fails anyway)
                pytest.fail(
                    f"the worker did not stop within {TIMEOUT} s of SIGTERM\n"
                    f"--- its signal state ---\n{state}\n"
                    f"--- job-take polls after SIGTERM: {self._takes_since(sent)}\n"
                    f"--- worker log ---\n{self.tail(80)}"
                )
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _signal_state(pid: int) -> str:
    """The signal lines of /proc/PID/status for the process and each of its threads."""
    lines = []
    with contextlib.suppress(OSError):
        for task in sorted(os.listdir(f"/proc/{pid}/task")):
            status = Path(f"/proc/{pid}/task/{task}/status").read_text().splitlines()
            keep = [x for x in status if x.startswith(("Name", "State", "Sig", "ShdPnd"))]
            lines.append(f"task {task}: " + "; ".join(keep))
    return "\n".join(lines) or "(gone)"


def start_worker(queue: QueueServer, mode: str, tmp: Path) -> Worker:
    script = tmp / "tiny_worker.py"
    script.write_text(WORKER_SCRIPT)
    log = tmp / f"worker-{mode}.log"
    env = {
        **os.environ,
        **queue.env(),
        "TEST_WORKER_MODE": mode,
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("wb") as out:  # forked from the fork server; the SDK imported by the child
        proc = fork_server().popen([str(script)], env, tmp, stdout=out, stderr=subprocess.STDOUT)
    return Worker(queue, proc, log)


@pytest.fixture(scope="module")
def worker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    started: list[Worker] = []

    def start(mode: str) -> Worker:
        queue = QueueServer().start()
        worker = start_worker(queue, mode, tmp_path_factory.mktemp(mode))
        started.append(worker)
        return worker

    yield start
    for worker in started:  # signal all first: each takes about a second to wind down
        worker.proc.send_signal(signal.SIGTERM)
    for worker in started:
        try:
            worker.terminate()
        finally:
            worker.queue.close()


@pytest.fixture(scope="module")
def echo_worker(worker_factory) -> Worker:
    return worker_factory("echo")


@pytest.fixture(scope="module")
def stream_worker(worker_factory) -> Worker:
    return worker_factory("stream")


@pytest.fixture(scope="module")
def aggregate_worker(worker_factory) -> Worker:
    return worker_factory("stream-aggregate")


# -- the queue on its own -------------------------------------------------------------


def test_env_points_the_sdk_at_the_queue() -> None:
    with QueueServer() as queue:
        env = queue.env("w-7")
        base = f"{queue.url}/v2/ep"
        assert env == {
            "RUNPOD_WEBHOOK_GET_JOB": f"{base}/job-take/$ID?gpu=TEST",
            "RUNPOD_WEBHOOK_POST_OUTPUT": f"{base}/job-done/$RUNPOD_POD_ID/$ID?gpu=TEST",
            "RUNPOD_WEBHOOK_POST_STREAM": f"{base}/job-stream/$RUNPOD_POD_ID/$ID?gpu=TEST",
            "RUNPOD_WEBHOOK_PING": f"{base}/ping/$RUNPOD_POD_ID",
            "RUNPOD_POD_ID": "w-7",
            "RUNPOD_AI_API_KEY": "test-api-key",
            "RUNPOD_SKIP_AUTO_SYSTEM_CHECKS": "true",
            "RUNPOD_SKIP_GPU_CHECK": "true",
        }


def test_wire_shapes_without_the_sdk() -> None:
    with QueueServer(hold_s=0.05) as queue, loopback_client(base_url=queue.url) as http:
        assert http.get("/v2/ep/job-take/w?gpu=TEST&job_in_progress=0").status_code == 204
        job_id = queue.submit({"prompt": "hi"})
        taken = http.get("/v2/ep/job-take/w?gpu=TEST&job_in_progress=0")
        assert taken.status_code == 200
        assert taken.headers["content-type"] == "application/json"
        assert taken.json() == {"id": job_id, "input": {"prompt": "hi"}}
        assert queue.taken_at(job_id) is not None

        ids = [queue.submit({"n": n}) for n in range(3)]
        batch = http.get("/v2/ep/job-take-batch/w?gpu=TEST&batch_size=2&job_in_progress=0")
        assert [job["id"] for job in batch.json()] == ids[:2]

        form = {"Content-Type": "application/x-www-form-urlencoded"}
        stream_url = f"/v2/ep/job-stream/w/{job_id}?gpu=TEST&isStream=false"
        http.post(stream_url, content=json.dumps({"output": "a"}), headers=form)
        done_url = f"/v2/ep/job-done/w/{job_id}?gpu=TEST&isStream=true"
        http.post(done_url, content=json.dumps({"output": ["a"]}), headers=form)
        assert queue.wait_done(job_id, 1) == {"output": ["a"]}
        assert queue.job(job_id).stream == [{"output": "a"}]
        assert queue.job(job_id).done_query == {"gpu": "TEST", "isStream": "true"}

        assert http.get("/v2/ep/job-stop/w?gpu=TEST").status_code == 204
        queue.stop_job(ids[2])
        assert http.get("/v2/ep/job-stop/w?gpu=TEST").json() == {"jobsToStop": [ids[2]]}
        assert http.get("/v2/ep/ping/w?job_id=a&runpod_version=1.12.0").status_code == 200
        assert http.get("/v2/ep/nope").status_code == 404


def test_empty_job_take_is_held_until_a_job_arrives() -> None:
    # A hold far longer than the test's own timeout: only submit() can end it in time.
    with QueueServer(hold_s=60) as queue, loopback_client(base_url=queue.url, timeout=10) as http:
        answers: list[httpx.Response] = []
        poll = threading.Thread(target=lambda: answers.append(http.get("/v2/ep/job-take/w")))
        poll.start()
        queue.wait_for(lambda: queue.polls_held, 10, "a held job-take")
        job_id = queue.submit({"late": True})
        poll.join(timeout=10)
        assert answers and answers[0].json()["id"] == job_id


def test_faults_are_injected_in_order() -> None:
    with QueueServer() as queue, loopback_client(base_url=queue.url) as http:
        job_id = queue.submit({})
        queue.fail_next(1, status=503)
        queue.drop_connections(1, kinds=["job-done"])
        url = f"/v2/ep/job-done/w/{job_id}?gpu=TEST"
        assert http.post(url, content="{}").status_code == 503
        with pytest.raises(httpx.RemoteProtocolError):
            http.post(url, content="{}")
        assert http.post(url, content='{"output": 1}').status_code == 200
        assert queue.results == {job_id: {"output": 1}}
        assert [h.outcome for h in queue.hits("job-done")] == [503, "dropped", 200]

        queue.delay_s = 0.2
        started = time.monotonic()
        http.post(f"/v2/ep/job-stream/w/{job_id}?gpu=TEST", content="{}")
        assert time.monotonic() - started >= 0.2


# -- the real SDK job loop ------------------------------------------------------------


def test_plain_handler_output_and_batch_take(echo_worker: Worker) -> None:
    queue = echo_worker.queue
    job_id = queue.submit({"prompt": "hello", "n": [1, 2]})
    assert echo_worker.done(job_id) == {"output": {"echo": {"prompt": "hello", "n": [1, 2]}}}
    assert queue.job(job_id).done_query["isStream"] == "false"
    assert queue.job(job_id).stream == []
    # concurrency_modifier -> 4 free slots, so the SDK asks the batch endpoint for 4.
    batch_takes = queue.hits("job-take-batch")
    assert batch_takes and batch_takes[0].query["batch_size"] == "4"


def test_plain_handler_error_output_arrives_as_json_string(echo_worker: Worker) -> None:
    job_id = echo_worker.queue.submit({"answer": "bad_input"})
    done = echo_worker.done(job_id)
    assert set(done) == {"error"}
    assert json.loads(done["error"]) == {
        "message": "prompt must be a string",
        "type": "invalid_request_error",
        "code": 400,
    }


def test_generator_streams_each_chunk_and_posts_empty_output(stream_worker: Worker) -> None:
    queue = stream_worker.queue
    job_id = queue.submit({})
    assert stream_worker.done(job_id) == {"output": []}
    record = queue.job(job_id)
    assert record.stream == [{"output": f"chunk-{i}"} for i in range(3)]
    assert record.done_query["isStream"] == "true"
    assert queue.hits("job-take")[0].query["job_in_progress"] in {"0", "1"}


def test_return_aggregate_stream_repeats_the_chunks_in_done(aggregate_worker: Worker) -> None:
    job_id = aggregate_worker.queue.submit({})
    assert aggregate_worker.done(job_id) == {"output": [f"chunk-{i}" for i in range(3)]}
    assert len(aggregate_worker.queue.job(job_id).stream) == 3


def test_yielded_json_error_string_ends_the_job_verbatim(aggregate_worker: Worker) -> None:
    queue = aggregate_worker.queue
    job_id = queue.submit({"fail_at": 1})
    done = aggregate_worker.done(job_id)
    # The error replaces the aggregate entirely; chunks already sent stay sent.
    assert set(done) == {"error"}
    payload = json.loads(done["error"])
    assert payload["type"] == "upstream_error"
    assert payload["detail"] == "ReadError: boom"
    assert queue.job(job_id).stream == [{"output": "chunk-0"}]


def test_sdk_turns_a_yielded_error_dict_into_a_python_repr(stream_worker: Worker) -> None:
    """Why worker.seams.answers json-encodes: pin the SDK 1.12.0 behaviour it works around."""
    job_id = stream_worker.queue.submit({"raw_error_at": 0})
    done = stream_worker.done(job_id)
    assert done == {"error": str({"message": "raw dict", "code": 1})}
    with pytest.raises(json.JSONDecodeError):
        json.loads(done["error"])


def test_result_post_5xx_is_retried(stream_worker: Worker) -> None:
    queue = stream_worker.queue
    queue.fail_next(1, status=500, kinds=["job-done"])
    job_id = queue.submit({})
    assert stream_worker.done(job_id) == {"output": []}
    outcomes = [h.outcome for h in queue.hits("job-done") if h.path.endswith(job_id)]
    assert outcomes == [500, 200]


def test_dropped_stream_post_is_lost_not_retried(stream_worker: Worker) -> None:
    """SDK 1.12.0 retries result POSTs on 5xx only; a broken connection loses the chunk."""
    queue = stream_worker.queue
    queue.drop_connections(1, kinds=["job-stream"])
    job_id = queue.submit({})
    assert stream_worker.done(job_id) == {"output": []}
    assert queue.job(job_id).stream == [{"output": "chunk-1"}, {"output": "chunk-2"}]


def test_sigterm_stops_an_idle_worker(worker_factory) -> None:
    worker = worker_factory("stream")
    job_id = worker.queue.submit({})
    worker.done(job_id)  # the job loop is running and owns SIGTERM now
    takes = worker.queue.hits("job-take")
    span = max(takes[-1].at - takes[0].at, 1.0)
    assert len(takes) / span < 20, "job-take spins: the queue must hold empty polls open"
    assert worker.terminate() == 0, worker.tail()
