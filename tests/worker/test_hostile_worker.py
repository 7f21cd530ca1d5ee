"""The worker under hostile output and a hostile volume, through its real paths: a stand-in
vLLM (``tests.support.replay_log``, or a process that never exits) and the real SDK job
loop against ``tests.support.queue_server``.

* Every secret form the worker can recognise, planted in vLLM's output, in the
  environment and in a URL the diagnosis quotes, is found 0 times in stdout, the
  structlog events, the job's answer and its output tail, including secrets that
  straddle the 1 MiB pipe cut and the 4096-character evidence cut.
* A crash-loop ledger full of bad entries does not stop the worker from settling.
* vLLM never outlives a SIGKILLed worker (parent-death signal).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys

from tests.support.queue_server import QueueServer
from tests.support.vllm_env import (
    PLANTED_ENV,
    events,
    group_alive,
    planted_value,
    replay_env,
    start_worker,
    worker_env,
)
from worker.config.settings import load_settings
from worker.crashloop.breaker import LEDGER_NAME, config_key

PIPE_CUT = 1 << 20
EVIDENCE_CUT = 4096


# form -> an output line carrying a secret (at {secret}); "hf_ token": a secret of that form.
_FORM_LINES = {
    "URL credentials": "INFO Fetching https://planted-user:{secret}@mirror.example/x",
    "URL token as user": "INFO Cloning https://{secret}@git.example/repo.git",
    "*_API_KEY=": "DEBUG env OPENAI_API_KEY={secret} MAX_MODEL_LEN=4096",
    "*_ACCESS_KEY=": "DEBUG env AWS_SECRET_ACCESS_KEY={secret}",
    "X-Api-Key header": "DEBUG request headers: X-Api-Key: {secret}",
    "api-key header": "DEBUG api-key: {secret}",
    "password= param": "WARNING db url params password={secret}&sslmode=require",
    "Authorization: Bearer": "DEBUG Authorization: Bearer {secret}",
    "--hf-token value": "INFO argv: vllm serve m --hf-token {secret} --port 1",
    "--api-key=value": "INFO argv: vllm serve m --api-key={secret}",
    "Namespace repr": "INFO non-default args: {'hf_token': '{secret}'}",
    "JSON field": 'DEBUG body {"password": "{secret}"}',
    "hf_ token": "INFO token {secret} in use",
    "*_CREDENTIALS=": "DEBUG DEPLOY_CREDENTIALS={secret}",
}


def _forms() -> dict[str, tuple[str, str]]:
    """form -> (secret value, output line carrying it): a new secret each time."""
    forms = {}
    for form, line in _FORM_LINES.items():
        secret = planted_value(24, "hf_" if form == "hf_ token" else "")
        forms[form] = (secret, line.replace("{secret}", secret))
    return forms


def _straddling(cut: int, form: str) -> str:
    """A line in which ``form`` starts just before character ``cut``."""
    head = "INFO " + "w " * cut
    return head[: cut - 10] + " " + form + " tail"


def test_no_secret_form_leaves_the_worker(tmp_path, tmp_path_factory, planted_secrets, reliability):
    forms = _forms()
    url_password = planted_value(24)
    pipe_token, evidence_token = "hf_" + planted_value(30), "hf_" + planted_value(30)
    pipe_bearer = planted_value(24)
    planted_secrets += [v for v, _ in forms.values()]
    planted_secrets += [url_password, pipe_token, evidence_token, pipe_bearer]
    lines = [line for _, line in forms.values()]
    lines.append(_straddling(PIPE_CUT, pipe_token))
    lines.append(_straddling(PIPE_CUT, f"Authorization: Bearer {pipe_bearer}"))
    lines.append(_straddling(EVIDENCE_CUT, evidence_token))
    endpoint = f"http://planted-user:{url_password}@127.0.0.1:9"
    lines.append(f"OSError: We couldn't connect to '{endpoint}' to load this file")
    # The stand-in's script lives outside tmp_path: the leak check scans what the worker wrote.
    script = tmp_path_factory.mktemp("stand-in") / "vllm.log"
    script.write_text("\n".join(lines) + "\n")
    volume = tmp_path / "volume"
    volume.mkdir()
    with QueueServer() as queue:
        env = replay_env(
            tmp_path,
            script,
            BASE_PATH=str(volume),
            HF_ENDPOINT=endpoint,
            TRANSIENT_ANSWER_TIMEOUT="5",
            **queue.env(),
        )
        _bad_ledger(volume, env)
        job = queue.submit({"prompt": "x"})
        proc = start_worker(env, tmp_path)
        answer = json.loads(queue.wait_done(job, 60)["error"])
        assert proc.wait(60) == 1
    assert answer["type"] == "prestart_failed" and answer["category"] == "network"
    assert "http://***@127.0.0.1:9" in answer["message"]
    assert any("hf_***" in line for line in answer["tail"])
    failed = next(e for e in events(tmp_path) if e.get("event") == "worker.failed")
    assert "***@127.0.0.1:9" in failed["message"]
    outputs = [
        (tmp_path / "worker.out").read_bytes(),
        (tmp_path / "worker.err").read_bytes(),
        json.dumps(answer).encode(),
    ]
    assert len(outputs[0]) > PIPE_CUT  # the passthrough carried the long lines
    found = sum(out.count(s.encode()) for out in outputs for s in planted_secrets)
    assert found == 0
    reliability(
        f"secrets in vLLM's output, the environment and a quoted URL: {len(forms)} forms "
        "(URL credentials, *_KEY/*_PASSWORD/*_CREDENTIALS=, X-Api-Key/api-key/Authorization "
        "headers, password=, --hf-token/--api-key values, dict/JSON fields, hf_ tokens) plus "
        "tokens across the 1 MiB pipe cut and the 4096-character evidence cut; the crash-loop "
        "ledger full of bad entries",
        "failed-transient (network)",
        f"{len(planted_secrets)} values planted in the output and {len(PLANTED_ENV)} in the "
        "environment, found 0 times in stdout, events, the job's answer and its tail; the bad "
        "ledger entries ignored; exit 1",
    )


def _bad_ledger(volume, env) -> None:
    settings = load_settings(env)
    key = config_key(settings.vllm_command, settings.vllm_args)
    ledger = volume / LEDGER_NAME
    ledger.parent.mkdir(parents=True)
    bad = [{"at": "yesterday"}, None, {"at": 1.0, "category": ["x"]}, {"at": None}, "x"]
    ledger.write_text(json.dumps({key: bad}))


def test_vllm_never_outlives_a_killed_worker(tmp_path, reliability):
    """SIGKILL of the worker (no cleanup can run) still ends vLLM: the parent-death signal."""
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    stand_in = (
        "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
    )
    with QueueServer() as queue:
        env = worker_env(
            tmp_path,
            MODEL_NAME="stand-in/model",
            VLLM_COMMAND=f'{sys.executable} -c "{stand_in}" {fifo}',
            **queue.env(),
        )
        proc = start_worker(env, tmp_path)
        try:
            with fifo.open() as reader:  # blocks until the stand-in has started
                pid = int(reader.read())
            pidfd = os.pidfd_open(pid)
            # The SDK's heartbeat process is running: it has pinged the queue.
            queue.wait_for(lambda: queue.hits("ping"), 30, "a heartbeat ping")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
    try:
        ready, _, _ = select.select([pidfd], [], [], 30)
        assert ready, "the stand-in vLLM outlived the SIGKILLed worker"
    finally:
        os.close(pidfd)
        if not ready:
            os.kill(pid, signal.SIGKILL)
    heartbeat_left = group_alive(proc.pid)  # the worker's own group: its forked children
    if heartbeat_left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not heartbeat_left, "a process the worker forked (the SDK's heartbeat) outlived it"
    reliability(
        "worker SIGKILLed while vLLM runs (stand-in that never exits)",
        "gone",
        "vLLM ended by the parent-death signal (SIGTERM), the SDK's heartbeat by SIGKILL; "
        "no process left behind",
    )
