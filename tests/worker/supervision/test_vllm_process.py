"""worker.supervision.vllm_process with small real processes (python -c) standing in for vLLM."""

from __future__ import annotations

import asyncio
import os
import sys

from diagnostics.formats.streams import MAX_LINE
from tests.support.vllm_env import group_alive
from worker.supervision.vllm_process import ProcessPhase, VllmProcess


def _process(code: str, grace_s: float = 5.0) -> VllmProcess:
    return VllmProcess([sys.executable, "-c", code], dict(os.environ), grace_s)


async def _all_lines(process: VllmProcess) -> list[bytes]:
    assert await process.spawn()
    lines = [line async for line in process.lines()]
    await process.wait()
    return lines


def test_lines_keep_their_newline_and_a_last_line_without_one() -> None:
    process = _process("import sys; sys.stdout.write('a\\nb\\r\\nc')")
    assert asyncio.run(_all_lines(process)) == [b"a\n", b"b\r\n", b"c"]


def test_a_line_longer_than_the_limit_comes_in_pieces() -> None:
    process = _process(f"import sys; sys.stdout.write('x' * {MAX_LINE * 2 + 3} + '\\n')")
    lines = asyncio.run(_all_lines(process))
    assert [len(line) for line in lines] == [MAX_LINE, MAX_LINE, 4]


def test_a_stop_before_the_spawn_starts_nothing() -> None:
    process = _process("print('never')")
    process.request_stop()
    assert asyncio.run(process.spawn()) is False
    assert process.pid is None and not process.running
    assert process.phase is ProcessPhase.STOPPING


def test_kill_escalates_to_sigkill_and_takes_the_whole_group() -> None:
    """A process that ignores SIGTERM (vLLM 0.32 does while it initialises) and a child in
    its group are both gone after the grace period."""
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    process = _process(code, grace_s=0.2)

    async def run() -> int | None:
        assert await process.spawn()
        async for _line in process.lines():
            break  # "up": the child exists
        await process.kill()
        return process._proc.returncode if process._proc else None

    assert asyncio.run(run()) == -9
    assert process.pid is not None and not group_alive(process.pid)
