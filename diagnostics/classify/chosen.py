"""A value the start was configured with, quoted by an error: the user's choice.

vLLM logs its settings as a start begins (V0's ``args: Namespace(...)``, the engine's
``Initializing an LLM engine (vX) with config: ...``, V1's ``non-default args: {...}``;
phase markers in ``rules/00-phases.yaml`` capture them as ``settings``). An error raised
by vLLM's own code that quotes one of those values (``KeyError: 'AVG'`` under
``pooling_type='AVG'``) rejected what the user chose: bad_config, whatever module raised
it (issue 21, section 4). Values every start has by default say nothing.

Pure: text in, text out.
"""

from __future__ import annotations

import re

# The phase markers' named group that holds the settings (rules/00-phases.yaml).
SETTINGS = "settings"
_QUOTED = re.compile(r"""(['"])(?P<value>[^'"\s]{2,80})\1""")
# The defaults most settings take: quoting one names no choice of the user's.
_DEFAULTS = frozenset({"auto", "main", "none", "true", "false", "default", "generate"})


def chosen_setting(message: str, settings: str) -> str | None:
    """``key=value`` of the setting whose value ``message`` quotes first, or None."""
    if not settings:
        return None
    for quoted in _QUOTED.finditer(message):
        value = quoted.group("value")
        if value.lower() in _DEFAULTS:
            continue
        escaped = re.escape(value)
        found = re.search(rf"""(?P<key>[\w.-]+)['"]?\s*[=:]\s*(['"]){escaped}\2""", settings)
        if found is not None:
            return f"{found.group('key')}={quoted.group(0)}"
    return None
