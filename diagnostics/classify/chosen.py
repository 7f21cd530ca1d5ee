"""A value the start was configured with, quoted by an error: the user's choice.

vLLM logs its settings as a start begins (V0's ``args: Namespace(...)``, the engine's
``Initializing an LLM engine (vX) with config: ...``, V1's ``non-default args: {...}``;
phase markers in ``rules/00-phases.yaml`` capture them as ``settings``). An error raised
by vLLM's own code that quotes one of those values (``KeyError: 'AVG'`` under
``pooling_type='AVG'``) rejected what the user chose: bad_config, whatever module raised
it (issue 21, section 4). Values every start has by default say nothing.

And whether a retry answered a failure (:func:`went_further`): it got further, or the
user changed a setting both attempts logged.

Pure: text in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from diagnostics.classify.progress import PHASE_ORDER
from diagnostics.model import Category, State

# The phase markers' named group that holds the settings (rules/00-phases.yaml).
SETTINGS = "settings"
_QUOTED = re.compile(r"""(['"])(?P<value>[^'"\s]{2,80})\1""")
# or bare, ending the message after a colon ("Unsupported connector type: NIXLConnector")
_BARE = re.compile(r":\s+(?P<value>[\w.\-/]{3,80})\.?\s*$")
# The defaults most settings take: quoting one names no choice of the user's.
_DEFAULTS = frozenset({"auto", "main", "none", "true", "false", "default", "generate"})


def chosen_setting(message: str, settings: str) -> str | None:
    """``key=value`` of the setting whose value ``message`` quotes first (or names
    bare at its end, after a colon), or None."""
    if not settings:
        return None
    for quoted in (*_QUOTED.finditer(message), *_BARE.finditer(message)):
        value = quoted.group("value")
        if value.lower() in _DEFAULTS:
            continue
        escaped = re.escape(value)
        found = re.search(rf"""(?P<key>[\w.-]+)['"]?\s*[=:]\s*(['"]){escaped}\2""", settings)
        if found is not None:
            return f"{found.group('key')}={found.group(2)}{value}{found.group(2)}"
    return None


# A setting as vLLM logs its arguments: ``key=value`` (V0's Namespace, the engine's
# config line) or ``'key': value`` (V1's non-default args).
_SETTING = r"""['"]?(\w+)['"]?\s*[=:]\s*('[^']*'|"[^"]*"|[^,(){}\s]+)"""


def went_further(
    failed: tuple[State, Mapping[str, str]],
    last: tuple[State, Mapping[str, str]],
    category: Category | None,
) -> bool:
    """Whether the last attempt (its phase and logged settings, as its classifier ends
    under way) answered the earlier failure (the phase and settings where it was found):
    it got further than the phase the failure stopped the earlier one in (the network,
    the token or the host changed since), or a setting both log on the same kind of line
    has another value (the user changed what failed). An elided setting (``...``) is not
    compared. The engine's memory (``category``: oom, kv_cache) runs out only once it
    loads: such a failure stopped its attempt loading, whatever the paste kept of it."""
    (phase, settings), (now, later) = failed, last
    if now not in PHASE_ORDER[:-1] or phase not in PHASE_ORDER:
        return False  # a "last attempt" up is another program's (the whole log said so)
    if category in (Category.OOM, Category.KV_CACHE) and phase is not State.READY:
        phase = State.LOADING
    if PHASE_ORDER.index(now) > PHASE_ORDER.index(phase):
        return True
    for kind in settings.keys() & later.keys():
        before, after = (
            dict(re.findall(_SETTING, settings[kind])),
            dict(re.findall(_SETTING, later[kind])),
        )
        if any(after[key] != value for key, value in before.items() if key in after):
            return True
    return False
