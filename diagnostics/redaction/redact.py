"""Remove secrets from text before it is shown, and cut long text where no secret splits.

What is redacted (every form the worker can recognise; what *is* a secret is decided
in :mod:`diagnostics.redaction.secrets`):

* exact secret values (from the environment: :func:`diagnostics.redaction.secrets.secret_values`);
* token shapes: ``hf_...``, ``sk-...``, ``rpa_...``, ``ghp_...``;
* credentials in URLs: ``scheme://user:password@host`` and ``scheme://token@host``;
* ``Authorization: Bearer ...`` and a bare ``Bearer ...``;
* a value after a secret key: ``HF_TOKEN=...``, ``X-Api-Key: ...``, ``password=...``,
  ``'api_key': ['...']``, ``"password": "..."``;
* a value after a secret flag: ``--hf-token ...``, ``--api-key=...``.

Every pattern runs in RE2 (linear time, whatever the line). Text cut to a length must
be cut with :func:`safe_cut` so that no secret is split between the kept part and the
rest (a split secret is no longer recognisable on either side).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache

import re2

from diagnostics.redaction.secrets import (
    KEY_WORDS_RE,
    MIN_SECRET_LENGTH,
    SECRET_FLAG_RE,
    URL_USERINFO_RE,
)

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

_TOKEN_SHAPES = re2.compile(
    r"\b(hf_)[A-Za-z0-9]{20,}|\b(sk-(?:proj-|ant-)?|rpa_|gh[pousr]_|glpat-|xox[abpr]-)"
    r"[A-Za-z0-9_\-]{16,}",
    _OPTIONS,
)
_URL = re2.compile(URL_USERINFO_RE, _OPTIONS)
_AUTHORIZATION = re2.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?)"
    r"[^\s\"',;}]+",
    _OPTIONS,
)
_BEARER = re2.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}", _OPTIONS)
# A key: a word or dotted/dashed/underscored name ending in a secret word.
_KEY = r"\b(?:[A-Za-z0-9]+[_.\-])*" + KEY_WORDS_RE
_KEY_VALUE = re2.compile(
    r"(?i)(" + _KEY + r"[\"']?\s*[:=]\s*\[?\s*)"
    r"(?:\"([^\"\n]*)\"?|'([^'\n]*)'?|([^\s\"',;}\]&)]+))",
    _OPTIONS,
)
_FLAG_VALUE = re2.compile(r"(?i)(" + SECRET_FLAG_RE + r"[\"']?)([^\s\"']+)", _OPTIONS)


@cache
def _cut_patterns() -> tuple[re2._Regexp, re2._Regexp, re2._Regexp]:
    """Compiled on first use (only text longer than its limit is cut: ~0.4 ms otherwise
    spent by every ``diagnose`` run). Text that ends in a key still waiting for its value;
    a key at the end of the kept text whose ":"/"=" starts the rest ('api_key|': [...]);
    that ":"/"=" at the start of the rest."""
    open_key = re2.compile(
        r"(?i)(?:" + _KEY + r"(?:[\"']\s*[:=]?|\s*[:=])\s*\[?\s*[\"']?"
        r"(?:(?:bearer|basic|token|digest)\s*)?"
        r"|bearer\s*|--(?:[a-z0-9]+-)*" + KEY_WORDS_RE + r"=?\s*[\"']?)$",
        _OPTIONS,
    )
    key_at_end = re2.compile(r"(?i)" + _KEY + r"[\"']?\s*$", _OPTIONS)
    return open_key, key_at_end, re2.compile(r"^[\"']?\s*[:=]", _OPTIONS)


_NOT_SECRET = frozenset(
    {"", "none", "null", "true", "false", "<redacted>", "***", "?", "...", "bearer", "basic"}
    | {"token", "digest"}
)

# Every shape above needs one of these (lower-cased); most lines have none and skip them.
_TRIGGERS = (
    "hf_",
    "://",
    "auth",
    "bearer",
    "token",
    "secret",
    "pass",
    "pwd",
    "key",
    "credential",
    "cookie",
    "sk-",
    "rpa_",
    "gh",
    "glpat-",
    "xox",
)


def _key_value(match) -> str:
    quoted = match.group(2) if match.group(2) is not None else match.group(3)
    value = quoted if quoted is not None else match.group(4)
    if value.strip().lower() in _NOT_SECRET:
        return match.group(0)
    if quoted is None:
        return f"{match.group(1)}***"
    quote = '"' if match.group(2) is not None else "'"
    closing = quote if match.group(0).endswith(quote) and len(match.group(0)) > 1 else ""
    return f"{match.group(1)}{quote}***{closing}"


def _flag_value(match) -> str:
    if match.group(3).lower() in _NOT_SECRET:
        return match.group(0)
    return f"{match.group(1)}***"


def _shape(match) -> str:
    return f"{match.group(1) or match.group(2)}***"


_SHAPES: tuple[tuple[re2._Regexp, Callable | str], ...] = (
    (_TOKEN_SHAPES, _shape),
    (_URL, r"\1***@"),
    (_AUTHORIZATION, r"\1***"),
    (_FLAG_VALUE, _flag_value),
    (_KEY_VALUE, _key_value),
    (_BEARER, r"\1***"),  # last: its word may be the key of a form above ("Bearer KEY=")
)


class Redactor:
    """Redacts known secret shapes and, optionally, exact secret values."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._secrets = sorted(
            {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True
        )

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        lowered = text.lower()
        if not any(word in lowered for word in _TRIGGERS):
            return text
        for pattern, replacement in _SHAPES:
            text = pattern.sub(replacement, text)
        return text


redact = Redactor()

# A secret never spans these (a token, a password in a URL or after a key has none).
_BREAKS = " \t\n\r\f\v\"',;()[]{}<>|`"
_OPEN_KEY_WINDOW = 512


def safe_cut(text: str, limit: int, max_backoff: int | None = None) -> int:
    """An index ``<= limit`` to cut ``text`` at so that no secret is split.

    Backs off to the start of the word the cut would split (a word: no whitespace,
    quote, bracket, comma or semicolon), and further when what is kept ends in a key
    still waiting for its value (``Authorization: Bearer``, ``--hf-token``, ``"token":``).
    With ``max_backoff`` (a cut whose rest is kept, like a pipe's), gives up after that
    many characters and cuts at ``limit``; without it (the rest is dropped) it may back
    off to 0.
    """
    if len(text) <= limit:
        return len(text)
    floor = 0 if max_backoff is None else max(0, limit - max_backoff)
    cut = limit
    open_key, key_at_end, separator_first = _cut_patterns()
    for _ in range(8):
        start = _word_start(text, cut, floor)
        if start is None:
            return limit  # one unbroken word longer than max_backoff
        window = text[max(floor, start - _OPEN_KEY_WINDOW) : start]
        opened = open_key.search(window)
        if (opened is None or opened.start() == opened.end()) and separator_first.search(
            text[start : start + 8]
        ):
            opened = key_at_end.search(window)
        if opened is None or opened.start() == opened.end():
            return start
        cut = start - (len(window) - opened.start())
        if cut <= floor:
            return 0 if floor == 0 else limit
    return cut


def _word_start(text: str, cut: int, floor: int) -> int | None:
    """``cut`` when it falls between words, else where the word around it starts."""
    if cut <= 0 or text[cut - 1] in _BREAKS or text[cut] in _BREAKS:
        return cut
    start = max(text.rfind(c, floor, cut) for c in _BREAKS) + 1
    if start == 0 and floor == 0:
        return 0
    return start if start > floor else None


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, never through a secret."""
    return text[: safe_cut(text, limit)]


def safe_cut_bytes(data: bytes, limit: int, max_backoff: int) -> int:
    """:func:`safe_cut` for raw output (decoded as UTF-8, replacing what is invalid)."""
    if len(data) <= limit:
        return len(data)
    lo = max(0, limit - max_backoff)
    window = data[lo : limit + 16].decode("latin-1")  # one character per byte: offsets match
    cut = safe_cut(window, limit - lo)
    return lo + cut if cut > 0 else limit
