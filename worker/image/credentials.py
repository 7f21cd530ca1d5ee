"""The bake's credentials: the Hub token and the hub's endpoint, and hiding them.

The token comes from ``HF_TOKEN`` or the BuildKit secret file ``/run/secrets/HF_TOKEN``,
the hub from ``HF_ENDPOINT`` or the secret file ``/run/secrets/HF_ENDPOINT`` (a mirror
whose URL holds credentials); neither is ever printed: the endpoint is shown without its
``user:password@`` (``public_endpoint``) and every hub text has the token and those
credentials taken out (``hide``, with the one secret rule,
``diagnostics.redaction.secrets``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from diagnostics.redaction.redact import Redactor
from diagnostics.redaction.secrets import secret_values

SECRET_FILE = Path("/run/secrets/HF_TOKEN")
ENDPOINT_SECRET_FILE = Path("/run/secrets/HF_ENDPOINT")
# scheme://user:password@ or scheme://token@ in a URL: dropped from the endpoint shown.
_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]{0,30}://)[^\s/@?#\"'<>]+@")


def read_token(env: Mapping[str, str], secret_file: Path = SECRET_FILE) -> str | None:
    """The Hub token from ``HF_TOKEN``, else the BuildKit secret file, else None."""
    return _variable_or_file(env, "HF_TOKEN", secret_file)


def read_endpoint(env: Mapping[str, str], secret_file: Path = ENDPOINT_SECRET_FILE) -> str | None:
    """The hub to bake from: ``HF_ENDPOINT``, else the BuildKit secret file, else None."""
    return _variable_or_file(env, "HF_ENDPOINT", secret_file)


def _variable_or_file(env: Mapping[str, str], name: str, secret_file: Path) -> str | None:
    """``name``'s value, stripped, else ``secret_file``'s text (unreadable: None)."""
    value = env.get(name, "").strip()
    if value:
        return value
    try:
        value = secret_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value or None


def public_endpoint(endpoint: str) -> str:
    """``endpoint`` as it may be shown: without ``user:password@``."""
    return _USERINFO.sub(r"\1", endpoint)


def secrets_of(token: str | None, endpoint: str | None) -> list[str]:
    """The exact values never to show: the token and the endpoint's credentials (the one
    secret rule, ``diagnostics.redaction.secrets``)."""
    return secret_values({"HF_TOKEN": token or "", "HF_ENDPOINT": endpoint or ""})


def hide(text: str, secrets: Sequence[str]) -> str:
    return Redactor(secrets)(text)
