"""Remove secrets from text before it is shown: HF tokens, Authorization values, KEY=... pairs."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PATTERNS = (
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), "hf_***"),
    (
        re.compile(
            r"(?i)\b(authorization\b[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?[^\s\"',}]+"
        ),
        r"\1***",
    ),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1***"),
    (
        re.compile(
            r"(?i)\b((?:HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HUGGINGFACE_TOKEN|RUNPOD_AI_API_KEY|RUNPOD_API_KEY"
            r"|[A-Z0-9_]*(?:_TOKEN|_SECRET|_PASSWORD|API_KEY))[\"']?\s*[=:]\s*[\"']?)(?!None\b|null\b)[^\s\"',}]+"
        ),
        r"\1***",
    ),
    (
        re.compile(
            r"(?i)(['\"](?:hf_token|token|api_key|password)['\"]\s*:\s*['\"])(?!None)[^'\"]+"
        ),
        r"\1***",
    ),
)


# Every pattern above needs one of these words; most lines have none and skip the rest.
_TRIGGER_WORDS = ("hf_", "auth", "bearer", "token", "secret", "password", "api_key", "api-key")


class Redactor:
    """Redacts known secret shapes and, optionally, exact secret values."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        lowered = text.lower()
        if not any(word in lowered for word in _TRIGGER_WORDS):
            return text
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text


redact = Redactor()
