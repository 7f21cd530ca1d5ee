"""Reading a `vllm serve` argument list as vLLM's argparse reads it: the value a flag
ends up with (``last_value``). Pure."""

from __future__ import annotations

from collections.abc import Sequence


def last_value(args: Sequence[str], flag: str, *, boolean: bool = False) -> str | None:
    """The value of the last ``flag`` in ``args`` (``--f v`` or ``--f=v``; ``_`` in a
    name reads as ``-``); None when it is absent. A ``boolean`` flag takes no value:
    ``--f`` alone reads as "true" (``--f=v`` as ``v``). A value flag with nothing after
    it is passed over."""
    found = None
    for index, token in enumerate(args):
        name, has_inline, inline = token.partition("=")
        if name.replace("_", "-") != flag:
            continue
        if has_inline:
            found = inline
        elif boolean:
            found = "true"
        elif index + 1 < len(args):
            found = args[index + 1]
    return found
