"""Load-balancing mode, the pure parts: which mode the environment selects, the
endpoint's ports and health path, health codes per state, the not-ready answer."""

from __future__ import annotations

import json

import pytest

from worker.config.errors import ConfigError
from worker.config.settings import WORKER_ENV
from worker.lb import bodies
from worker.lb.guard import connection_cap
from worker.lb.health import health
from worker.lb.mode import Endpoint, Mode, read_endpoint, select_mode
from worker.supervision.machine import WorkerState as S


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        ({}, Mode.QUEUE),
        ({"PORT": "80"}, Mode.LB),
        ({"PORT_HEALTH": "81"}, Mode.LB),
        ({"PORT": " "}, Mode.QUEUE),
        (
            {"PORT": "80", "RUNPOD_WEBHOOK_GET_JOB": "https://api.runpod.ai/v2/x/job-take"},
            Mode.QUEUE,
        ),
        ({"WORKER_MODE": "lb"}, Mode.LB),
        ({"WORKER_MODE": "LB", "RUNPOD_WEBHOOK_GET_JOB": "https://q"}, Mode.LB),
        ({"WORKER_MODE": "queue", "PORT": "80"}, Mode.QUEUE),
        ({"WORKER_MODE": "auto", "PORT": "8080"}, Mode.LB),
    ],
)
def test_the_environment_selects_the_mode(env, mode):
    endpoint, error = read_endpoint(env)
    assert error is None
    assert endpoint.mode is mode


def test_ports_and_health_path_default_as_documented():
    assert read_endpoint({"WORKER_MODE": "lb"})[0] == Endpoint(Mode.LB, 80, 80, "/ping")
    endpoint, _ = read_endpoint({"PORT": "8080", "PORT_HEALTH": "8081", "HEALTH_CHECK_PATH": "/h"})
    assert endpoint == Endpoint(Mode.LB, 8080, 8081, "/h")
    assert read_endpoint({"PORT": "8080"})[0].health_port == 8080


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({"WORKER_MODE": "serverless", "PORT": "80"}, "WORKER_MODE"),
        ({"PORT": "http"}, "PORT"),
        ({"PORT": "70000"}, "PORT"),
        ({"PORT": "80", "PORT_HEALTH": "0"}, "PORT_HEALTH"),
        ({"PORT": "80", "HEALTH_CHECK_PATH": "ping"}, "HEALTH_CHECK_PATH"),
        ({"PORT": "80", "HEALTH_CHECK_PATH": "/ping?x=1"}, "HEALTH_CHECK_PATH"),
        ({"PORT": "8000"}, "PORT"),  # VLLM_PORT's default: vLLM could not listen
        ({"PORT": "80", "PORT_HEALTH": "9000", "VLLM_PORT": "9000"}, "PORT_HEALTH"),
    ],
)
def test_a_bad_value_is_reported_and_its_default_used(env, var):
    endpoint, error = read_endpoint(env)
    assert isinstance(error, ConfigError) and error.var == var
    assert endpoint.mode is Mode.LB  # still answers on its ports with the error


def test_mode_selection_is_pure_on_the_forced_value():
    assert select_mode("queue", {"PORT": "80"}) is Mode.QUEUE
    assert select_mode("lb", {}) is Mode.LB


def test_the_lb_variables_are_the_workers_not_vllm_flags():
    # PORT would otherwise become vLLM's --port and move it off VLLM_PORT.
    assert {"WORKER_MODE", "PORT", "PORT_HEALTH", "HEALTH_CHECK_PATH"} <= WORKER_ENV


@pytest.mark.parametrize(
    ("state", "status"),
    [
        (S.STARTING, 204),
        (S.DOWNLOADING, 204),
        (S.LOADING, 204),
        (S.READY, 200),
        (S.FAILED_PERMANENT, 200),
        (S.FAILED_TRANSIENT, 503),
        (S.STOPPED, 503),
    ],
)
def test_health_codes_per_state(state, status):
    answer = health(state)
    assert answer.status == status
    assert (answer.body == b"") == (status == 204)


def test_not_ready_names_the_phase_and_when_to_retry():
    answer = bodies.not_ready(S.DOWNLOADING)
    assert answer.status == 503
    assert (b"retry-after", str(bodies.RETRY_AFTER_S).encode()) in answer.headers
    error = json.loads(answer.body)["error"]
    assert error["type"] == "not_ready" and error["phase"] == "downloading"
    assert error["code"] == 503 and "downloading" in error["message"]


def test_the_limits_come_from_the_lb_settings():
    env = {
        "WORKER_MODE": "lb",
        "LB_HEADER_TIMEOUT": "2.5",
        "LB_BODY_TIMEOUT": "7",
        "LB_MAX_BODY_BYTES": "1024",
        "LB_MAX_CONNECTIONS": "50",
    }
    endpoint, error = read_endpoint(env)
    assert error is None
    limits = endpoint.limits
    assert (limits.header_timeout_s, limits.body_timeout_s) == (2.5, 7.0)
    assert (limits.body_bytes, limits.connections) == (1024, 50)
    assert (limits.header_bytes, limits.header_count) == (64 * 1024, 100)
    endpoint, error = read_endpoint({**env, "LB_MAX_CONNECTIONS": "0"})
    assert error is not None and error.var == "LB_MAX_CONNECTIONS"
    assert endpoint.limits.connections == 1000  # the default, while the error is answered


@pytest.mark.parametrize(
    ("limit", "nofile", "cap"),
    [
        (1000, 256, 60),
        (1000, 1024, 444),
        (1000, 2136, 1000),
        (1000, 1 << 20, 1000),
        (5, 1 << 20, 5),
        (1000, 64, 1),
    ],
)
def test_port_connections_fit_under_the_descriptor_limit(limit, nofile, cap):
    assert connection_cap(limit, nofile) == cap


def test_an_answer_holding_an_undecodable_byte_is_still_sent():
    # Was: a 500 with UnicodeEncodeError when a message carried MODEL_NAME's byte 0xff.
    answer = bodies._answer(503, {"message": "model org/m\udcff is gone"})
    assert json.loads(answer.body)["error"]["message"] == "model org/m\udcff is gone"
