"""The one rule for what a secret is.

* :func:`is_secret` decides from a variable's (or flag's, or field's) name: its last
  word (ignoring trailing numbers) is one of :data:`SECRET_WORDS` (``HF_TOKEN``,
  ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``X-Api-Key``,
  ``--hf-token``), or one of its words is unmistakably secret (``SECRET``,
  ``PASSWORD``, ``CREDENTIALS``). ``AWS_ACCESS_KEY_ID`` or ``HF_TOKEN_PATH`` are not.
* :func:`secret_values` lists the values an environment must never show: those of
  secret names, passwords inside URLs (``http://user:pass@host``) and values given to
  secret flags (``--hf-token X`` inside ``VLLM_EXTRA_ARGS``).

Every place that needs to know (the redactor, the worker's messages about settings,
the crash-loop ledger key, the log pipeline) asks here. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache

# A name ending in one of these words holds a secret.
SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "KEY",
        "APIKEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PWD",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "AUTHORIZATION",
        "PASSPHRASE",
        "COOKIE",
    }
)
# A name holding one of these words anywhere holds a secret (AWS_SECRET_ACCESS_KEY_V2).
ALWAYS_SECRET_WORDS = frozenset({"SECRET", "PASSWORD", "PASSWD", "CREDENTIALS", "PASSPHRASE"})


# Lower-case spellings of the same words, as a regex fragment: a key in text
# ("api-key: ...", "password=...", "'hf_token': ...") ends in one of them.
KEY_WORDS_RE = (
    r"(?:token|api[_-]?key|access[_-]?key|private[_-]?key|secret[_-]?key|key|secret|password"
    r"|passwd|pass|pwd|credentials?|auth|authorization|passphrase|cookie)"
)
# A URL with credentials: scheme://user:password@ or scheme://token@
URL_USERINFO_RE = r"\b([a-zA-Z][a-zA-Z0-9+.\-]{0,30}://)([^\s/@?#\"'<>]+)@"
# A command-line flag whose value is a secret: --hf-token X, --api-key=X
SECRET_FLAG_RE = r"(--(?:[a-z0-9]+-){0,8}" + KEY_WORDS_RE + r")(?:=|\s+)"

# Exact values shorter than this are not searched for in text (they would hit
# ordinary words); their shapes (KEY=..., URLs) are still redacted.
MIN_SECRET_LENGTH = 6


# The patterns below compile on first use: the worker uses them, ``diagnose`` does not
# (RE2 redacts its output, diagnostics.redaction.redact), and compiling costs its run ~1 ms.
@cache
def _word_split() -> re.Pattern[str]:
    return re.compile(r"[^A-Z0-9]+")


@cache
def _url_userinfo() -> re.Pattern[str]:
    return re.compile(URL_USERINFO_RE)


@cache
def _secret_flag_value() -> re.Pattern[str]:
    return re.compile(SECRET_FLAG_RE + r"([^\s\"']+)", re.IGNORECASE)


def _words(name: str) -> list[str]:
    words = [w for w in _word_split().split(name.upper()) if w]
    while words and words[-1].isdigit():
        words.pop()
    return words


def is_secret(name: str) -> bool:
    """Whether values of the variable, flag or field ``name`` must never be shown."""
    words = _words(name)
    if not words:
        return False
    return words[-1] in SECRET_WORDS or any(w in ALWAYS_SECRET_WORDS for w in words)


def secret_flag(arg: str) -> bool:
    """Whether a command-line flag (``--hf-token``, ``--api-key=...``) carries a secret."""
    return arg.startswith("--") and is_secret(arg.split("=", 1)[0])


def url_credentials(text: str) -> list[str]:
    """The user-info parts (``user:password``, a token) of URLs in ``text``, and the
    passwords; each also percent-decoded, and ``user:password`` as HTTP basic auth sends
    it (base64), the form a server that echoes its request's headers repeats."""
    import base64  # only here: ``diagnose`` never calls this (~1 ms of its run)
    from urllib.parse import unquote

    found: list[str] = []
    for match in _url_userinfo().finditer(text):
        userinfo = match.group(2)
        plain = unquote(userinfo)
        found += [userinfo, plain]
        if ":" in userinfo:
            found += [userinfo.split(":", 1)[1], plain.split(":", 1)[1]]
            found.append(base64.b64encode(plain.encode()).decode())
    return found


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Every value in ``env`` that must never be shown, longest first."""
    values: set[str] = set()
    for name, value in env.items():
        if not value:
            continue
        if is_secret(name):
            values.add(value)
            values.add(value.strip())
        values.update(url_credentials(value))
        values.update(m.group(2) for m in _secret_flag_value().finditer(value))
    return sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=lambda v: (-len(v), v))


def without_secret_args(args: Iterable[str]) -> list[str]:
    """``args`` minus secret flags and their values (``--hf-token X``, ``--api-key=X``)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if secret_flag(arg):
            skip = "=" not in arg
            continue
        kept.append(_url_userinfo().sub(r"\1***@", arg))
    return kept
