"""What a streamed job's output must look like, for the tests that check one."""

from __future__ import annotations


def check_sse_chunks(chunks: list[object]) -> None:
    """Each chunk is what vLLM had sent when the worker read it: one or more whole SSE
    events (the last token and ``[DONE]`` often come together). Joined, they are several
    events ending with ``data: [DONE]``, not one body."""
    assert all(isinstance(c, str) and c.startswith("data: ") for c in chunks), chunks
    assert all(isinstance(c, str) and c.endswith("\n\n") for c in chunks), chunks
    events = "".join(str(c) for c in chunks).split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]", events[-3:]
    assert len(events) > 3, events  # role, tokens, finish, [DONE]
