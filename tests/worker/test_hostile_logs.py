"""Log events stay small and secret-free whatever they carry, and every part of the worker
decides what a secret is by the one rule (diagnostics.redaction.secrets)."""

from __future__ import annotations

import json

from diagnostics.redaction.redact import Redactor
from diagnostics.redaction.secrets import is_secret, secret_values
from worker.config import parsers
from worker.crashloop.breaker import config_key
from worker.seams import logs
from worker.supervision.supervisor import secrets_of


def test_an_event_is_bounded_and_redacted_at_every_depth():
    processor = logs._redacting(Redactor(["exact-secret-value"]))
    event = processor(
        None,
        "info",
        {
            "event": "job.bad_input",
            "problem": "keys found: " + ", ".join(f"key-{i}" for i in range(300_000)),
            "nested": {"args": ["--api-key", "--api-key=abcdef123456", "exact-secret-value"]},
            "tail": ["OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx"] * 500,
            "error": ValueError("https://user:pw123456@host/x"),
            "count": 3,
        },
    )
    line = json.dumps(event)
    assert len(line) < 64 * 1024
    assert len(event["problem"]) < logs.MAX_FIELD + 100
    assert "more characters" in event["problem"]
    for secret in ("abcdef123456", "exact-secret-value", "sk-proj-abc", "pw123456"):
        assert secret not in line
    assert event["count"] == 3


def test_every_part_uses_the_one_secret_rule():
    env = {
        "OPENAI_API_KEY": "sk-abcdefghijkl",
        "MAX_NUM_BATCHED_TOKENS": "8192",
        "HF_ENDPOINT": "https://user:urlpassword@hub.example",
    }
    assert secrets_of(env) == secret_values(env)
    assert "urlpassword" in secrets_of(env)
    for name in ("OPENAI_API_KEY", "MAX_NUM_BATCHED_TOKENS", "AWS_ACCESS_KEY_ID", "DB_PASS"):
        assert parsers.is_secret(name) is is_secret(name)
    # The ledger key keeps what is not secret: two models with hf_ in their names differ.
    assert config_key(["vllm"], ["--model", "org/hf_alpha"]) != config_key(
        ["vllm"], ["--model", "org/hf_beta"]
    )
