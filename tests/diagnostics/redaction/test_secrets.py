"""The one secret rule (diagnostics.redaction.secrets) and the redactor: every form, and cuts that
never split a secret. Property tests plant a secret in each form into generated text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnostics.redaction.redact import Redactor, redact, safe_cut, safe_cut_bytes, truncate
from diagnostics.redaction.secrets import is_secret, secret_values, without_secret_args
from tests.support import tiers


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "RUNPOD_API_KEY",
        "RUNPOD_AI_API_KEY",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "DB_PASSWORD",
        "SMTP_PASS",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "MY_SECRET",
        "API_KEY_2",
        "X-Api-Key",
        "api-key",
        "--hf-token",
        "--api-key",
        "hf_token",
    ],
)
def test_secret_names(name):
    assert is_secret(name)


@pytest.mark.parametrize(
    "name",
    [
        "MAX_NUM_BATCHED_TOKENS",
        "TOKENIZER_NAME",
        "TOKENIZER_REVISION",
        "AWS_ACCESS_KEY_ID",
        "HF_TOKEN_PATH",
        "SSL_KEYFILE",
        "--ssl-keyfile",
        "--tokenizer",
        "--max-num-batched-tokens",
        "MODEL_NAME",
        "HF_HUB_ENABLE_HF_TRANSFER",
        "BYPASS",
        "",
    ],
)
def test_not_secret_names(name):
    assert not is_secret(name)


def test_secret_values_cover_names_urls_and_flags():
    env = {
        "OPENAI_API_KEY": "sk-abcdefghijkl",
        "HF_ENDPOINT": "https://user:urlpassword@hub.example",
        "VLLM_EXTRA_ARGS": "--max-model-len 9 --hf-token flagvalue123",
        "MAX_MODEL_LEN": "4096",
        "SHORT_TOKEN": "abc",  # too short to search for; its shapes are still redacted
    }
    values = secret_values(env)
    assert {"sk-abcdefghijkl", "urlpassword", "user:urlpassword", "flagvalue123"} <= set(values)
    assert "4096" not in values and "abc" not in values
    assert values == sorted(values, key=lambda v: (-len(v), v))


def test_without_secret_args():
    args = ["--model", "org/hf_alpha", "--hf-token", "x", "--api-key=y", "https://u:p@h/m"]
    assert without_secret_args(args) == ["--model", "org/hf_alpha", "https://***@h/m"]


SECRET = "Zq8Lr2Vx9Kp4Tn7Wm3Hs6Jd1"
FORMS = [
    f"https://user:{SECRET}@host.example/x",
    f"https://{SECRET}@git.example/repo",
    f"OPENAI_API_KEY={SECRET}",
    f"AWS_SECRET_ACCESS_KEY={SECRET}",
    f"X-Api-Key: {SECRET}",
    f"api-key: {SECRET}",
    f"password={SECRET}",
    f"?token={SECRET}&x=1",
    f"Authorization: Bearer {SECRET}",
    f"authorization: Basic {SECRET}",
    f"Bearer {SECRET}",
    f"--hf-token {SECRET}",
    f"--api-key={SECRET}",
    f'--api-key "{SECRET}"',
    f"Namespace(hf_token='{SECRET}')",
    f"{{'api_key': ['{SECRET}']}}",
    f'{{"password": "{SECRET}"}}',
    f"DEPLOY_CREDENTIALS: {SECRET}",
    f"hf_{SECRET}",
    f"sk-proj-{SECRET}",
    f"rpa_{SECRET}",
]


@pytest.mark.parametrize("form", FORMS)
def test_every_form_is_redacted(form):
    redacted = redact(f"INFO something {form} more")
    assert SECRET not in redacted
    assert "***" in redacted


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=100 tokenizer=org/tok pad_token_id=3 bypass=1",
        "hf_token=None api_key: null",
        "KeyError: 'model.layers.0'",
        "Authorization: Bearer ***",
        "ValueError: max_model_len (8192) is greater than the derived max_model_len (2048)",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == text


def test_exact_values_are_redacted_in_any_context():
    redactor = Redactor(["s3cr3t-value"])
    assert redactor("x=s3cr3t-value;y") == "x=***;y"
    assert Redactor(["abc"])("abc") == "abc"  # too short to search for


_CONTEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FF), max_size=80
)


@settings(
    max_examples=tiers.examples(300),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@given(before=_CONTEXT, form=st.sampled_from(FORMS), after=_CONTEXT)
def test_a_planted_form_never_survives_redaction(before, form, after):
    assert SECRET not in redact(f"{before} {form} {after}")


@settings(
    max_examples=tiers.examples(300),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@given(
    before=_CONTEXT,
    form=st.sampled_from(FORMS),
    after=_CONTEXT,
    shift=st.integers(min_value=0, max_value=60),
)
def test_no_cut_splits_a_secret(before, form, after, shift):
    """Cut anywhere near the secret: kept part and rest, each redacted alone, hide it, and no
    more than a secret's length of its characters survives in either."""
    text = f"{before} {form} {after}"
    limit = max(1, text.index(SECRET) + shift - 10)
    if limit >= len(text):
        return
    kept = text[: safe_cut(text, limit, max_backoff=4096)]
    rest = text[len(kept) :]
    for part in (redact(kept), redact(rest), redact(truncate(text, limit))):
        assert SECRET[:8] not in part and SECRET[-8:] not in part
    raw = text.encode("utf-8")
    cut = safe_cut_bytes(raw, len(text[:limit].encode("utf-8")), 4096)
    for part in (raw[:cut], raw[cut:]):
        shown = redact(part.decode("utf-8", "replace"))
        assert SECRET[:8] not in shown and SECRET[-8:] not in shown


def test_a_cut_falls_back_to_the_limit_inside_one_huge_word():
    text = "x" * 10_000
    assert safe_cut(text, 5000, max_backoff=100) == 5000
    assert safe_cut(text, 5000) == 0  # the rest is dropped: cut before the word
    assert safe_cut_bytes(b"z" * 200, 120, 50) == 120
